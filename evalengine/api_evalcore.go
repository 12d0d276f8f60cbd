// The root's names for the core in internal/evalcore: the set, options,
// adapter, criteria and metrics, the run engine, the result document and
// its decoding, comparison, statistics, ensembles and review. Each name
// here is the same type, constant, variable or function as the core's;
// the core's doc comments carry the detail. Generated once when the core
// moved; add a line here when the core gains a name the root exports.

package evalengine

import (
	"context"
	"io"
	"time"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
)

// Adapter connects the engine to the system under evaluation.
type Adapter = evalcore.Adapter

// Session is one sample's conversation.
type Session = evalcore.Session

// SampleInfo identifies the sample a session is for.
type SampleInfo = evalcore.SampleInfo

// TurnInput is one turn handed to a Session.
type TurnInput = evalcore.TurnInput

// TurnOutput is what a Session answered for one turn.
type TurnOutput = evalcore.TurnOutput

// Tool step kinds.
const (
	KindToolCall     = evalcore.KindToolCall
	KindToolResponse = evalcore.KindToolResponse
)

// ToolStep is one entry of a trajectory.
type ToolStep = evalcore.ToolStep

// TrajectoryFromEvents extracts tool steps from events in the contract's
// shape (CONTRACTS §5.2): an event whose content (or the event itself) is
// {type:"tool_calls", calls:[{name, args, call_id}]} or {type:
// "tool_response", name, result, call_id}.
func TrajectoryFromEvents(events []any) ([]ToolStep, error) {
	return evalcore.TrajectoryFromEvents(events)
}

// Built-in metric names (CONTRACTS §5.12), chosen by config "metric".
const (
	MetricLatency           = evalcore.MetricLatency
	MetricCost              = evalcore.MetricCost
	MetricSafety            = evalcore.MetricSafety
	MetricSemanticQuality   = evalcore.MetricSemanticQuality
	SemanticTokenF1         = evalcore.SemanticTokenF1
	SemanticExactNormalized = evalcore.SemanticExactNormalized
)

// Built-in metric config errors: the Reason of an invalid_eval_metric.
const (
	ReasonInvalidLatencyConfig  = evalcore.ReasonInvalidLatencyConfig
	ReasonInvalidCostConfig     = evalcore.ReasonInvalidCostConfig
	ReasonInvalidSafetyConfig   = evalcore.ReasonInvalidSafetyConfig
	ReasonInvalidSemanticConfig = evalcore.ReasonInvalidSemanticConfig
	ReasonInvalidBuiltinMetric  = evalcore.ReasonInvalidBuiltinMetric
)

// not_evaluated reasons of the built-in metrics.
const (
	ReasonLatencyUnavailable  = evalcore.ReasonLatencyUnavailable
	ReasonUsageUnavailable    = evalcore.ReasonUsageUnavailable
	ReasonSafetyUnavailable   = evalcore.ReasonSafetyUnavailable
	ReasonTextUnavailable     = evalcore.ReasonTextUnavailable
	ReasonExpectedUnavailable = evalcore.ReasonExpectedUnavailable
	ReasonActualUnavailable   = evalcore.ReasonActualUnavailable
)

// NewBuiltinMetric builds a provider-free built-in metric (§5.12) of the
// given scope (ScopeTurn or ScopeCase).
func NewBuiltinMetric(id string, scope string, threshold float64, config map[string]any) (Metric, error) {
	return evalcore.NewBuiltinMetric(id, scope, threshold, config)
}

// TokenF1 is the multiset token F1 of two texts after trimming and case
// folding: 1 when both have no tokens, 0 when only one has none.
func TokenF1(expected string, actual string) float64 {
	return evalcore.TokenF1(expected, actual)
}

// Comparison document constants (CONTRACTS §5.9).
const (
	ComparisonSchemaVersion    = evalcore.ComparisonSchemaVersion
	ComparisonReportType       = evalcore.ComparisonReportType
	ReasonNone                 = evalcore.ReasonNone
	ReasonScoreDrop            = evalcore.ReasonScoreDrop
	ReasonMissingCurrentMetric = evalcore.ReasonMissingCurrentMetric
	ReasonMissingCurrentCase   = evalcore.ReasonMissingCurrentCase
	ReasonCaseNoLongerPasses   = evalcore.ReasonCaseNoLongerPasses
	CaseStatusMissing          = evalcore.CaseStatusMissing
)

// CompareOptions is the regression policy.
type CompareOptions = evalcore.CompareOptions

// Comparison is the baseline comparison document.
type Comparison = evalcore.Comparison

// MetricDiff compares one baseline summary metric.
type MetricDiff = evalcore.MetricDiff

// CaseDiff compares one baseline case.
type CaseDiff = evalcore.CaseDiff

// Compare checks current against baseline (§5.9).
func Compare(baseline *Result, current *Result, opts CompareOptions) (*Comparison, error) {
	return evalcore.Compare(baseline, current, opts)
}

// CompareSide is what a comparison reads of one result: its summary and,
// per case, its id, status, verdict and a trajectory digest, so a result
// of any size compares in memory O(cases).
type CompareSide = evalcore.CompareSide

// ResultSide is a result document's side of a comparison (re-validated).
func ResultSide(r *Result) (*CompareSide, error) { return evalcore.ResultSide(r) }

// StreamSide is a checked stream's side of a comparison, read from its
// case lines and summary without a sample.
func StreamSide(f *StreamFile) (*CompareSide, error) { return evalcore.StreamSide(f) }

// ReadStreamSide is the side of a comparison of a stream read once from
// r, with OpenStreamFile's checks but no sample index: memory is the side
// alone (one bit a sample besides), and r need not be seekable.
func ReadStreamSide(r io.Reader) (*CompareSide, error) { return evalcore.ReadStreamSide(r) }

// StatsSeries is what `adk eval stats` reads of one result: its case
// counts and outcomes and every ok score of each metric in document order,
// the same for a result document and its JSON Lines stream.
type StatsSeries = evalcore.StatsSeries

// MaxStreamStatsScores bounds the ok scores ReadStreamSeries holds.
const MaxStreamStatsScores = evalcore.MaxStreamStatsScores

// ReadStreamSeries is the statistics series of a JSON Lines result read
// once from r, with ReadStreamSide's checks; it holds the ok scores (8
// bytes each once in order, 10 while reading), 8 bytes a sample and one
// bit a case, never a sample.
func ReadStreamSeries(r io.Reader) (*StatsSeries, error) { return evalcore.ReadStreamSeries(r) }

// CompareSides is Compare of two sides: the same comparison as Compare of
// the same results.
func CompareSides(baseline, current *CompareSide, opts CompareOptions) (*Comparison, error) {
	return evalcore.CompareSides(baseline, current, opts)
}

// DecodeComparison reads a comparison document strictly: exact key set and
// every verdict, drop and reason re-checked, so a forged comparison is
// invalid_eval_comparison.
func DecodeComparison(data []byte) (*Comparison, error) {
	return evalcore.DecodeComparison(data)
}

// MaxComparisonReadBytes bounds the comparison document ReadComparison
// reads.
const MaxComparisonReadBytes = evalcore.MaxComparisonReadBytes

// ReadComparison reads a comparison document of any size (past the 16 MiB
// DecodeComparison reads) a row at a time, each row bounded and checked
// as DecodeComparison checks it; errors name the field
// ($.case_diffs[12].regression).
func ReadComparison(r io.Reader) (*Comparison, error) { return evalcore.ReadComparison(r) }

// Metric kinds, scopes and metric statuses (CONTRACTS §5.3, §5.5).
const (
	KindMetric         = evalcore.KindMetric
	KindJudge          = evalcore.KindJudge
	ScopeTurn          = evalcore.ScopeTurn
	ScopeCase          = evalcore.ScopeCase
	StatusOK           = evalcore.StatusOK
	StatusError        = evalcore.StatusError
	StatusNotEvaluated = evalcore.StatusNotEvaluated

	// case-level criteria only
	StatusPartial = evalcore.StatusPartial
)

// Built-in criterion names (§5.6).
const (
	CriterionExactResponse      = evalcore.CriterionExactResponse
	CriterionTrajectoryExact    = evalcore.CriterionTrajectoryExact
	CriterionTrajectoryInOrder  = evalcore.CriterionTrajectoryInOrder
	CriterionTrajectoryAnyOrder = evalcore.CriterionTrajectoryAnyOrder
	CriterionTrajectorySubset   = evalcore.CriterionTrajectorySubset
	CriterionToolTrajectory     = evalcore.CriterionToolTrajectory
)

// Trajectory match policies, argument policies and response normalizations.
const (
	MatchExact            = evalcore.MatchExact
	MatchInOrder          = evalcore.MatchInOrder
	MatchAnyOrder         = evalcore.MatchAnyOrder
	MatchSubset           = evalcore.MatchSubset
	ArgsExact             = evalcore.ArgsExact
	ArgsSubset            = evalcore.ArgsSubset
	ArgsIgnored           = evalcore.ArgsIgnored
	NormalizeExact        = evalcore.NormalizeExact
	NormalizeTrim         = evalcore.NormalizeTrim
	NormalizeCasefoldTrim = evalcore.NormalizeCasefoldTrim
)

// Metric is one criterion the engine scores.
type Metric = evalcore.Metric

// TurnScorer scores one turn of one sample.
type TurnScorer = evalcore.TurnScorer

// CaseScorer scores a whole sample once its turns have run.
type CaseScorer = evalcore.CaseScorer

// TurnEval is what a turn-scope metric sees.
type TurnEval = evalcore.TurnEval

// CaseEval is what a case-scope metric sees: every turn's output in order.
type CaseEval = evalcore.CaseEval

// Score is a metric's answer.
type Score = evalcore.Score

// OK is an evaluated score.
func OK(v float64, meta map[string]any) Score {
	return evalcore.OK(v, meta)
}

// NotEvaluated is a score for missing expectations or data.
func NotEvaluated(reason string) Score {
	return evalcore.NotEvaluated(reason)
}

// ScoreError is a failed metric; it never passes.
func ScoreError(reason string) Score {
	return evalcore.ScoreError(reason)
}

// NewCriterion builds a built-in criterion (§5.6) as a case-scope metric.
func NewCriterion(id string, criterion string, threshold float64, config map[string]any) (Metric, error) {
	return evalcore.NewCriterion(id, criterion, threshold, config)
}

// DecodeResult reads a result document strictly: bounded, exact key sets,
// and every derived field (metric and turn verdicts, sample statuses,
// per-case and run counts, rates, statistics, case aggregates, sample ids)
// recomputed from the samples and compared.
func DecodeResult(data []byte) (*Result, error) {
	return evalcore.DecodeResult(data)
}

// Ensemble and calibration error codes.
const (
	CodeInvalidEnsembleVotes   = evalcore.CodeInvalidEnsembleVotes
	CodeDuplicateEnsembleVote  = evalcore.CodeDuplicateEnsembleVote
	CodeInvalidEnsembleOptions = evalcore.CodeInvalidEnsembleOptions
	CodeInvalidCalibration     = evalcore.CodeInvalidCalibration
)

// Ensemble strategies, bounds and document types (CONTRACTS §5.13).
const (
	EnsembleWeightedMean   = evalcore.EnsembleWeightedMean
	EnsembleMajority       = evalcore.EnsembleMajority
	MaxEnsembleVotes       = evalcore.MaxEnsembleVotes
	MaxVoteWeight          = evalcore.MaxVoteWeight
	MaxCalibrationExamples = evalcore.MaxCalibrationExamples
	CalibrationType        = evalcore.CalibrationType
)

// Vote is one judge's persisted verdict.
type Vote = evalcore.Vote

// EnsembleOptions configure AggregateVotes.
type EnsembleOptions = evalcore.EnsembleOptions

// DefaultEnsembleOptions are weighted mean, threshold 0.5, one judge,
// review at a disagreement of 0.5.
func DefaultEnsembleOptions() EnsembleOptions {
	return evalcore.DefaultEnsembleOptions()
}

// Ensemble is the aggregate of a set of votes.
type Ensemble = evalcore.Ensemble

// DecodeVotes reads persisted votes: a JSON array of {judge_id (or id),
// score, weight?, confidence?}, unknown keys refused, weight and confidence
// defaulting to 1.
func DecodeVotes(data []byte) ([]Vote, error) {
	return evalcore.DecodeVotes(data)
}

// AggregateVotes combines persisted votes (§5.13); it never calls a
// provider.
func AggregateVotes(votes []Vote, opts EnsembleOptions) (*Ensemble, error) {
	return evalcore.AggregateVotes(votes, opts)
}

// CalibrationExample is one labelled score.
type CalibrationExample = evalcore.CalibrationExample

// Calibration is a chosen classification threshold.
type Calibration = evalcore.Calibration

// CalibrateThreshold picks the threshold that classifies the most examples
// correctly (score ≥ t ⇔ label) among {0, 1, defaultThreshold, every
// example score}, the lowest on ties.
func CalibrateThreshold(examples []CalibrationExample, defaultThreshold float64) (*Calibration, error) {
	return evalcore.CalibrateThreshold(examples, defaultThreshold)
}

// CalibratedScore is a score classified by a calibration.
type CalibratedScore = evalcore.CalibratedScore

// ApplyCalibration classifies score with c's threshold.
func ApplyCalibration(c *Calibration, score float64) (CalibratedScore, error) {
	return evalcore.ApplyCalibration(c, score)
}

// Error codes.
const (
	// Eval set loading and validation (§5.1).
	CodeInvalidEvalSet             = evalcore.CodeInvalidEvalSet
	CodeEvalSetMustBeObject        = evalcore.CodeEvalSetMustBeObject
	CodeUnsupportedSchemaVersion   = evalcore.CodeUnsupportedSchemaVersion
	CodeInvalidEvalSetID           = evalcore.CodeInvalidEvalSetID
	CodeInvalidEvalSetVersion      = evalcore.CodeInvalidEvalSetVersion
	CodeInvalidEvalSetName         = evalcore.CodeInvalidEvalSetName
	CodeInvalidEvalSetDescription  = evalcore.CodeInvalidEvalSetDescription
	CodeInvalidEvalCases           = evalcore.CodeInvalidEvalCases
	CodeCaseLimitExceeded          = evalcore.CodeCaseLimitExceeded
	CodeInvalidEvalCase            = evalcore.CodeInvalidEvalCase
	CodeInvalidEvalCaseID          = evalcore.CodeInvalidEvalCaseID
	CodeDuplicateCaseID            = evalcore.CodeDuplicateCaseID
	CodeCaseHasNoTurns             = evalcore.CodeCaseHasNoTurns
	CodeTurnLimitExceeded          = evalcore.CodeTurnLimitExceeded
	CodeInvalidEvalTurn            = evalcore.CodeInvalidEvalTurn
	CodeInvalidEvalTurnID          = evalcore.CodeInvalidEvalTurnID
	CodeDuplicateTurnID            = evalcore.CodeDuplicateTurnID
	CodeMissingTurnInput           = evalcore.CodeMissingTurnInput
	CodeInvalidEvalMetadata        = evalcore.CodeInvalidEvalMetadata
	CodeUnknownSetKeys             = evalcore.CodeUnknownSetKeys
	CodeUnknownCaseKeys            = evalcore.CodeUnknownCaseKeys
	CodeUnknownTurnKeys            = evalcore.CodeUnknownTurnKeys
	CodeValidationTimeout          = evalcore.CodeValidationTimeout
	CodeUnsupportedGoogleCase      = evalcore.CodeUnsupportedGoogleCase
	CodeInvalidGoogleEvalSet       = evalcore.CodeInvalidGoogleEvalSet
	CodeUnrecognisedEvalSetFormat  = evalcore.CodeUnrecognisedEvalSetFormat
	CodeInvalidEvalOptions         = evalcore.CodeInvalidEvalOptions
	CodeSampleLimitExceeded        = evalcore.CodeSampleLimitExceeded
	CodeEmptyCriteria              = evalcore.CodeEmptyCriteria
	CodeInvalidMetricID            = evalcore.CodeInvalidMetricID
	CodeDuplicateMetricID          = evalcore.CodeDuplicateMetricID
	CodeInvalidMetric              = evalcore.CodeInvalidMetric
	CodeInvalidAdapter             = evalcore.CodeInvalidAdapter
	CodeReportBudgetExceeded       = evalcore.CodeReportBudgetExceeded
	CodeReportTooLarge             = evalcore.CodeReportTooLarge
	CodeEvaluationCancelled        = evalcore.CodeEvaluationCancelled
	CodeInvalidSampleResults       = evalcore.CodeInvalidSampleResults
	CodeInvalidEvalResult          = evalcore.CodeInvalidEvalResult
	CodeUnsupportedResultVersion   = evalcore.CodeUnsupportedResultVersion
	CodeInvalidBaseline            = evalcore.CodeInvalidBaseline
	CodeInvalidCurrentResult       = evalcore.CodeInvalidCurrentResult
	CodeEvalSetMismatch            = evalcore.CodeEvalSetMismatch
	CodeInvalidComparisonOptions   = evalcore.CodeInvalidComparisonOptions
	CodeInvalidComparison          = evalcore.CodeInvalidComparison
	CodeExportByteLimitExceeded    = evalcore.CodeExportByteLimitExceeded
	CodeUnknownExportOptions       = evalcore.CodeUnknownExportOptions
	CodeInvalidExportResult        = evalcore.CodeInvalidExportResult
	CodeInvalidReportFormat        = evalcore.CodeInvalidReportFormat
	CodeInvalidSuiteName           = evalcore.CodeInvalidSuiteName
	CodeAnnotationLimitExceeded    = evalcore.CodeAnnotationLimitExceeded
	CodeCriteriaMustBeArray        = evalcore.CodeCriteriaMustBeArray
	CodeUnknownCriteriaKeys        = evalcore.CodeUnknownCriteriaKeys
	CodeUnknownCriterionKeys       = evalcore.CodeUnknownCriterionKeys
	CodeInvalidCriterion           = evalcore.CodeInvalidCriterion
	CodeInvalidCriteriaFile        = evalcore.CodeInvalidCriteriaFile
	CodeMetricTolerancesNotObject  = evalcore.CodeMetricTolerancesNotObject
	CodeInvalidMetricTolerances    = evalcore.CodeInvalidMetricTolerances
	CodeInvalidEvaluationStatistic = evalcore.CodeInvalidEvaluationStatistic
)

// Sample error tags recorded in SampleResult.Error (§5.5).
const (
	TagTimeout                = evalcore.TagTimeout
	TagCancelled              = evalcore.TagCancelled
	TagAdapterInitFailed      = evalcore.TagAdapterInitFailed
	TagAdapterInitException   = evalcore.TagAdapterInitException
	TagAdapterFailed          = evalcore.TagAdapterFailed
	TagAdapterException       = evalcore.TagAdapterException
	TagAdapterTerminateFailed = evalcore.TagAdapterTerminateFailed
	TagInvalidAdapterResult   = evalcore.TagInvalidAdapterResult
	TagInvalidAdapterEvents   = evalcore.TagInvalidAdapterEvents
	TagWorkerLost             = evalcore.TagWorkerLost
)

// Error is the package's one structured error (internal/coded, domain
// "evalengine: ", detail in parentheses).
type Error = evalcore.Error

// ErrorCode returns the Code of the first *Error in err's chain, or "".
func ErrorCode(err error) string {
	return evalcore.ErrorCode(err)
}

// ErrorReason returns the Reason of the first *Error in err's chain, or "".
func ErrorReason(err error) string {
	return evalcore.ErrorReason(err)
}

// AdapterError is how an adapter reports a failure with a stable tag, which
// the engine records as the sample's error.
type AdapterError = evalcore.AdapterError

const (
	// MaxExcerptRunes bounds an expected/actual excerpt.
	MaxExcerptRunes = evalcore.MaxExcerptRunes
)

// Excerpt renders a response or argument value for a report: a string as
// itself, anything else as canonical JSON with secret-named keys pruned,
// cut to MaxExcerptRunes runes (the cut is marked with its full length).
func Excerpt(v any) string {
	return evalcore.Excerpt(v)
}

// Run option bounds (CONTRACTS §5.4).
const (
	MaxConcurrency    = evalcore.MaxConcurrency
	MaxSamplesPerCase = evalcore.MaxSamplesPerCase

	// issue 19: 100,000 cases × 10 samples
	MaxTotalSamples      = evalcore.MaxTotalSamples
	MaxTimeoutMS         = evalcore.MaxTimeoutMS
	MaxReportBytes       = evalcore.MaxReportBytes
	DefaultTimeoutMS     = evalcore.DefaultTimeoutMS
	DefaultCaseTimeoutMS = evalcore.DefaultCaseTimeoutMS
	EmptyCriteriaError   = evalcore.EmptyCriteriaError
	EmptyCriteriaPass    = evalcore.EmptyCriteriaPass
)

// Options are the run options.
type Options = evalcore.Options

// DefaultOptions returns the contract defaults.
func DefaultOptions() Options {
	return evalcore.DefaultOptions()
}

// Result schema version and sample/case statuses (CONTRACTS §5.5).
const (
	ResultSchemaVersion = evalcore.ResultSchemaVersion
	SampleStatusPassed  = evalcore.SampleStatusPassed
	SampleStatusFailed  = evalcore.SampleStatusFailed
	SampleStatusError   = evalcore.SampleStatusError
	CaseStatusPartial   = evalcore.CaseStatusPartial
)

// Result is the result document (result_schema_version 2).
type Result = evalcore.Result

// MetricSummary aggregates one metric descriptor over the whole run.
type MetricSummary = evalcore.MetricSummary

// CaseResult aggregates one case over its samples.
type CaseResult = evalcore.CaseResult

// SampleResult is one run of one case.
type SampleResult = evalcore.SampleResult

// TurnResult is one turn of one sample.
type TurnResult = evalcore.TurnResult

// TrajectoryItem is one public trajectory entry.
type TrajectoryItem = evalcore.TrajectoryItem

// MetricResult is one metric's verdict on a turn, a sample or a case.
type MetricResult = evalcore.MetricResult

// Statistics summarises scores with the population standard deviation
// (÷n), all zeros when empty (doc.go, quirk 3).
type Statistics = evalcore.Statistics

// NewStatistics computes Statistics over xs.
func NewStatistics(xs []float64) Statistics {
	return evalcore.NewStatistics(xs)
}

// Aggregate builds the result document from one SampleResult per (case,
// sample) of set, in any order.
func Aggregate(set *Set, metrics []Metric, opts Options, samples []SampleResult, duration time.Duration) (*Result, error) {
	return evalcore.Aggregate(set, metrics, opts, samples, duration)
}

const (
	// MetaNotEvaluatedCases is the result metadata key listing the cases a run
	// left out, each {"case_id", "reason"}.
	MetaNotEvaluatedCases = evalcore.MetaNotEvaluatedCases
)

// MarkNotEvaluated records in r's metadata that the cases ids were not
// evaluated, for reason.
func MarkNotEvaluated(r *Result, ids []string, reason string) {
	evalcore.MarkNotEvaluated(r, ids, reason)
}

// MarkNotEvaluatedCases records in r's metadata that the cases, each
// {case id, reason}, were not evaluated (a cluster job's list).
func MarkNotEvaluatedCases(r *Result, cases [][2]string) {
	evalcore.MarkNotEvaluatedCases(r, cases)
}

// Human review error codes (CONTRACTS §5.13).
const (
	CodeInvalidReview       = evalcore.CodeInvalidReview
	CodeStaleReviewRevision = evalcore.CodeStaleReviewRevision
	CodeDuplicateReviewer   = evalcore.CodeDuplicateReviewer
	CodeReviewTerminal      = evalcore.CodeReviewTerminal
	CodeReviewNotExpired    = evalcore.CodeReviewNotExpired
)

// Review phases and decisions.
const (
	ReviewSchemaVersion  = evalcore.ReviewSchemaVersion
	ReviewPending        = evalcore.ReviewPending
	ReviewApproved       = evalcore.ReviewApproved
	ReviewRejected       = evalcore.ReviewRejected
	ReviewExpired        = evalcore.ReviewExpired
	DecisionApprove      = evalcore.DecisionApprove
	DecisionReject       = evalcore.DecisionReject
	MaxRequiredReviewers = evalcore.MaxRequiredReviewers
)

// Review is a human-review record.
type Review = evalcore.Review

// ReviewDecision is one reviewer's decision.
type ReviewDecision = evalcore.ReviewDecision

// NewReview opens a pending review at revision 1.
func NewReview(id string, subject any, required int, expiresAt *int64) (*Review, error) {
	return evalcore.NewReview(id, subject, required, expiresAt)
}

// DecodeReview reads a stored review strictly (exact keys, bounded, phase
// consistent with decisions).
func DecodeReview(data []byte) (*Review, error) {
	return evalcore.DecodeReview(data)
}

// SampleID derives the deterministic sample id (CONTRACTS §5.4): "sample-"
// and the lowercase hex of the first 12 bytes of SHA-256 over set id,
// version, case id and the decimal sample index, NUL-separated.
func SampleID(setID string, setVersion string, caseID string, sampleIndex int) string {
	return evalcore.SampleID(setID, setVersion, caseID, sampleIndex)
}

// Progress is reported after every finished sample.
type Progress = evalcore.Progress

// RunConfig is what a run needs besides the set: the adapter, the metrics
// in descriptor order, the options and an optional progress callback.
type RunConfig = evalcore.RunConfig

// Run evaluates set: every case Options.Samples times through the adapter,
// in a pool of Options.Concurrency workers (at most SampleConcurrency
// samples of one case at once), and aggregates the result.
func Run(ctx context.Context, set *Set, cfg RunConfig) (*Result, error) {
	return evalcore.Run(ctx, set, cfg)
}

// RunSample runs one (case, sample) the way Run does, for a distributed
// worker that owns a single task.
func RunSample(ctx context.Context, set *Set, cfg RunConfig, caseIndex int, sampleIndex int) (SampleResult, error) {
	return evalcore.RunSample(ctx, set, cfg, caseIndex, sampleIndex)
}

// SampleRunner runs single samples of one validated (set, metrics,
// options): a worker that runs thousands of tasks of a job validates the
// set once, not once per task.
type SampleRunner = evalcore.SampleRunner

// SampleSlot is a cancel scope for samples run one at a time (a fleet
// worker's run slot): a sample run in it (SampleRunner.RunInSlot) makes
// one context, shared by the agent Runner and the model call.
type SampleSlot = evalcore.SampleSlot

// NewSampleSlot returns a slot whose samples' contexts derive from parent.
func NewSampleSlot(parent context.Context) *SampleSlot {
	return evalcore.NewSampleSlot(parent)
}

// NewSampleRunner validates set, metrics and options as Run does.
func NewSampleRunner(set *Set, metrics []Metric, opts Options) (*SampleRunner, error) {
	return evalcore.NewSampleRunner(set, metrics, opts)
}

// ErrorSample is the record of a sample that never ran or whose worker was
// lost (tag e.g.
func ErrorSample(set *Set, caseIndex int, sampleIndex int, tag string) SampleResult {
	return evalcore.ErrorSample(set, caseIndex, sampleIndex, tag)
}

// Eval set bounds (CONTRACTS §5.1, raised by issue 19: a fleet exists for
// regression suites of tens of thousands of cases).
const (
	MaxCases                 = evalcore.MaxCases
	MaxTurns                 = evalcore.MaxTurns
	DefaultValidationTimeout = evalcore.DefaultValidationTimeout
)

// Set is a validated eval set in its canonical schema-2 shape (or schema 1,
// which keeps its legacy expectations).
type Set = evalcore.Set

// Case is one conversation: ordered turns plus optional case-level
// expectations.
type Case = evalcore.Case

// Turn is one user input and its canonical expectation: in schema 2, an
// object with response / trajectory / intermediate_responses when any of
// the expected_* keys was given, else the legacy expected value (or null).
type Turn = evalcore.Turn

// LoadOptions tunes LoadSet.
type LoadOptions = evalcore.LoadOptions

// ParseSet reads a native eval set (schema 1 or 2) from untrusted bytes,
// bounded by the JSON limits and the validation timeout.
func ParseSet(data []byte) (*Set, error) {
	return evalcore.ParseSet(data)
}

// Statistics error codes (CONTRACTS §5.14).
const (
	CodeInvalidEvaluationSample = evalcore.CodeInvalidEvaluationSample
	CodeInvalidConfidenceLevel  = evalcore.CodeInvalidConfidenceLevel
	CodeInvalidPassRateSamples  = evalcore.CodeInvalidPassRateSamples
)

// Statistics bounds and the only confidence levels with a fixed two-sided
// z.
const (
	// MaxStatisticsSamples bounds one score series.
	MaxStatisticsSamples = evalcore.MaxStatisticsSamples

	// DefaultConfidenceLevel is used when a level is 0.
	DefaultConfidenceLevel = evalcore.DefaultConfidenceLevel

	// LongitudinalReportType is the gate document's report_type.
	LongitudinalReportType = evalcore.LongitudinalReportType
)

// Summarize is the statistics summary of a score series with the SAMPLE
// standard deviation (÷(n−1), 0 for one sample).
func Summarize(xs []float64) (Statistics, error) {
	return evalcore.Summarize(xs)
}

// MeanInterval is a summary with a normal-approximation confidence interval
// of the mean, clamped to 0..1.
type MeanInterval = evalcore.MeanInterval

// ConfidenceInterval summarises xs (sample σ) and adds the interval mean
// ± z·σ/√n at level (0.90, 0.95 or 0.99; 0 means 0.95).
func ConfidenceInterval(xs []float64, level float64) (MeanInterval, error) {
	return evalcore.ConfidenceInterval(xs, level)
}

// PassRateInterval is the Wilson score interval of a pass rate.
type PassRateInterval = evalcore.PassRateInterval

// WilsonInterval is the Wilson score interval for passed of total at level
// (0 means 0.95): p = k/n, d = 1 + z²/n, centre = (p + z²/2n)/d, half =
// z·√(p(1−p)/n + z²/4n²)/d, clamped to 0..1.
func WilsonInterval(passed int, total int, level float64) (PassRateInterval, error) {
	return evalcore.WilsonInterval(passed, total, level)
}

// GateOptions configure LongitudinalGate.
type GateOptions = evalcore.GateOptions

// DefaultGateOptions are 95 %, no tolerated drop, significance required.
func DefaultGateOptions() GateOptions {
	return evalcore.DefaultGateOptions()
}

// GateReport is the longitudinal regression document (§5.14).
type GateReport = evalcore.GateReport

// LongitudinalGate compares two score series (older baseline, newer
// current): drop = max(0, meanB − meanC), margin = z·√(s²B/nB +
// s²C/nC) with sample variances, lower = max(0, drop − margin).
func LongitudinalGate(baseline []float64, current []float64, opts GateOptions) (*GateReport, error) {
	return evalcore.LongitudinalGate(baseline, current, opts)
}

// The sample stream is the one JSON Lines format of a run's samples: the
// resume journal `adk eval run` keeps beside --output, and the `jsonl`
// report format.
const (
	StreamFormat       = evalcore.StreamFormat
	StreamVersion      = evalcore.StreamVersion
	MaxStreamLineBytes = evalcore.MaxStreamLineBytes
)

const (
	// Stream error code: a stream that is not one (bad line, wrong header,
	// sample out of range, summary not matching the samples).
	CodeInvalidEvalStream = evalcore.CodeInvalidEvalStream
)

// StreamHeader is a stream's first line.
type StreamHeader = evalcore.StreamHeader

// NewStreamHeader is the header of a run of set with samples per case.
func NewStreamHeader(set *Set, samples int, digests map[string]string) StreamHeader {
	return evalcore.NewStreamHeader(set, samples, digests)
}

// StreamWriter appends a stream to w.
type StreamWriter = evalcore.StreamWriter

var (
	// ErrStreamFull is returned once a StreamWriter reached its byte bound.
	ErrStreamFull = evalcore.ErrStreamFull
)

// NewStreamWriter starts a stream on w.
func NewStreamWriter(w io.Writer, header *StreamHeader, already int64, maxBytes int64) (*StreamWriter, error) {
	return evalcore.NewStreamWriter(w, header, already, maxBytes)
}

// ResultFixedBytes is what the report budget charges a result of nCases
// cases and nMetrics metrics before any sample: a run whose
// Options.MaxReportBytes is below it cannot be one document, so its
// caller streams it from the start (RunConfig.DropSamples).
func ResultFixedBytes(nCases, nMetrics int) int { return evalcore.ResultFixedBytes(nCases, nMetrics) }

// StreamSample is one decoded sample line.
type StreamSample = evalcore.StreamSample

// Stream is a decoded sample stream.
type Stream = evalcore.Stream

// ReadStream decodes a stream strictly: the header first, every line
// bounded and of a known type, samples in range with their deterministic
// ids and their derived fields (status, passed) consistent, no sample
// twice, nothing after the summary.
func ReadStream(r io.Reader) (*Stream, error) {
	return evalcore.ReadStream(r)
}

// StreamToResult rebuilds the full result document from a complete stream
// (every sample and the summary): the samples are aggregated again and must
// give the summary exactly, else invalid_eval_stream (inconsistent).
func StreamToResult(st *Stream) (*Result, error) {
	return evalcore.StreamToResult(st)
}

// MaxCriteriaFileBytes caps a criteria or tolerances file (CONTRACTS §5.11).
const MaxCriteriaFileBytes = evalcore.MaxCriteriaFileBytes

// StreamFile is a complete sample stream on a seekable input, indexed so
// that it is rendered case by case without holding it (RenderStream).
type StreamFile = evalcore.StreamFile

// OpenStreamFile reads a stream of size bytes once, checks it line by line
// and indexes its sample lines (24 bytes a sample); see StreamFile.
func OpenStreamFile(r io.ReaderAt, size int64) (*StreamFile, error) {
	return evalcore.OpenStreamFile(r, size)
}

// StreamCases reads a stored stream's cases without its samples: its
// header and summary lines, then its case lines (the lines before the
// summary), O(cases) whatever the samples hold.
type StreamCases = evalcore.StreamCases

// OpenStreamCases checks a stream's header and summary lines; Read (or
// ReadRange) then reads its case lines, ReadFailuresFirst the case
// lines of rows of the failures-first order, ReadSamples one case's
// samples from its sample lines, and ReadCaseSamples a range of one
// case's samples from exactly their lines. See StreamCases.
func OpenStreamCases(header, summary []byte) (*StreamCases, error) {
	return evalcore.OpenStreamCases(header, summary)
}

// CaseAggregator aggregates a run case by case, in case order, keeping
// each case compactly.
type CaseAggregator = evalcore.CaseAggregator

// NewCaseAggregator starts aggregating a run of set with metrics and opts.
func NewCaseAggregator(set *Set, metrics []Metric, opts Options) (*CaseAggregator, error) {
	return evalcore.NewCaseAggregator(set, metrics, opts)
}
