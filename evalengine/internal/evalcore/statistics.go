package evalcore

import (
	"math"
	"strconv"
)

// Statistics error codes (CONTRACTS §5.14).
const (
	CodeInvalidEvaluationSample = "invalid_evaluation_sample"
	CodeInvalidConfidenceLevel  = "invalid_confidence_level"
	CodeInvalidPassRateSamples  = "invalid_pass_rate_samples"
)

// Statistics bounds and the only confidence levels with a fixed two-sided z.
const (
	// MaxStatisticsSamples bounds one score series.
	MaxStatisticsSamples = 100_000
	// DefaultConfidenceLevel is used when a level is 0.
	DefaultConfidenceLevel = 0.95
	// LongitudinalReportType is the gate document's report_type.
	LongitudinalReportType = "longitudinal_regression"
)

// zScores maps each accepted confidence level to its two-sided z. Only
// these three exist: an arbitrary level would need an inverse normal CDF
// whose last digits differ between implementations, and the vectors are
// shared with other implementations.
var zScores = map[float64]float64{
	0.90: 1.6448536269514722,
	0.95: 1.959963984540054,
	0.99: 2.5758293035489004,
}

// ZFor returns the level (0 ⇒ 0.95) and its z.
func ZFor(level float64) (float64, float64, error) {
	if level == 0 {
		level = DefaultConfidenceLevel
	}
	z, ok := zScores[level]
	if !ok {
		return 0, 0, NewErr(CodeInvalidConfidenceLevel, strconv.FormatFloat(level, 'g', -1, 64))
	}
	return level, z, nil
}

// checkSeries validates a score series: at most MaxStatisticsSamples
// fractions. The error's detail is the 1-based index of the first bad one.
func checkSeries(xs []float64) error {
	if len(xs) > MaxStatisticsSamples {
		return ReasonErr(CodeInvalidEvaluationStatistic, "too_many_samples", strconv.Itoa(len(xs)))
	}
	for i, x := range xs {
		if !isFraction(x) {
			return NewErr(CodeInvalidEvaluationSample, strconv.Itoa(i+1))
		}
	}
	return nil
}

// Summarize is the statistics summary of a score series with the SAMPLE
// standard deviation (÷(n−1), 0 for one sample). The engine's own
// statistics in results (NewStatistics) use the population σ; the two are
// kept apart on purpose (doc.go, quirk 3). Every score must be in 0..1.
func Summarize(xs []float64) (Statistics, error) {
	if err := checkSeries(xs); err != nil {
		return Statistics{}, err
	}
	return sampleSummary(xs), nil
}

func sampleSummary(xs []float64) Statistics {
	st := NewStatistics(xs)
	if st.Count < 2 {
		st.StandardDeviation = 0
		return st
	}
	st.StandardDeviation = math.Sqrt(sampleVariance(xs, st.Mean))
	return st
}

func sampleVariance(xs []float64, mean float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	v := 0.0
	for _, x := range xs {
		d := x - mean
		v += d * d
	}
	return v / float64(len(xs)-1)
}

// MeanInterval is a summary with a normal-approximation confidence
// interval of the mean, clamped to 0..1.
type MeanInterval struct {
	Statistics
	ConfidenceLevel float64 `json:"confidence_level"`
	Lower           float64 `json:"lower"`
	Upper           float64 `json:"upper"`
	Margin          float64 `json:"margin"`
}

// ConfidenceInterval summarises xs (sample σ) and adds the interval
// mean ± z·σ/√n at level (0.90, 0.95 or 0.99; 0 means 0.95). An empty
// series is invalid_evaluation_statistics.
func ConfidenceInterval(xs []float64, level float64) (MeanInterval, error) {
	level, z, err := ZFor(level)
	if err != nil {
		return MeanInterval{}, err
	}
	if err := checkSeries(xs); err != nil {
		return MeanInterval{}, err
	}
	if len(xs) == 0 {
		return MeanInterval{}, ReasonErr(CodeInvalidEvaluationStatistic, "empty_series", "")
	}
	st := sampleSummary(xs)
	margin := z * st.StandardDeviation / math.Sqrt(float64(st.Count))
	return MeanInterval{
		Statistics:      st,
		ConfidenceLevel: level,
		Lower:           clamp01(st.Mean - margin),
		Upper:           clamp01(st.Mean + margin),
		Margin:          margin,
	}, nil
}

// PassRateInterval is the Wilson score interval of a pass rate. Results
// carry one for their case pass rate at 95 %.
type PassRateInterval struct {
	Passed          int     `json:"passed"`
	Total           int     `json:"total"`
	Rate            float64 `json:"rate"`
	ConfidenceLevel float64 `json:"confidence_level"`
	Lower           float64 `json:"lower"`
	Upper           float64 `json:"upper"`
}

// WilsonInterval is the Wilson score interval for passed of total at level
// (0 means 0.95): p = k/n, d = 1 + z²/n, centre = (p + z²/2n)/d, half =
// z·√(p(1−p)/n + z²/4n²)/d, clamped to 0..1. It needs 0 ≤ passed ≤ total
// and 1 ≤ total ≤ 100 000 (invalid_pass_rate_samples). Unlike p ± z·σ it
// stays inside 0..1 and is honest at 0/n and n/n, which is why a pass rate
// of 0.80 over 20 cases reports 0.58–0.92, not a false ±0.
func WilsonInterval(passed, total int, level float64) (PassRateInterval, error) {
	level, z, err := ZFor(level)
	if err != nil {
		return PassRateInterval{}, err
	}
	if total < 1 || total > MaxStatisticsSamples || passed < 0 || passed > total {
		return PassRateInterval{}, NewErr(CodeInvalidPassRateSamples, strconv.Itoa(passed)+"/"+strconv.Itoa(total))
	}
	return wilson(passed, total, level, z), nil
}

func wilson(passed, total int, level, z float64) PassRateInterval {
	n := float64(total)
	p := float64(passed) / n
	z2 := z * z
	d := 1 + z2/n
	centre := (p + z2/(2*n)) / d
	half := z * math.Sqrt(p*(1-p)/n+z2/(4*n*n)) / d
	return PassRateInterval{
		Passed:          passed,
		Total:           total,
		Rate:            p,
		ConfidenceLevel: level,
		Lower:           clamp01(centre - half),
		Upper:           clamp01(centre + half),
	}
}

// resultPassRateInterval is the interval a result document carries: 95 %
// Wilson over its cases. With no cases nothing is known, so the interval
// is the whole of 0..1.
func resultPassRateInterval(passed, total int) PassRateInterval {
	if total < 1 {
		return PassRateInterval{ConfidenceLevel: DefaultConfidenceLevel, Upper: 1}
	}
	return wilson(passed, total, DefaultConfidenceLevel, zScores[DefaultConfidenceLevel])
}

func clamp01(x float64) float64 { return math.Max(0, math.Min(1, x)) }

// GateOptions configure LongitudinalGate. Start from DefaultGateOptions:
// RequireSignificance's zero value is a real setting.
type GateOptions struct {
	// ConfidenceLevel is 0.90, 0.95 or 0.99 (0 means 0.95).
	ConfidenceLevel float64 `json:"confidence_level"`
	// MaxMeanDrop is the tolerated fall of the mean score, 0..1.
	MaxMeanDrop float64 `json:"max_mean_drop"`
	// RequireSignificance makes the gate fail only when the lower bound of
	// the drop exceeds MaxMeanDrop, not the observed drop.
	RequireSignificance bool `json:"require_significance"`
}

// DefaultGateOptions are 95 %, no tolerated drop, significance required.
func DefaultGateOptions() GateOptions {
	return GateOptions{ConfidenceLevel: DefaultConfidenceLevel, RequireSignificance: true}
}

// GateReport is the longitudinal regression document (§5.14).
type GateReport struct {
	ReportType          string     `json:"report_type"`
	ConfidenceLevel     float64    `json:"confidence_level"`
	Baseline            Statistics `json:"baseline"`
	Current             Statistics `json:"current"`
	MeanDrop            float64    `json:"mean_drop"`
	MeanDropLowerBound  float64    `json:"mean_drop_lower_bound"`
	MeanDropMargin      float64    `json:"mean_drop_margin"`
	MaxMeanDrop         float64    `json:"max_mean_drop"`
	RequireSignificance bool       `json:"require_significance"`
	Regression          bool       `json:"regression"`
	Passed              bool       `json:"passed"`
}

// LongitudinalGate compares two score series (older baseline, newer
// current): drop = max(0, meanB − meanC), margin = z·√(s²B/nB + s²C/nC)
// with sample variances, lower = max(0, drop − margin). It regresses when
// lower > MaxMeanDrop (RequireSignificance) or drop > MaxMeanDrop. Both
// series need at least one score.
func LongitudinalGate(baseline, current []float64, opts GateOptions) (*GateReport, error) {
	level, z, err := ZFor(opts.ConfidenceLevel)
	if err != nil {
		return nil, err
	}
	if !isFraction(opts.MaxMeanDrop) {
		return nil, ReasonErr(CodeInvalidEvaluationStatistic, "max_mean_drop", "")
	}
	for _, xs := range [][]float64{baseline, current} {
		if err := checkSeries(xs); err != nil {
			return nil, err
		}
		if len(xs) == 0 {
			return nil, ReasonErr(CodeInvalidEvaluationStatistic, "empty_series", "")
		}
	}
	b, c := sampleSummary(baseline), sampleSummary(current)
	drop := math.Max(0, b.Mean-c.Mean)
	margin := z * math.Sqrt(sampleVariance(baseline, b.Mean)/float64(b.Count)+sampleVariance(current, c.Mean)/float64(c.Count))
	lower := math.Max(0, drop-margin)
	regression := drop > opts.MaxMeanDrop
	if opts.RequireSignificance {
		regression = lower > opts.MaxMeanDrop
	}
	return &GateReport{
		ReportType:          LongitudinalReportType,
		ConfidenceLevel:     level,
		Baseline:            b,
		Current:             c,
		MeanDrop:            drop,
		MeanDropLowerBound:  lower,
		MeanDropMargin:      margin,
		MaxMeanDrop:         opts.MaxMeanDrop,
		RequireSignificance: opts.RequireSignificance,
		Regression:          regression,
		Passed:              !regression,
	}, nil
}
