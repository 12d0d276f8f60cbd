package report

import (
	"bytes"
	_ "embed"
	"errors"
	"html/template"
	"sort"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
)

// FormatHTML is the self-contained HTML report (issue 15).
const FormatHTML = "html"

// maxHTMLText bounds one rendered text (an input, a response, a
// rationale): a reader needs the start, and the report must stay within
// the export bound.
const maxHTMLText = 64 << 10

//go:embed html_report.tmpl
var htmlReportSource string

// htmlReport is parsed once, on the first HTML report: html/template
// escapes every value by its context, so a case id, a response or a tool
// name that is "<script>" renders as text. Parsing it at init cost every
// adk process ~0.75 ms and 1,900 allocations of start-up, HTML or not.
var htmlReport = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"f4":  f4,
		"inc": func(i int) int { return i + 1 },
	}).Parse(htmlReportSource))
})

// RenderHTML renders the HTML report of a result, of a comparison, or of
// a result with its baseline comparison (either may be nil, not both).
// Unlike the other non-JSON formats it carries content (inputs, expected
// and actual responses, tool names, rationales): it is the report a
// person reads to see why a case failed. The bytes are deterministic.
func RenderHTML(res *evalcore.Result, cmp *evalcore.Comparison, opts ExportOptions) ([]byte, error) {
	if res == nil && cmp == nil {
		return nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "nil", "")
	}
	maxBytes := opts.MaxBytes
	if maxBytes == 0 {
		maxBytes = MaxExportBytes
	}
	if maxBytes < 0 || maxBytes > MaxExportBytes {
		return nil, evalcore.NewErr(CodeInvalidExportOptions, "max_bytes")
	}
	if res != nil {
		r, err := evalcore.CheckResult(res)
		if err != nil {
			return nil, &evalcore.Error{Code: evalcore.CodeInvalidExportResult, Reason: evalcore.ErrorCode(err), Err: err}
		}
		if r.ResultSchemaVersion != evalcore.ResultSchemaVersion {
			return nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "result_schema_version", FormatHTML)
		}
		res = r
	}
	if cmp != nil {
		var err error
		if cmp, err = evalcore.CheckComparison(cmp); err != nil {
			return nil, &evalcore.Error{Code: evalcore.CodeInvalidExportResult, Reason: evalcore.ErrorCode(err), Err: err}
		}
	}
	// The page stops where it passes maxBytes: a report over the bound
	// (the developer API then renders it from the stream, paged) costs
	// the bound, not the whole page.
	b := boundedBuffer{max: maxBytes}
	if err := htmlReport().Execute(&b, buildHTMLView(res, cmp)); err != nil {
		if errors.Is(err, errOverBound) {
			return nil, evalcore.NewErr(evalcore.CodeExportByteLimitExceeded, "over "+strconv.Itoa(maxBytes))
		}
		return nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", err.Error())
	}
	return b.buf.Bytes(), nil
}

// errOverBound stops a page written past its bound.
var errOverBound = errors.New("page over its byte bound")

// boundedBuffer is a writer into a buffer that refuses to grow past max
// bytes.
type boundedBuffer struct {
	buf bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.max {
		return 0, errOverBound
	}
	return b.buf.Write(p)
}

func (b *boundedBuffer) WriteString(s string) (int, error) {
	if b.buf.Len()+len(s) > b.max {
		return 0, errOverBound
	}
	return b.buf.WriteString(s)
}

type htmlView struct {
	Title   string
	Result  *htmlResult
	Compare *htmlCompare
}

type htmlResult struct {
	R         *evalcore.Result
	Status    string
	Interval  string
	MetricIDs []string
	Cases     []htmlCase
	Metadata  []htmlKV
	// Paged is set on a page that leaves cases out (RenderStream's html
	// of a result over one page): the template says so above the cases.
	Paged *htmlPaged
}

// htmlPaged counts what a bounded page shows of the result's cases.
type htmlPaged struct {
	Total, Shown, Failed, ShownFailed, Passed, ShownPassed int
	MaxBytes                                               int
}

type htmlKV struct{ Key, Value string }

type htmlCase struct {
	Anchor  string
	C       *evalcore.CaseResult
	Scores  []htmlScore // one per MetricIDs entry
	Summary string      // the failure in one line
	Samples []htmlSample
	Omitted int // passed samples not drawn
}

type htmlScore struct {
	Present bool
	M       evalcore.MetricResult
}

type htmlSample struct {
	S       *evalcore.SampleResult
	Failure *SampleFailure
	Metrics []htmlMetric
	Turns   []htmlTurn
	Tools   []htmlToolRow
	HasExp  bool // the turns state an expected trajectory
}

type htmlMetric struct {
	M      evalcore.MetricResult
	Where  string // "case" or the turn id
	Reason string
}

type htmlTurn struct {
	T        *evalcore.TurnResult
	Input    string
	Expected string
	HasExp   bool
	Actual   string
	Diff     []DiffOp
}

type htmlToolRow struct {
	Index       int
	Expected    string
	Actual      string
	ExpMismatch bool // the first expected call the policy could not match
	ActMismatch bool // the actual call found in its place
}

type htmlCompare struct {
	C      *evalcore.Comparison
	Status string
	Cases  []evalcore.CaseDiff // regressions first
	// Paged is set on a page whose case-changes table leaves rows out
	// (RenderStream's html of a comparison over one page).
	Paged *htmlComparePaged
}

// htmlComparePaged counts what a bounded page shows of a comparison's
// case rows.
type htmlComparePaged struct {
	Total, Shown, Regressions, ShownRegressions, Others, ShownOthers int
	MaxBytes                                                         int
}

func buildHTMLView(res *evalcore.Result, cmp *evalcore.Comparison) *htmlView {
	v := &htmlView{}
	if res != nil {
		v.Title = "Evaluation report: " + res.EvalSetID + " " + res.EvalSetVersion
		v.Result = buildHTMLResult(res)
	}
	if cmp != nil {
		if v.Title == "" {
			v.Title = "Evaluation comparison: " + cmp.EvalSetID
		}
		hc := &htmlCompare{C: cmp, Status: passFail(cmp.Passed)}
		hc.Cases = append([]evalcore.CaseDiff(nil), cmp.CaseDiffs...)
		// Newly failing first, then the rest, each in document order.
		sort.SliceStable(hc.Cases, func(i, j int) bool { return hc.Cases[i].Regression && !hc.Cases[j].Regression })
		v.Compare = hc
	}
	return v
}

func buildHTMLResult(r *evalcore.Result) *htmlResult {
	hr := buildHTMLHead(r)
	reasons := map[string]string{}
	for _, f := range Failures(r) {
		reasons[f.CaseID] = f.Reason
	}
	for ci := range r.Cases {
		c := &r.Cases[ci]
		hr.Cases = append(hr.Cases, buildHTMLCase(ci, c, hr.MetricIDs, reasons[c.CaseID]))
	}
	return hr
}

// buildHTMLHead is the part of the view every page shares: the summary,
// the metric columns and the metadata (no cases).
func buildHTMLHead(r *evalcore.Result) *htmlResult {
	hr := &htmlResult{R: r, Status: passFail(r.Passed), Interval: wilsonText(r.PassRateInterval)}
	for _, m := range r.Metrics {
		hr.MetricIDs = append(hr.MetricIDs, m.MetricID)
	}
	keys := make([]string, 0, len(r.Metadata))
	for k := range r.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		hr.Metadata = append(hr.Metadata, htmlKV{k, clip(responseText(r.Metadata[k]))})
	}
	return hr
}

// buildHTMLCase is case ci's row and details; reason is its failure in
// one line ("" when it passed).
func buildHTMLCase(ci int, c *evalcore.CaseResult, metricIDs []string, reason string) htmlCase {
	hc := htmlCase{Anchor: "case-" + strconv.Itoa(ci), C: c}
	byID := map[string]evalcore.MetricResult{}
	for _, m := range c.Criteria {
		byID[m.MetricID] = m
	}
	for _, id := range metricIDs {
		m, ok := byID[id]
		hc.Scores = append(hc.Scores, htmlScore{Present: ok, M: m})
	}
	hc.Summary = reason
	// Every sample that did not pass is drawn; of a case whose samples
	// all passed, the first, so the report stays readable and bounded.
	for si := range c.Samples {
		s := &c.Samples[si]
		if s.Passed && (!c.Passed || si > 0) {
			hc.Omitted++
			continue
		}
		hc.Samples = append(hc.Samples, buildHTMLSample(s))
	}
	return hc
}

func buildHTMLSample(s *evalcore.SampleResult) htmlSample {
	hs := htmlSample{S: s}
	if !s.Passed {
		f := sampleFailure(s)
		hs.Failure = &f
	}
	for i := range s.Criteria {
		m := &s.Criteria[i]
		hs.Metrics = append(hs.Metrics, htmlMetric{M: *m, Where: "case", Reason: clip(metricReason(m))})
	}
	for ti := range s.Turns {
		t := &s.Turns[ti]
		for i := range t.Metrics {
			m := &t.Metrics[i]
			hs.Metrics = append(hs.Metrics, htmlMetric{M: *m, Where: t.TurnID, Reason: clip(metricReason(m))})
		}
		ht := htmlTurn{T: t, Input: clip(responseText(t.Input)), Actual: clip(responseText(t.Actual))}
		var exp any
		exp, ht.HasExp = evalcore.ExpectedResponse(t.Expected)
		ht.Expected = clip(responseText(exp))
		if ht.HasExp {
			ht.Diff = DiffWords(ht.Expected, ht.Actual)
		}
		hs.Turns = append(hs.Turns, ht)
	}
	exp, has := expectedTools(s.Turns)
	act := toolNames(s.Trajectory)
	hs.HasExp = has
	ei, ai, desc := trajectoryMismatchAt(s)
	n := max(len(exp), len(act), ei+1, ai+1)
	for i := 0; i < n; i++ {
		row := htmlToolRow{Index: i + 1, ExpMismatch: i == ei, ActMismatch: i == ai}
		if i < len(exp) {
			row.Expected = clip(exp[i])
		} else if i == ei {
			row.Expected = clip(desc)
		}
		if i < len(act) {
			row.Actual = clip(act[i])
		}
		hs.Tools = append(hs.Tools, row)
	}
	return hs
}

// trajectoryMismatchAt reads the first failing trajectory criterion's
// first_mismatch record: the expected and actual call indexes (-1 when
// none) and the expected call's description.
func trajectoryMismatchAt(s *evalcore.SampleResult) (ei, ai int, expected string) {
	for i := range s.Criteria {
		m := &s.Criteria[i]
		mm, _ := m.Metadata[evalcore.MetaFirstMismatch].(map[string]any)
		if m.Passed || mm == nil {
			continue
		}
		if _, ok := mm["expected_index"]; !ok {
			continue
		}
		expected, _ = mm["expected"].(string)
		return intOf(mm["expected_index"]), intOf(mm["actual_index"]), expected
	}
	return -1, -1, ""
}

// clip bounds a text at maxHTMLText bytes on a rune boundary.
func clip(s string) string {
	if len(s) <= maxHTMLText {
		return s
	}
	cut := maxHTMLText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)-cut) + " more bytes)"
}
