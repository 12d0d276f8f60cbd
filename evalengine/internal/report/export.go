package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/internal/canonjson"
)

// Export formats (CONTRACTS §5.10).
const (
	FormatJSON        = "json"
	FormatMarkdown    = "markdown"
	FormatJUnit       = "junit"
	FormatSARIF       = "sarif"
	FormatAnnotations = "annotations"
	// FormatJSONL is the sample stream (evalcore/stream.go): a header line, one
	// line per sample in case order, the summary line. It is bounded per
	// line, not by MaxBytes, so it carries results too big for one
	// 16 MiB document.
	FormatJSONL = "jsonl"
)

// MetadataResponseCache is the result metadata key under which a run with
// a response cache records {mode, hits, misses, writes}; the Markdown
// report prints it.
const MetadataResponseCache = "response_cache"

// Export defaults and bounds.
const (
	DefaultSuiteName         = "adk_eval"
	MaxSuiteNameBytes        = 256
	MaxExportBytes           = 16 << 20
	MaxExportFindings        = 10_000
	InformationURI           = "https://github.com/fadcedab/adk"
	sarifSchemaURI           = "https://json.schemastore.org/sarif-2.1.0.json"
	caseRuleID               = "evaluation-case"
	annotationTitle          = "Evaluation case failed"
	CodeInvalidExportOptions = "invalid_eval_export_options"
)

// ExportOptions are the renderer's only options.
type ExportOptions struct {
	// SuiteName names the JUnit suite and the SARIF/JUnit tool; 1..256
	// bytes of UTF-8, default "adk_eval".
	SuiteName string
	// MaxBytes bounds the output, ≤16 MiB (the default). The jsonl
	// format is bounded per line instead.
	MaxBytes int
	// StreamDigests go into the jsonl header (see StreamHeader), so a
	// jsonl report can be given to `adk eval run --resume` to render the
	// run again without running anything.
	StreamDigests map[string]string
}

// Formats lists the export formats in a fixed order.
func Formats() []string {
	return []string{FormatJSON, FormatMarkdown, FormatJUnit, FormatSARIF, FormatAnnotations, FormatHTML, FormatJSONL}
}

// Render is the one canonical renderer. v is a *Result or a *Comparison
// (JUnit, SARIF and annotations accept only a result). The value is
// re-validated first; the output is deterministic and ends with a newline,
// so library, API, HTTP and CLI callers all produce the same bytes. Every
// format but JSON is content-minimal: identifiers, scores and statuses, and
// for failed cases the reasons of Failures (bounded, secret-pruned excerpts
// of the expected and actual response and of the first mismatching expected
// tool call; actual tool arguments only when the result captured them). No
// prompts or metadata. HTML (RenderHTML) is the exception: the page a
// person reads, with inputs and responses.
func Render(v any, format string, opts ExportOptions) ([]byte, error) {
	if format == FormatHTML {
		switch x := v.(type) {
		case *evalcore.Result:
			return RenderHTML(x, nil, opts)
		case *evalcore.Comparison:
			return RenderHTML(nil, x, opts)
		}
	}
	suite, maxBytes, res, cmp, err := exportInputs(v, opts)
	if err != nil {
		return nil, err
	}
	var out []byte
	switch format {
	case FormatJSON:
		if res != nil {
			out, err = canonicalJSON(res)
		} else {
			out, err = canonicalJSON(cmp)
		}
	case FormatMarkdown:
		if res != nil {
			out = markdownResult(res)
		} else {
			out = markdownComparison(cmp)
		}
	case FormatJSONL:
		if res == nil || res.ResultSchemaVersion != evalcore.ResultSchemaVersion {
			return nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "result_required", format)
		}
		return evalcore.StreamResult(res, opts.StreamDigests)
	case FormatJUnit, FormatSARIF, FormatAnnotations:
		if res == nil {
			return nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "result_required", format)
		}
		if res.ResultSchemaVersion != evalcore.ResultSchemaVersion {
			return nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "result_schema_version", format)
		}
		switch format {
		case FormatJUnit:
			out = junit(res, suite)
		case FormatSARIF:
			out, err = sarif(res, suite)
		default:
			out, err = annotations(res)
		}
	default:
		return nil, evalcore.NewErr(evalcore.CodeInvalidReportFormat, format)
	}
	if err != nil {
		return nil, err
	}
	if len(out) > maxBytes {
		return nil, evalcore.NewErr(evalcore.CodeExportByteLimitExceeded, strconv.Itoa(len(out)))
	}
	return out, nil
}

// exportInputs checks Render's inputs: the suite name, the byte bound
// (0: MaxExportBytes) and the value, re-validated (a *Result or a
// *Comparison; exactly one of res and cmp is set).
func exportInputs(v any, opts ExportOptions) (suite string, maxBytes int, res *evalcore.Result, cmp *evalcore.Comparison, err error) {
	suite = opts.SuiteName
	if suite == "" {
		suite = DefaultSuiteName
	}
	if len(suite) > MaxSuiteNameBytes || !utf8.ValidString(suite) {
		return "", 0, nil, nil, evalcore.NewErr(evalcore.CodeInvalidSuiteName, "")
	}
	maxBytes = opts.MaxBytes
	if maxBytes == 0 {
		maxBytes = MaxExportBytes
	}
	if maxBytes < 0 || maxBytes > MaxExportBytes {
		return "", 0, nil, nil, evalcore.NewErr(CodeInvalidExportOptions, "max_bytes")
	}
	switch x := v.(type) {
	case *evalcore.Result:
		r, err := evalcore.CheckResult(x)
		if err != nil {
			return "", 0, nil, nil, &evalcore.Error{Code: evalcore.CodeInvalidExportResult, Reason: evalcore.ErrorCode(err), Err: err}
		}
		res = r
	case *evalcore.Comparison:
		if x == nil {
			return "", 0, nil, nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "nil", "")
		}
		if cmp, err = evalcore.CheckComparison(x); err != nil {
			return "", 0, nil, nil, &evalcore.Error{Code: evalcore.CodeInvalidExportResult, Reason: evalcore.ErrorCode(err), Err: err}
		}
	default:
		return "", 0, nil, nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "unsupported_value", "")
	}
	return suite, maxBytes, res, cmp, nil
}

// WriteJSON writes what Render(v, FormatJSON, opts) returns to w, with
// the same errors. A result whose samples Run encoded is written in
// pieces and never held as one document (a 5,000-sample report is
// megabytes of fresh memory at the end of a run); any other value is
// rendered and then written. Nothing is written when Render would fail;
// an error after that is w's (ErrorCode "").
func WriteJSON(w io.Writer, v any, opts ExportOptions) error {
	_, maxBytes, res, _, err := exportInputs(v, opts)
	if err != nil {
		return err
	}
	if res != nil && res.Legacy() == nil {
		ok, err := evalcore.WriteCanonicalResult(w, res, func(size int) error {
			if size > maxBytes {
				return evalcore.NewErr(evalcore.CodeExportByteLimitExceeded, strconv.Itoa(size))
			}
			return nil
		})
		if ok {
			return err
		}
		if err != nil {
			return evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "not_json", "")
		}
	}
	out, err := Render(v, FormatJSON, opts)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// canonicalJSON renders v as canonical JSON (sorted keys) plus a newline.
func canonicalJSON(v any) ([]byte, error) {
	if r, ok := v.(*evalcore.Result); ok && r.Legacy() == nil {
		if out, ok, err := evalcore.CanonicalResult(r); ok || err != nil {
			if err != nil {
				return nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "not_json", "")
			}
			return out, nil
		}
		// Result.MarshalJSON would send canonjson through encoding/json and
		// back; its plain struct encodes by reflection to the same bytes.
		type plain evalcore.Result
		v = (*plain)(r)
	}
	if c, ok := v.(*evalcore.Comparison); ok && c.MetricDiffs != nil && c.CaseDiffs != nil {
		// The same: MarshalJSON only turns nil lists into [].
		type plain evalcore.Comparison
		v = (*plain)(c)
	}
	out, err := canonjson.Marshal(v)
	if err != nil {
		return nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "not_json", "")
	}
	return append(out, '\n'), nil
}

// mdCellEscapes escapes a value for a Markdown table cell. Every old
// string is one byte, so it is strings' byte replacer: a cell with
// nothing to escape is returned (or written) as is, without allocating.
var mdCellEscapes = strings.NewReplacer("\\", "\\\\", "&", "&amp;", "|", "\\|", "\n", " ", "\r", " ", "`", "\\`", "<", "&lt;", ">", "&gt;")

// mdCell escapes a value for a Markdown table cell.
func mdCell(s string) string { return mdCellEscapes.Replace(s) }

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func f4(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }

func markdownResult(r *evalcore.Result) []byte {
	var b strings.Builder
	if !markdownHead(&b, r) {
		return []byte(b.String())
	}
	for i := range r.Cases {
		markdownCaseRow(&b, &r.Cases[i])
	}
	markdownFailures(&b, Failures(r))
	markdownTail(&b, r)
	return []byte(b.String())
}

// markdownHead writes everything before the case rows; false for a legacy
// result, whose report ends there. The streamed renderer (stream.go)
// writes the same pieces in the same order, case by case.
func markdownHead(b *strings.Builder, r *evalcore.Result) bool {
	b.WriteString("# Evaluation report\n\n")
	fmt.Fprintf(b, "**Status: %s**\n\n", passFail(r.Passed))
	fmt.Fprintf(b, "Eval set: %s (version %s)\n\n", mdCell(r.EvalSetID), mdCell(r.EvalSetVersion))
	if r.ResultSchemaVersion != evalcore.ResultSchemaVersion {
		b.WriteString("Legacy result (schema 1): no per-case details.\n")
		return false
	}
	fmt.Fprintf(b, "Pass rate: %s (%d/%d cases passed, threshold %s; %s)\n\n", f4(r.PassRate), r.PassedCaseCount, r.CaseCount, f4(r.PassRateThreshold), wilsonText(r.PassRateInterval))
	if rc, ok := r.Metadata[MetadataResponseCache].(map[string]any); ok {
		fmt.Fprintf(b, "Response cache (%s): %v hits, %v misses\n\n", mdCell(fmt.Sprint(rc["mode"])), rc["hits"], rc["misses"])
	}
	b.WriteString("## Metrics\n\n| Metric | Scope | Average | Status |\n| --- | --- | --- | --- |\n")
	for _, m := range r.Metrics {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", mdCell(m.MetricID), m.Scope, f4(m.AverageScore), passFail(m.Passed))
	}
	b.WriteString("\n## Cases\n\n| Case | Status | Passed samples | Samples |\n| --- | --- | --- | --- |\n")
	return true
}

func markdownCaseRow(b *strings.Builder, c *evalcore.CaseResult) {
	fmt.Fprintf(b, "| %s | %s | %d | %d |\n", mdCell(c.CaseID), c.Status, c.PassedSampleCount, c.SampleCount)
}

// markdownTail writes the "Not evaluated" section (from the result's
// metadata, not its cases).
func markdownTail(b *strings.Builder, r *evalcore.Result) {
	if ne := evalcore.NotEvaluatedCases(r); len(ne) > 0 {
		b.WriteString("\n## Not evaluated\n\n| Case | Reason |\n| --- | --- |\n")
		for _, c := range ne {
			fmt.Fprintf(b, "| %s | %s |\n", mdCell(c[0]), mdCell(c[1]))
		}
	}
}

// markdownFailures writes the "Failures" section: per failed case its
// reason, then per failed sample the metrics, the expected versus actual
// response and the first trajectory mismatch.
func markdownFailures(b *strings.Builder, fs []CaseFailure) {
	if len(fs) == 0 {
		return
	}
	b.WriteString(markdownFailuresTitle)
	for i := range fs {
		markdownFailure(b, &fs[i])
	}
}

const markdownFailuresTitle = "\n## Failures\n"

func markdownFailure(b *strings.Builder, f *CaseFailure) {
	fmt.Fprintf(b, "\n### %s\n\n%s (sample pass rate %s, threshold %s)\n\n", mdCell(f.CaseID), mdCell(f.Reason), f4(f.SamplePassRate), f4(f.SamplePassRateThreshold))
	for _, s := range f.Samples {
		fmt.Fprintf(b, "- Sample %d: %s%s\n", s.SampleIndex, s.Status, s.traceSuffix())
		if s.Error != "" {
			fmt.Fprintf(b, "  - Error: %s\n", mdCell(s.Error))
		}
		for _, m := range s.Metrics {
			fmt.Fprintf(b, "  - Metric %s\n", mdCell(m.String()))
		}
		if r := s.Response; r != nil {
			fmt.Fprintf(b, "  - Expected (turn %d): %s\n  - Actual (turn %d): %s\n", r.TurnIndex+1, mdCell(r.Expected), r.TurnIndex+1, mdCell(r.Actual))
		}
		if t := s.Trajectory; t != nil {
			fmt.Fprintf(b, "  - First trajectory mismatch%s: expected %s, actual %s\n", t.position(), mdCell(orNone(t.Expected)), mdCell(orNone(t.Actual)))
		}
	}
	if f.OmittedSamples > 0 {
		fmt.Fprintf(b, "- %d more failed samples not shown\n", f.OmittedSamples)
	}
}

// wilsonText renders an interval as "95% Wilson CI 0.5840–0.9193".
func wilsonText(iv evalcore.PassRateInterval) string {
	return fmt.Sprintf("%s%% Wilson CI %s–%s", strconv.FormatFloat(iv.ConfidenceLevel*100, 'f', -1, 64), f4(iv.Lower), f4(iv.Upper))
}

func regressionCell(reg bool) string {
	if reg {
		return "REGRESSION"
	}
	return "ok"
}

func markdownComparison(c *evalcore.Comparison) []byte {
	var b strings.Builder
	markdownComparisonHead(&b, c)
	for i := range c.CaseDiffs {
		markdownDiffRow(&b, &c.CaseDiffs[i])
	}
	return []byte(b.String())
}

// markdownComparisonHead writes everything of a comparison's Markdown
// before its case rows; WriteComparison writes the same pieces, a row at
// a time.
func markdownComparisonHead(b *strings.Builder, c *evalcore.Comparison) {
	b.WriteString("# Evaluation baseline comparison\n\n")
	fmt.Fprintf(b, "**Status: %s**\n\n", passFail(c.Passed))
	fmt.Fprintf(b, "Eval set: %s (baseline %s, current %s)\n\n", mdCell(c.EvalSetID), mdCell(c.BaselineVersion), mdCell(c.CurrentVersion))
	fmt.Fprintf(b, "Pass rate: %s -> %s (drop %s, allowed %s)\n\n", f4(c.BaselinePassRate), f4(c.CurrentPassRate), f4(c.PassRateDrop), f4(c.MaxPassRateDrop))
	b.WriteString("## Metrics\n\n| Metric | Baseline | Current | Drop | Status |\n| --- | --- | --- | --- | --- |\n")
	for _, m := range c.MetricDiffs {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", mdCell(m.MetricID), f4(m.BaselineScore), f4(m.CurrentScore), f4(m.ScoreDrop), regressionCell(m.Regression))
	}
	b.WriteString(markdownComparisonCasesTitle)
}

const markdownComparisonCasesTitle = "\n## Cases\n\n| Case | Baseline | Current | Status |\n| --- | --- | --- | --- |\n"

// textWriter is a strings.Builder or a bufio.Writer.
type textWriter interface {
	io.Writer
	io.StringWriter
}

// markdownDiffRow writes a comparison's case row,
// "| case | baseline | current | status |\n", without formatting through
// fmt: a 100,000-case comparison writes 100,000 of them.
func markdownDiffRow(w textWriter, d *evalcore.CaseDiff) {
	for _, cell := range [...]string{d.CaseID, d.BaselineStatus, d.CurrentStatus} {
		w.WriteString("| ")
		mdCellEscapes.WriteString(w, cell)
		w.WriteString(" ")
	}
	w.WriteString("| ")
	w.WriteString(regressionCell(d.Regression))
	w.WriteString(" |\n")
}

// xmlEscape escapes the five XML specials and replaces characters XML 1.0
// cannot carry.
func xmlEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		case '\t', '\n', '\r':
			fmt.Fprintf(&b, "&#%d;", r)
		default:
			if r < 0x20 || r == 0xFFFE || r == 0xFFFF || (r >= 0xD800 && r <= 0xDFFF) {
				b.WriteRune(utf8.RuneError)
			} else {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

func seconds(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }

func junit(r *evalcore.Result, suite string) []byte {
	var b strings.Builder
	failures := 0
	for _, c := range r.Cases {
		if !c.Passed {
			failures++
		}
	}
	junitHead(&b, suite, len(r.Cases), failures, r.DurationMS)
	fs := Failures(r)
	next := 0
	for i := range r.Cases {
		c := &r.Cases[i]
		var f *CaseFailure
		if !c.Passed {
			f = &fs[next]
			next++
		}
		junitCase(&b, suite, c, f)
	}
	b.WriteString(junitEnd)
	return []byte(b.String())
}

const junitEnd = "</testsuite>\n"

func junitHead(b *strings.Builder, suite string, tests, failures int, durationMS int64) {
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(b, `<testsuite name="%s" tests="%d" failures="%d" time="%s">`+"\n", xmlEscape(suite), tests, failures, seconds(durationMS))
}

// junitCase writes one testcase; f is its failure (nil when it passed).
func junitCase(b *strings.Builder, suite string, c *evalcore.CaseResult, f *CaseFailure) {
	fmt.Fprintf(b, `  <testcase classname="%s" name="%s" time="%s"`, xmlEscape(suite), xmlEscape(c.CaseID), seconds(c.DurationMS))
	if f == nil {
		b.WriteString("/>\n")
		return
	}
	// The body keeps its line breaks (xmlEscape encodes them for
	// attributes), so CI systems show the details as written.
	body := strings.ReplaceAll(xmlEscape(f.Details()), "&#10;", "\n")
	fmt.Fprintf(b, ">\n    <failure type=\"evaluation\" message=\"%s\">%s</failure>\n  </testcase>\n", xmlEscape(f.Reason), body)
}

func sarif(r *evalcore.Result, suite string) ([]byte, error) {
	results := []any{}
	for _, f := range Failures(r) {
		if len(results) == MaxExportFindings {
			break
		}
		results = append(results, sarifResult(&f))
	}
	doc := map[string]any{
		"$schema": sarifSchemaURI,
		"version": "2.1.0",
		"runs": []any{map[string]any{
			"tool":    sarifTool(r, suite),
			"results": results,
		}},
	}
	return canonicalJSON(doc)
}

func sarifTool(r *evalcore.Result, suite string) map[string]any {
	rules := []any{map[string]any{
		"id": caseRuleID, "name": caseRuleID,
		"shortDescription": map[string]any{"text": "An evaluation case did not pass"},
	}}
	for _, m := range r.Metrics {
		rules = append(rules, map[string]any{
			"id": m.MetricID, "name": m.MetricID,
			"shortDescription": map[string]any{"text": "Evaluation metric"},
		})
	}
	return map[string]any{"driver": map[string]any{
		"name": suite, "informationUri": InformationURI, "rules": rules,
	}}
}

func sarifResult(f *CaseFailure) map[string]any {
	return map[string]any{
		"ruleId":     caseRuleID,
		"level":      "error",
		"message":    map[string]any{"text": "Evaluation case failed: " + f.CaseID + ": " + f.Reason},
		"properties": map[string]any{"caseId": f.CaseID, "status": f.Status, "reason": f.Reason, "details": f.Details()},
	}
}

func annotations(r *evalcore.Result) ([]byte, error) {
	if len(r.Cases) > MaxExportFindings {
		return nil, evalcore.NewErr(evalcore.CodeAnnotationLimitExceeded, "")
	}
	out := []any{}
	for _, f := range Failures(r) {
		out = append(out, annotation(&f))
	}
	return canonicalJSON(out)
}

// annotation is one failed case's element of the annotations array.
func annotation(f *CaseFailure) map[string]any {
	return map[string]any{
		"level":   "failure",
		"title":   annotationTitle,
		"message": "Case " + f.CaseID + " is " + f.Reason,
		"case_id": f.CaseID,
		"status":  f.Status,
		"reason":  f.Reason,
		"details": f.Details(),
	}
}
