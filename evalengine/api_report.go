// The root's names for report rendering in internal/report: the
// canonical exports (json, jsonl, markdown, junit, sarif, annotations,
// html), the failure reasons every renderer shares, and the compare and
// stats reports. Each name is the same type, constant or function as the
// report package's, whose doc comments carry the detail.

package evalengine

import (
	"io"

	"github.com/fadcedab/adk/evalengine/internal/report"
)

// DiffOp is one span of a word diff: Op is '=' (both), '-' (expected only)
// or '+' (actual only).
type DiffOp = report.DiffOp

// DiffWords diffs two texts by words (whitespace runs are tokens too, so
// joining the spans of one side gives that side back).
func DiffWords(expected string, actual string) []DiffOp {
	return report.DiffWords(expected, actual)
}

// Export formats (CONTRACTS §5.10).
const (
	FormatJSON        = report.FormatJSON
	FormatMarkdown    = report.FormatMarkdown
	FormatJUnit       = report.FormatJUnit
	FormatSARIF       = report.FormatSARIF
	FormatAnnotations = report.FormatAnnotations

	// FormatJSONL is the sample stream (evalcore/stream.go): a header line, one line
	// per sample in case order, the summary line.
	FormatJSONL = report.FormatJSONL
)

const (
	// MetadataResponseCache is the result metadata key under which a run with
	// a response cache records {mode, hits, misses, writes}; the Markdown
	// report prints it.
	MetadataResponseCache = report.MetadataResponseCache
)

// Export defaults and bounds.
const (
	DefaultSuiteName         = report.DefaultSuiteName
	MaxSuiteNameBytes        = report.MaxSuiteNameBytes
	MaxExportBytes           = report.MaxExportBytes
	MaxExportFindings        = report.MaxExportFindings
	InformationURI           = report.InformationURI
	CodeInvalidExportOptions = report.CodeInvalidExportOptions
)

// ExportOptions are the renderer's only options.
type ExportOptions = report.ExportOptions

// Formats lists the export formats in a fixed order.
func Formats() []string {
	return report.Formats()
}

// Render is the one canonical renderer.
func Render(v any, format string, opts ExportOptions) ([]byte, error) {
	return report.Render(v, format, opts)
}

// WriteJSON writes Render(v, FormatJSON, opts)'s bytes to w, with its
// errors, without holding a run's result document in one buffer. Nothing
// is written when Render would fail; an error after that is w's
// (ErrorCode "").
func WriteJSON(w io.Writer, v any, opts ExportOptions) error {
	return report.WriteJSON(w, v, opts)
}

const (
	// MaxFailureSamples bounds the samples explained per case; the rest are
	// counted in CaseFailure.OmittedSamples.
	MaxFailureSamples = report.MaxFailureSamples
)

// CaseFailure explains why one case did not pass: what the renderers put in
// a "Failures" section, a JUnit <failure>, a SARIF message or an
// annotation.
type CaseFailure = report.CaseFailure

// FailedMetric is one metric that did not pass, with its score and
// threshold (score is 0 when the status is error or not_evaluated).
type FailedMetric = report.FailedMetric

// SampleFailure explains one failed or errored sample.
type SampleFailure = report.SampleFailure

// ResponseMismatch is the first turn whose response differed from the
// expected one, as bounded excerpts.
type ResponseMismatch = report.ResponseMismatch

// TrajectoryMismatch is the first expected tool call that was not matched
// and the actual call found in its place ("" when there was none).
type TrajectoryMismatch = report.TrajectoryMismatch

// Failures extracts the reasons of every case that did not pass, in result
// order.
func Failures(r *Result) []CaseFailure {
	return report.Failures(r)
}

const (
	// FormatHTML is the self-contained HTML report (issue 15).
	FormatHTML = report.FormatHTML
)

// RenderHTML renders the HTML report of a result, of a comparison, or of a
// result with its baseline comparison (either may be nil, not both).
func RenderHTML(res *Result, cmp *Comparison, opts ExportOptions) ([]byte, error) {
	return report.RenderHTML(res, cmp, opts)
}

const (
	// FormatText is the plain-text format of StatsReport.
	FormatText = report.FormatText
)

// Statistics report constants.
const (
	StatsReportType      = report.StatsReportType
	MaxStatsReportInputs = report.MaxStatsReportInputs
)

// CompareReport is `adk eval compare BASELINE CURRENT`: Compare, then
// render.
func CompareReport(baseline *Result, current *Result, opts CompareOptions, format string, eo ExportOptions) ([]byte, *Comparison, error) {
	return report.CompareReport(baseline, current, opts, format, eo)
}

// StatsOptions configure StatsReport.
type StatsOptions = report.StatsOptions

// DefaultStatsOptions are the default gate (95 %, no tolerated drop,
// significance required) and text output.
func DefaultStatsOptions() StatsOptions {
	return report.DefaultStatsOptions()
}

// StatsDocument is the statistics report over a series of results.
type StatsDocument = report.StatsDocument

// ResultStats are one result's intervals.
type ResultStats = report.ResultStats

// MetricStats is a metric's mean score interval over every ok score of the
// result (all samples, all turns); nil when it has none.
type MetricStats = report.MetricStats

// StatsGate is the longitudinal gate over the pass outcomes of cases (1
// passed, 0 not) and over each metric's scores.
type StatsGate = report.StatsGate

// MetricGate is one metric's gate; Gate is nil when either side has no
// scores (the metric is then not gated).
type MetricGate = report.MetricGate

// StatsReport is `adk eval stats RESULT...`: for every result (oldest
// first) the Wilson interval of its pass rate and the confidence interval
// of each metric's mean score, then, with two or more results, the
// longitudinal gate of the last result against all earlier ones pooled, on
// case pass outcomes and on every metric both sides scored.
func StatsReport(results []*Result, opts StatsOptions) ([]byte, *StatsDocument, error) {
	return report.StatsReport(results, opts)
}

// StatsBuilder is StatsReport one result at a time (AddResult for a
// document, Add for a stream's ReadStreamSeries), holding of the earlier
// results only their intervals and what the gate pools of them.
type StatsBuilder = report.StatsBuilder

// NewStatsBuilder checks opts and the number of results that will be
// added, as StatsReport does.
func NewStatsBuilder(inputs int, opts StatsOptions) (*StatsBuilder, error) {
	return report.NewStatsBuilder(inputs, opts)
}

// CodeReportNotStreamable refuses json from RenderStream: a stream is its
// own JSON form.
const CodeReportNotStreamable = report.CodeReportNotStreamable

// StreamFormats are the formats RenderStream writes from a stream.
func StreamFormats() []string { return report.StreamFormats() }

// RenderStream writes the report of a streamed (jsonl) result to w case by
// case (markdown, junit, sarif, annotations), byte-identical to Render of
// the same result, holding one case at a time; html is one page bounded
// by MaxBytes, Render's when every case fits, else failed cases first
// under a note (see the report package).
func RenderStream(w io.Writer, f *StreamFile, format string, opts ExportOptions) error {
	return report.RenderStream(w, f, format, opts)
}

// RenderStreamCompared is RenderStream with the run's baseline
// comparison: html shows it as RenderHTML does, its case table paged with
// the cases when the page cannot hold everything (regressions first);
// other formats are the result's alone.
func RenderStreamCompared(w io.Writer, f *StreamFile, cmp *Comparison, format string, opts ExportOptions) error {
	return report.RenderStreamCompared(w, f, cmp, format, opts)
}

// CompareSidesReport is CompareReport of two comparison sides
// (ResultSide, StreamSide, ReadStreamSide): the same bytes for the same
// results.
func CompareSidesReport(baseline, current *CompareSide, opts CompareOptions, format string, eo ExportOptions) ([]byte, *Comparison, error) {
	return report.CompareSidesReport(baseline, current, opts, format, eo)
}

// WriteComparison writes the json or markdown report of cmp to w a case
// row at a time: Render's bytes when they fit opts.MaxBytes, and the same
// document past it, which Render refuses (a 100,000-case comparison with
// long case ids). It returns the bytes written; an error before the
// first byte is typed, one after it is w's.
func WriteComparison(w io.Writer, cmp *Comparison, format string, opts ExportOptions) (int64, error) {
	return report.WriteComparison(w, cmp, format, opts)
}

// WriteCompareSidesReport writes CompareSidesReport's report of cmp (the
// CompareSides of baseline and current) to w as WriteComparison does:
// the same bytes when they fit eo.MaxBytes, the same document past it.
func WriteCompareSidesReport(w io.Writer, baseline, current *CompareSide, cmp *Comparison, format string, eo ExportOptions) (int64, error) {
	return report.WriteCompareSidesReport(w, baseline, current, cmp, format, eo)
}

// RenderComparisonPage is RenderHTML of a comparison alone, paged when
// the page cannot hold every case row: the regressions first, then the
// other rows, as many as fit, under a note with the counts. A page that
// fits is RenderHTML's bytes.
func RenderComparisonPage(cmp *Comparison, opts ExportOptions) ([]byte, error) {
	return report.RenderComparisonPage(cmp, opts)
}
