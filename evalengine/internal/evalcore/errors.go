package evalcore

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/fadcedab/adk/internal/coded"
	"github.com/fadcedab/adk/internal/jsonlimit"
)

// Error codes. They are the contract's stable strings (CONTRACTS §5): they
// go on the wire, into exit messages and into tests, so they never change.
const (
	// Eval set loading and validation (§5.1).
	CodeInvalidEvalSet             = "invalid_eval_set" // wraps a JSON limit or syntax code in Reason
	CodeEvalSetMustBeObject        = "eval_set_must_be_object"
	CodeUnsupportedSchemaVersion   = "unsupported_eval_set_schema_version"
	CodeInvalidEvalSetID           = "invalid_eval_set_id"
	CodeInvalidEvalSetVersion      = "invalid_eval_set_version"
	CodeInvalidEvalSetName         = "invalid_eval_set_name"
	CodeInvalidEvalSetDescription  = "invalid_eval_set_description"
	CodeInvalidEvalCases           = "invalid_eval_cases"
	CodeCaseLimitExceeded          = "eval_set_case_limit_exceeded"
	CodeInvalidEvalCase            = "invalid_eval_case"
	CodeInvalidEvalCaseID          = "invalid_eval_case_id"
	CodeDuplicateCaseID            = "duplicate_eval_case_id"
	CodeCaseHasNoTurns             = "eval_case_has_no_turns"
	CodeTurnLimitExceeded          = "eval_case_turn_limit_exceeded"
	CodeInvalidEvalTurn            = "invalid_eval_turn"
	CodeInvalidEvalTurnID          = "invalid_eval_turn_id"
	CodeDuplicateTurnID            = "duplicate_eval_turn_id"
	CodeMissingTurnInput           = "missing_eval_turn_input"
	CodeInvalidEvalMetadata        = "invalid_eval_metadata"
	CodeUnknownSetKeys             = "unknown_eval_set_keys"
	CodeUnknownCaseKeys            = "unknown_eval_case_keys"
	CodeUnknownTurnKeys            = "unknown_eval_turn_keys"
	CodeValidationTimeout          = "evaluation_validation_timeout"
	CodeUnsupportedGoogleCase      = "unsupported_google_adk_eval_case"
	CodeInvalidGoogleEvalSet       = "invalid_google_adk_eval_set"
	CodeUnrecognisedEvalSetFormat  = "unrecognised_eval_set_format"
	CodeInvalidEvalOptions         = "invalid_eval_options"
	CodeSampleLimitExceeded        = "eval_sample_limit_exceeded"
	CodeEmptyCriteria              = "empty_eval_criteria"
	CodeInvalidMetricID            = "invalid_eval_metric_id"
	CodeDuplicateMetricID          = "duplicate_eval_metric_id"
	CodeInvalidMetric              = "invalid_eval_metric"
	CodeInvalidAdapter             = "invalid_eval_adapter"
	CodeReportBudgetExceeded       = "eval_report_budget_exceeded"
	CodeReportTooLarge             = "eval_report_too_large"
	CodeEvaluationCancelled        = "evaluation_cancelled"
	CodeInvalidSampleResults       = "invalid_eval_sample_results"
	CodeInvalidEvalResult          = "invalid_eval_result"
	CodeUnsupportedResultVersion   = "unsupported_eval_result_schema_version"
	CodeInvalidBaseline            = "invalid_baseline"
	CodeInvalidCurrentResult       = "invalid_current_result"
	CodeEvalSetMismatch            = "eval_set_mismatch"
	CodeInvalidComparisonOptions   = "invalid_eval_comparison_options"
	CodeInvalidComparison          = "invalid_eval_comparison"
	CodeExportByteLimitExceeded    = "eval_export_byte_limit_exceeded"
	CodeUnknownExportOptions       = "unknown_eval_export_options"
	CodeInvalidExportResult        = "invalid_eval_export_result"
	CodeInvalidReportFormat        = "invalid_eval_report_format"
	CodeInvalidSuiteName           = "invalid_eval_suite_name"
	CodeAnnotationLimitExceeded    = "eval_annotation_limit_exceeded"
	CodeCriteriaMustBeArray        = "eval_criteria_must_be_array"
	CodeUnknownCriteriaKeys        = "unknown_eval_criteria_keys"
	CodeUnknownCriterionKeys       = "unknown_eval_criterion_keys"
	CodeInvalidCriterion           = "invalid_eval_criterion"
	CodeInvalidCriteriaFile        = "invalid_eval_criteria"
	CodeMetricTolerancesNotObject  = "metric_tolerances_must_be_object"
	CodeInvalidMetricTolerances    = "invalid_metric_tolerances"
	CodeInvalidEvaluationStatistic = "invalid_evaluation_statistics"
)

// Sample error tags recorded in SampleResult.Error (§5.5). Adapters may
// return their own tags through AdapterError.
const (
	TagTimeout                = "timeout"
	TagCancelled              = "cancelled"
	TagAdapterInitFailed      = "adapter_init_failed"
	TagAdapterInitException   = "adapter_init_exception"
	TagAdapterFailed          = "adapter_failed"
	TagAdapterException       = "adapter_exception"
	TagAdapterTerminateFailed = "adapter_terminate_failed"
	TagInvalidAdapterResult   = "invalid_adapter_result"
	TagInvalidAdapterEvents   = "invalid_adapter_events"
	TagWorkerLost             = "worker_lost"
)

// maxDetail bounds the detail an error repeats (a case id, a key list).
const maxDetail = 128

// Error is the package's one structured error (internal/coded, domain
// "evalengine: ", detail in parentheses). Code is a contract code; Reason,
// when set, is a nested code (the contract's tuple form, e.g.
// {invalid_eval_set, eval_data_depth_exceeded}); Detail names the offending
// case, turn, index or keys. Neither ever carries a value from the input
// beyond an identifier truncated to 128 bytes, so an Error is safe to print.
// It formats "evalengine: code: reason (detail)"; errors.Is(err,
// &Error{Code: ...}) matches by Code, and by Reason when the target sets one.
type Error = coded.Error[engineDomain]

// engineDomain prints evalengine's errors.
type engineDomain struct{}

func (engineDomain) Prefix() string       { return "evalengine: " }
func (engineDomain) DetailInParens() bool { return true }

// ErrorCode returns the Code of the first *Error in err's chain, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// ErrorReason returns the Reason of the first *Error in err's chain, or "".
func ErrorReason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func NewErr(code, detail string) *Error { return &Error{Code: code, Detail: Bound(detail)} }

func ReasonErr(code, reason, detail string) *Error {
	return &Error{Code: code, Reason: reason, Detail: Bound(detail)}
}

// LimitErr wraps a jsonlimit error (or any decode error) under code, with the
// jsonlimit code as the reason.
func LimitErr(code string, err error) *Error {
	reason := jsonlimit.ErrorCode(err)
	if reason == "" {
		reason = "invalid_json"
	}
	detail := ""
	var le *jsonlimit.Error
	if errors.As(err, &le) {
		detail = le.Path
		if le.Key != "" {
			detail += " key " + strconv.Quote(le.Key)
		}
	}
	return &Error{Code: code, Reason: reason, Detail: Bound(detail), Err: err}
}

// Bound truncates s to maxDetail bytes on a rune boundary.
func Bound(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}

// KeysDetail renders sorted, quoted, bounded key names.
func KeysDetail(keys []string) string {
	sort.Strings(keys)
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(Bound(k))
	}
	return Bound(strings.Join(q, ","))
}

// AdapterError is how an adapter reports a failure with a stable tag, which
// the engine records as the sample's error. Tags are lowercase
// [a-z0-9_] (at most 64 bytes); anything else is replaced by the engine's
// default tag, so raw transport text never reaches a result.
type AdapterError struct {
	Tag string
	Err error // cause, never printed into results
}

// Error returns the tag.
func (e *AdapterError) Error() string { return "evalengine adapter: " + e.Tag }

// Unwrap returns the cause.
func (e *AdapterError) Unwrap() error { return e.Err }

// AdapterTag extracts a safe tag from err, or returns def.
func AdapterTag(err error, def string) string {
	var ae *AdapterError
	if errors.As(err, &ae) && validTag(ae.Tag) {
		return ae.Tag
	}
	return def
}

func validTag(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
