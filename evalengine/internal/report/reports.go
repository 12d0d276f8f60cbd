package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
)

// FormatText is the plain-text format of StatsReport.
const FormatText = "text"

// Statistics report constants.
const (
	StatsReportType      = "evaluation_statistics"
	MaxStatsReportInputs = 1000
)

// CompareReport is `adk eval compare BASELINE CURRENT`: Compare, then
// render. json is exactly Render(comparison, json), the canonical
// comparison document `adk eval run --baseline` prints. markdown is
// Render(comparison, markdown) followed by a "Pass-rate intervals" section
// with both results' 95 % Wilson intervals and whether they overlap, which
// answers "is 0.80 on 20 cases really better than 0.75?". Other formats
// are result-only and refused. The comparison is returned for the exit
// code: it does not include the current result's own verdict, so a gate
// ANDs comparison.Passed with current.Passed.
func CompareReport(baseline, current *evalcore.Result, opts evalcore.CompareOptions, format string, eo ExportOptions) ([]byte, *evalcore.Comparison, error) {
	if format != FormatJSON && format != FormatMarkdown {
		return nil, nil, evalcore.NewErr(evalcore.CodeInvalidReportFormat, format)
	}
	b, err := evalcore.ResultSide(baseline)
	if err != nil {
		return nil, nil, &evalcore.Error{Code: evalcore.CodeInvalidBaseline, Reason: evalcore.ErrorCode(err), Err: err}
	}
	c, err := evalcore.ResultSide(current)
	if err != nil {
		return nil, nil, &evalcore.Error{Code: evalcore.CodeInvalidCurrentResult, Reason: evalcore.ErrorCode(err), Err: err}
	}
	return CompareSidesReport(b, c, opts, format, eo)
}

// CompareSidesReport is CompareReport of two comparison sides (a result
// document's or a stream's, evalcore.ResultSide and StreamSide): the
// same bytes for the same results, in memory O(cases) whatever their
// samples hold.
func CompareSidesReport(baseline, current *evalcore.CompareSide, opts evalcore.CompareOptions, format string, eo ExportOptions) ([]byte, *evalcore.Comparison, error) {
	if format != FormatJSON && format != FormatMarkdown {
		return nil, nil, evalcore.NewErr(evalcore.CodeInvalidReportFormat, format)
	}
	cmp, err := evalcore.CompareSides(baseline, current, opts)
	if err != nil {
		return nil, nil, err
	}
	out, err := Render(cmp, format, eo)
	if err != nil {
		return nil, nil, err
	}
	if format == FormatMarkdown {
		out = append(out, intervalSection(baseline.Summary(), current.Summary())...)
		limit := eo.MaxBytes
		if limit == 0 {
			limit = MaxExportBytes
		}
		if len(out) > limit {
			return nil, nil, evalcore.NewErr(evalcore.CodeExportByteLimitExceeded, strconv.Itoa(len(out)))
		}
	}
	return out, cmp, nil
}

// intervalSection renders both Wilson intervals (results were validated by
// Compare, so their intervals are the recomputed ones).
func intervalSection(b, c *evalcore.Result) string {
	var s strings.Builder
	s.WriteString("\n## Pass-rate intervals\n\n| Result | Version | Pass rate | Cases passed | 95% Wilson CI |\n| --- | --- | --- | --- | --- |\n")
	for _, row := range []struct {
		name string
		r    *evalcore.Result
	}{{"baseline", b}, {"current", c}} {
		iv := row.r.PassRateInterval
		fmt.Fprintf(&s, "| %s | %s | %s | %d/%d | %s–%s |\n", row.name, mdCell(row.r.EvalSetVersion), f4(row.r.PassRate), iv.Passed, iv.Total, f4(iv.Lower), f4(iv.Upper))
	}
	bi, ci := b.PassRateInterval, c.PassRateInterval
	if bi.Lower <= ci.Upper && ci.Lower <= bi.Upper {
		s.WriteString("\nThe intervals overlap: the pass-rate difference is not significant at 95%.\n")
	} else {
		s.WriteString("\nThe intervals do not overlap: the pass-rate difference is significant at 95%.\n")
	}
	return s.String()
}

// StatsOptions configure StatsReport. Start from DefaultStatsOptions.
type StatsOptions struct {
	// Gate is the longitudinal gate policy; its ConfidenceLevel is also
	// the level of every interval in the report.
	Gate evalcore.GateOptions
	// Format is text (default), markdown or json.
	Format string
	// MaxBytes bounds the output (≤16 MiB, the default).
	MaxBytes int
}

// DefaultStatsOptions are the default gate (95 %, no tolerated drop,
// significance required) and text output.
func DefaultStatsOptions() StatsOptions {
	return StatsOptions{Gate: evalcore.DefaultGateOptions(), Format: FormatText}
}

// StatsDocument is the statistics report over a series of results.
type StatsDocument struct {
	ReportType      string        `json:"report_type"`
	ConfidenceLevel float64       `json:"confidence_level"`
	Results         []ResultStats `json:"results"`
	// Gate compares the last result with all earlier ones pooled; nil
	// with a single result.
	Gate   *StatsGate `json:"gate"`
	Passed bool       `json:"passed"`
}

// ResultStats are one result's intervals.
type ResultStats struct {
	EvalSetID        string                    `json:"eval_set_id"`
	EvalSetVersion   string                    `json:"eval_set_version"`
	PassRateInterval evalcore.PassRateInterval `json:"pass_rate_interval"`
	Metrics          []MetricStats             `json:"metrics"`
}

// MetricStats is a metric's mean score interval over every ok score of
// the result (all samples, all turns); nil when it has none.
type MetricStats struct {
	MetricID string                 `json:"metric_id"`
	Interval *evalcore.MeanInterval `json:"interval"`
}

// StatsGate is the longitudinal gate over the pass outcomes of cases (1
// passed, 0 not) and over each metric's scores.
type StatsGate struct {
	BaselineResults int                  `json:"baseline_results"` // how many results were pooled
	PassRate        *evalcore.GateReport `json:"pass_rate"`
	Metrics         []MetricGate         `json:"metrics"`
	Options         evalcore.GateOptions `json:"options"`
	Regressions     []string             `json:"regressions"` // "pass_rate", "metric:<id>"
}

// MetricGate is one metric's gate; Gate is nil when either side has no
// scores (the metric is then not gated).
type MetricGate struct {
	MetricID string               `json:"metric_id"`
	Gate     *evalcore.GateReport `json:"gate"`
}

// StatsReport is `adk eval stats RESULT...`: for every result (oldest
// first) the Wilson interval of its pass rate and the confidence interval
// of each metric's mean score, then, with two or more results, the
// longitudinal gate of the last result against all earlier ones pooled,
// on case pass outcomes and on every metric both sides scored. All
// results are re-validated and must share eval_set_id. It returns the
// rendering and the document; the gate passed when doc.Passed (exit 0),
// else a regression (exit 2).
func StatsReport(results []*evalcore.Result, opts StatsOptions) ([]byte, *StatsDocument, error) {
	b, err := NewStatsBuilder(len(results), opts)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range results {
		if err := b.AddResult(r); err != nil {
			return nil, nil, err
		}
	}
	return b.Finish()
}

// StatsBuilder is StatsReport one result at a time, so that a caller
// holds one result (or one stream's series) at a time: of the earlier
// results it keeps their intervals and, for the gate, the last
// MaxStatisticsSamples case outcomes and scores of each metric pooled,
// which is all the gate reads of them.
type StatsBuilder struct {
	opts     StatsOptions
	maxBytes int
	inputs   int
	doc      *StatsDocument
	firstID  string
	// last is the latest result's series: the gate's current side, or,
	// once another comes, part of the pooled history.
	last         *evalcore.StatsSeries
	baseOutcomes []float64
	baseScores   map[string][]float64
}

// NewStatsBuilder checks opts and the number of results that will be
// added (1..MaxStatsReportInputs) as StatsReport does.
func NewStatsBuilder(inputs int, opts StatsOptions) (*StatsBuilder, error) {
	if opts.Format == "" {
		opts.Format = FormatText
	}
	if opts.Format != FormatText && opts.Format != FormatMarkdown && opts.Format != FormatJSON {
		return nil, evalcore.NewErr(evalcore.CodeInvalidReportFormat, opts.Format)
	}
	maxBytes := opts.MaxBytes
	if maxBytes == 0 {
		maxBytes = MaxExportBytes
	}
	if maxBytes < 0 || maxBytes > MaxExportBytes {
		return nil, evalcore.NewErr(CodeInvalidExportOptions, "max_bytes")
	}
	level, _, err := evalcore.ZFor(opts.Gate.ConfidenceLevel)
	if err != nil {
		return nil, err
	}
	opts.Gate.ConfidenceLevel = level
	if inputs <= 0 || inputs > MaxStatsReportInputs {
		return nil, evalcore.ReasonErr(evalcore.CodeInvalidEvaluationStatistic, "result_count", strconv.Itoa(inputs))
	}
	return &StatsBuilder{
		opts: opts, maxBytes: maxBytes, inputs: inputs,
		doc:        &StatsDocument{ReportType: StatsReportType, ConfidenceLevel: level, Results: []ResultStats{}, Passed: true},
		baseScores: map[string][]float64{},
	}, nil
}

// AddResult re-validates r (a schema-2 result) and adds it.
func (b *StatsBuilder) AddResult(r *evalcore.Result) error {
	c, err := evalcore.CheckResult(r)
	if err == nil && c.ResultSchemaVersion != evalcore.ResultSchemaVersion {
		err = evalcore.NewErr(evalcore.CodeUnsupportedResultVersion, "1")
	}
	if err != nil {
		return &evalcore.Error{Code: evalcore.CodeInvalidEvalResult, Reason: evalcore.ErrorCode(err), Detail: strconv.Itoa(len(b.doc.Results) + 1), Err: err}
	}
	return b.Add(evalcore.SeriesOfResult(c))
}

// Add adds the next result's series (SeriesOfResult of a checked result,
// or ReadStreamSeries of a stream).
func (b *StatsBuilder) Add(s *evalcore.StatsSeries) error {
	i := len(b.doc.Results)
	if i == b.inputs {
		return evalcore.ReasonErr(evalcore.CodeInvalidEvaluationStatistic, "result_count", strconv.Itoa(i+1))
	}
	if i == 0 {
		b.firstID = s.EvalSetID
	} else if s.EvalSetID != b.firstID {
		return evalcore.NewErr(evalcore.CodeEvalSetMismatch, strconv.Itoa(i+1))
	}
	rs, err := resultStats(s, b.opts.Gate.ConfidenceLevel)
	if err != nil {
		return err
	}
	b.doc.Results = append(b.doc.Results, rs)
	if b.last != nil {
		b.pool(b.last)
	}
	b.last = s
	return nil
}

// pool adds an earlier result to the gate's baseline, keeping of each
// series only the most recent MaxStatisticsSamples, all the gate reads.
func (b *StatsBuilder) pool(s *evalcore.StatsSeries) {
	b.baseOutcomes = keepRecent(s.Outcomes(b.baseOutcomes, s.Cases()-evalcore.MaxStatisticsSamples))
	for id, xs := range s.Scores {
		if len(xs) > evalcore.MaxStatisticsSamples {
			xs = xs[len(xs)-evalcore.MaxStatisticsSamples:]
		}
		b.baseScores[id] = keepRecent(append(b.baseScores[id], xs...))
	}
}

// keepRecent is the last MaxStatisticsSamples of xs, in place.
func keepRecent(xs []float64) []float64 {
	if n := len(xs) - evalcore.MaxStatisticsSamples; n > 0 {
		xs = xs[:copy(xs, xs[n:])]
	}
	return xs
}

// Finish gates the last result against the earlier ones pooled and
// renders the report.
func (b *StatsBuilder) Finish() ([]byte, *StatsDocument, error) {
	doc := b.doc
	if len(doc.Results) != b.inputs {
		return nil, nil, evalcore.ReasonErr(evalcore.CodeInvalidEvaluationStatistic, "result_count", strconv.Itoa(len(doc.Results)))
	}
	if len(doc.Results) > 1 {
		g, err := b.gate()
		if err != nil {
			return nil, nil, err
		}
		doc.Gate = g
		doc.Passed = len(g.Regressions) == 0
	}
	var out []byte
	var err error
	switch b.opts.Format {
	case FormatJSON:
		out, err = canonicalJSON(doc)
	case FormatMarkdown:
		out = []byte(statsMarkdown(doc))
	default:
		out = []byte(statsText(doc))
	}
	if err != nil {
		return nil, nil, err
	}
	if len(out) > b.maxBytes {
		return nil, nil, evalcore.NewErr(evalcore.CodeExportByteLimitExceeded, strconv.Itoa(len(out)))
	}
	return out, doc, nil
}

func resultStats(s *evalcore.StatsSeries, level float64) (ResultStats, error) {
	rs := ResultStats{EvalSetID: s.EvalSetID, EvalSetVersion: s.EvalSetVersion, Metrics: []MetricStats{}}
	if s.CaseCount > 0 {
		iv, err := evalcore.WilsonInterval(s.PassedCaseCount, s.CaseCount, level)
		if err != nil {
			return rs, err
		}
		rs.PassRateInterval = iv
	} else {
		rs.PassRateInterval = evalcore.PassRateInterval{ConfidenceLevel: level, Upper: 1}
	}
	for _, id := range s.MetricIDs {
		ms := MetricStats{MetricID: id}
		if xs := s.Scores[id]; len(xs) > 0 {
			if len(xs) > evalcore.MaxStatisticsSamples {
				xs = xs[:evalcore.MaxStatisticsSamples]
			}
			ci, err := evalcore.ConfidenceInterval(xs, level)
			if err != nil {
				return rs, err
			}
			ms.Interval = &ci
		}
		rs.Metrics = append(rs.Metrics, ms)
	}
	return rs, nil
}

// gate is the longitudinal gate of the last result against the pooled
// earlier ones, on the most recent MaxStatisticsSamples of each series.
func (b *StatsBuilder) gate() (*StatsGate, error) {
	opts := b.opts.Gate
	current := b.last
	g := &StatsGate{BaselineResults: len(b.doc.Results) - 1, Metrics: []MetricGate{}, Options: opts, Regressions: []string{}}
	capped := func(xs []float64) []float64 {
		if len(xs) > evalcore.MaxStatisticsSamples {
			return xs[len(xs)-evalcore.MaxStatisticsSamples:] // the most recent
		}
		return xs
	}
	if cur := current.Outcomes(nil, current.Cases()-evalcore.MaxStatisticsSamples); len(b.baseOutcomes) > 0 && len(cur) > 0 {
		pr, err := evalcore.LongitudinalGate(b.baseOutcomes, cur, opts)
		if err != nil {
			return nil, err
		}
		g.PassRate = pr
		if pr.Regression {
			g.Regressions = append(g.Regressions, "pass_rate")
		}
	}
	for _, id := range current.MetricIDs {
		mg := MetricGate{MetricID: id}
		if bs, cs := b.baseScores[id], current.Scores[id]; len(bs) > 0 && len(cs) > 0 {
			gr, err := evalcore.LongitudinalGate(bs, capped(cs), opts)
			if err != nil {
				return nil, err
			}
			mg.Gate = gr
			if gr.Regression {
				g.Regressions = append(g.Regressions, "metric:"+id)
			}
		}
		g.Metrics = append(g.Metrics, mg)
	}
	return g, nil
}

func pct(level float64) string { return strconv.FormatFloat(level*100, 'f', -1, 64) + "%" }

func gateLine(g *evalcore.GateReport) string {
	verdict := "ok"
	if g.Regression {
		verdict = "REGRESSION"
	}
	return fmt.Sprintf("mean %s -> %s, drop %s (lower bound %s, margin %s) %s",
		f4(g.Baseline.Mean), f4(g.Current.Mean), f4(g.MeanDrop), f4(g.MeanDropLowerBound), f4(g.MeanDropMargin), verdict)
}

func statsText(d *StatsDocument) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Evaluation statistics (%s confidence)\n", pct(d.ConfidenceLevel))
	for i, r := range d.Results {
		iv := r.PassRateInterval
		fmt.Fprintf(&b, "\n[%d] %s version %s\n    pass rate %s (%d/%d cases, %s Wilson CI %s–%s)\n",
			i+1, r.EvalSetID, r.EvalSetVersion, f4(iv.Rate), iv.Passed, iv.Total, pct(iv.ConfidenceLevel), f4(iv.Lower), f4(iv.Upper))
		for _, m := range r.Metrics {
			if m.Interval == nil {
				fmt.Fprintf(&b, "    metric %s: no scores\n", m.MetricID)
				continue
			}
			ci := m.Interval
			fmt.Fprintf(&b, "    metric %s: mean %s ± %s (CI %s–%s, n=%d, sd %s)\n",
				m.MetricID, f4(ci.Mean), f4(ci.Margin), f4(ci.Lower), f4(ci.Upper), ci.Count, f4(ci.StandardDeviation))
		}
	}
	if g := d.Gate; g != nil {
		sig := "significance required"
		if !g.Options.RequireSignificance {
			sig = "observed drop"
		}
		fmt.Fprintf(&b, "\nLongitudinal gate: result %d vs results 1-%d pooled (max mean drop %s, %s)\n",
			len(d.Results), g.BaselineResults, f4(g.Options.MaxMeanDrop), sig)
		if g.PassRate != nil {
			fmt.Fprintf(&b, "    pass rate: %s\n", gateLine(g.PassRate))
		}
		for _, m := range g.Metrics {
			if m.Gate == nil {
				fmt.Fprintf(&b, "    metric %s: not gated (no scores on one side)\n", m.MetricID)
				continue
			}
			fmt.Fprintf(&b, "    metric %s: %s\n", m.MetricID, gateLine(m.Gate))
		}
	}
	fmt.Fprintf(&b, "\nStatus: %s\n", passFail(d.Passed))
	return b.String()
}

func statsMarkdown(d *StatsDocument) string {
	var b strings.Builder
	b.WriteString("# Evaluation statistics\n\n")
	fmt.Fprintf(&b, "**Status: %s**\n\nConfidence level: %s\n\n", passFail(d.Passed), pct(d.ConfidenceLevel))
	b.WriteString("## Pass rates\n\n| # | Eval set | Version | Pass rate | Cases passed | Wilson CI |\n| --- | --- | --- | --- | --- | --- |\n")
	for i, r := range d.Results {
		iv := r.PassRateInterval
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %d/%d | %s–%s |\n", i+1, mdCell(r.EvalSetID), mdCell(r.EvalSetVersion), f4(iv.Rate), iv.Passed, iv.Total, f4(iv.Lower), f4(iv.Upper))
	}
	b.WriteString("\n## Metric intervals\n\n| # | Metric | Mean | Lower | Upper | n |\n| --- | --- | --- | --- | --- | --- |\n")
	for i, r := range d.Results {
		for _, m := range r.Metrics {
			if m.Interval == nil {
				fmt.Fprintf(&b, "| %d | %s | - | - | - | 0 |\n", i+1, mdCell(m.MetricID))
				continue
			}
			ci := m.Interval
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %d |\n", i+1, mdCell(m.MetricID), f4(ci.Mean), f4(ci.Lower), f4(ci.Upper), ci.Count)
		}
	}
	if g := d.Gate; g != nil {
		fmt.Fprintf(&b, "\n## Longitudinal gate\n\nResult %d against results 1-%d pooled; max mean drop %s, significance required: %t.\n\n",
			len(d.Results), g.BaselineResults, f4(g.Options.MaxMeanDrop), g.Options.RequireSignificance)
		b.WriteString("| Series | Baseline mean | Current mean | Drop | Drop lower bound | Status |\n| --- | --- | --- | --- | --- | --- |\n")
		row := func(name string, gr *evalcore.GateReport) {
			if gr == nil {
				fmt.Fprintf(&b, "| %s | - | - | - | - | not gated |\n", mdCell(name))
				return
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mdCell(name), f4(gr.Baseline.Mean), f4(gr.Current.Mean), f4(gr.MeanDrop), f4(gr.MeanDropLowerBound), regressionCell(gr.Regression))
		}
		row("pass rate", g.PassRate)
		for _, m := range g.Metrics {
			row("metric "+m.MetricID, m.Gate)
		}
	}
	return b.String()
}
