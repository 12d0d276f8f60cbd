package evalcore

import (
	"math"
	"strconv"
)

// Run option bounds (CONTRACTS §5.4).
const (
	MaxConcurrency        = 256
	MaxSamplesPerCase     = 100
	MaxTotalSamples       = 1_000_000 // issue 19: 100,000 cases × 10 samples
	MaxTimeoutMS          = 3_600_000
	MaxReportBytes        = 16 << 20
	DefaultTimeoutMS      = 60_000
	DefaultCaseTimeoutMS  = 30_000
	EmptyCriteriaError    = "error"
	EmptyCriteriaPass     = "pass"
	defaultConcurrency    = 1
	defaultSamplesPerCase = 1
)

// Options are the run options. Start from DefaultOptions: the zero value of
// a fraction or a boolean is a real setting, not "default". The JSON names
// are the contract's, so options travel unchanged to a distributed worker.
type Options struct {
	// Concurrency bounds the samples in flight across the whole run (the
	// worker pool size), so at most this many cases run at once. 1..256.
	Concurrency int `json:"concurrency"`
	// SampleConcurrency bounds the samples of one case in flight. 0 means
	// the same as Concurrency. 1..256.
	SampleConcurrency int `json:"sample_concurrency"`
	// Samples is the number of samples per case, 1..100.
	Samples int `json:"sample_count"`
	// TimeoutMS bounds the whole run; samples not finished by then are
	// recorded as timeout. 1..3 600 000.
	TimeoutMS int `json:"timeout_ms"`
	// CaseTimeoutMS bounds one sample (all its turns). 1..3 600 000.
	CaseTimeoutMS int `json:"case_timeout_ms"`
	// PassRateThreshold is the share of passed cases the run needs. 0..1.
	PassRateThreshold float64 `json:"pass_rate_threshold"`
	// SamplePassRateThreshold is the share of successful samples of a case
	// that must pass for the case to pass. 0..1.
	SamplePassRateThreshold float64 `json:"sample_pass_rate_threshold"`
	// MinSuccessfulSamples is how many samples of a case must finish
	// without error for it to pass. 0 means all of them; 1..Samples.
	MinSuccessfulSamples int `json:"min_successful_samples"`
	// CaptureEvents keeps adapter events in turn results.
	CaptureEvents bool `json:"capture_events"`
	// CaptureToolContent keeps tool args and results in public
	// trajectories. Criteria always see them.
	CaptureToolContent bool `json:"capture_tool_content"`
	// EmptyCriteria is "error" (an empty metric list is refused) or "pass".
	EmptyCriteria string `json:"empty_criteria"`
	// MaxReportBytes bounds the serialized result, ≤16 MiB.
	MaxReportBytes int `json:"max_report_bytes"`
	// ResultMetadata is copied, secret-pruned, into the result.
	ResultMetadata map[string]any `json:"result_metadata,omitempty"`
}

// DefaultOptions returns the contract defaults.
func DefaultOptions() Options {
	return Options{
		Concurrency:             defaultConcurrency,
		Samples:                 defaultSamplesPerCase,
		TimeoutMS:               DefaultTimeoutMS,
		CaseTimeoutMS:           DefaultCaseTimeoutMS,
		PassRateThreshold:       1.0,
		SamplePassRateThreshold: 1.0,
		CaptureEvents:           true,
		EmptyCriteria:           EmptyCriteriaError,
		MaxReportBytes:          MaxReportBytes,
	}
}

// Normalize fills the derived defaults (SampleConcurrency,
// MinSuccessfulSamples) and checks every bound. Errors are
// invalid_eval_options with the option name as the detail.
func (o Options) Normalize() (Options, error) {
	bad := func(name string) (Options, error) { return Options{}, NewErr(CodeInvalidEvalOptions, name) }
	if o.Concurrency < 1 || o.Concurrency > MaxConcurrency {
		return bad("concurrency")
	}
	if o.SampleConcurrency == 0 {
		o.SampleConcurrency = o.Concurrency
	}
	if o.SampleConcurrency < 1 || o.SampleConcurrency > MaxConcurrency {
		return bad("sample_concurrency")
	}
	if o.Samples < 1 || o.Samples > MaxSamplesPerCase {
		return bad("sample_count")
	}
	if o.TimeoutMS < 1 || o.TimeoutMS > MaxTimeoutMS {
		return bad("timeout_ms")
	}
	if o.CaseTimeoutMS < 1 || o.CaseTimeoutMS > MaxTimeoutMS {
		return bad("case_timeout_ms")
	}
	if !isFraction(o.PassRateThreshold) {
		return bad("pass_rate_threshold")
	}
	if !isFraction(o.SamplePassRateThreshold) {
		return bad("sample_pass_rate_threshold")
	}
	if o.MinSuccessfulSamples == 0 {
		o.MinSuccessfulSamples = o.Samples
	}
	if o.MinSuccessfulSamples < 1 || o.MinSuccessfulSamples > o.Samples {
		return bad("min_successful_samples")
	}
	switch o.EmptyCriteria {
	case EmptyCriteriaError, EmptyCriteriaPass:
	case "":
		o.EmptyCriteria = EmptyCriteriaError
	default:
		return bad("empty_criteria")
	}
	if o.MaxReportBytes < 1 || o.MaxReportBytes > MaxReportBytes {
		return bad("max_report_bytes")
	}
	if o.ResultMetadata != nil {
		o.ResultMetadata = pruneObject(o.ResultMetadata)
	}
	return o, nil
}

// checkSampleTotal enforces cases × samples ≤ MaxTotalSamples.
func (o Options) checkSampleTotal(cases int) error {
	if total := cases * o.Samples; total > MaxTotalSamples {
		return NewErr(CodeSampleLimitExceeded, strconv.Itoa(total)+" > "+strconv.Itoa(MaxTotalSamples))
	}
	return nil
}

func isFraction(f float64) bool { return !math.IsNaN(f) && f >= 0 && f <= 1 }
