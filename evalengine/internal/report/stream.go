package report

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/internal/canonjson"
)

// CodeReportNotStreamable refuses a format RenderStream cannot write case
// by case (json: a stream is its own JSON form): the detail names the
// formats that can.
const CodeReportNotStreamable = "eval_report_not_streamable"

// StreamFormats are the formats RenderStream writes from a stream.
func StreamFormats() []string {
	return []string{FormatMarkdown, FormatJUnit, FormatSARIF, FormatAnnotations, FormatHTML}
}

// RenderStream writes the report of a streamed (jsonl) result to w case
// by case, holding one case at a time (html: one page), so a result of
// any size renders (`adk eval report RESULT.jsonl`, and `adk eval run`
// when its result is over one document). Its bytes are exactly Render's
// for the same result, except html's of a result over one page:
//
//   - markdown: the head, one table row per case, then the failures,
//     reading the samples of failed cases only;
//   - junit: one testcase per case, the failure count from the summary;
//   - sarif: one document whose results array is written a result at a
//     time, at most MaxExportFindings results, as Render does;
//   - annotations: the array written an element at a time; a result of
//     more than MaxExportFindings cases is refused, as Render does;
//   - html: a page is bounded by MaxBytes (default 16 MiB), since it is
//     read in a browser. When every case fits, the page is Render's. When
//     not, it is one page with the failed cases first, then passed ones,
//     each in case order, as many as fit, under a note saying how many
//     it shows and how to render every case (markdown etc.).
//
// The output is not bounded by MaxBytes but html's (the stream is
// bounded per line instead). json is refused with
// CodeReportNotStreamable: the stream is the result's JSON form.
func RenderStream(w io.Writer, f *evalcore.StreamFile, format string, opts ExportOptions) error {
	return RenderStreamCompared(w, f, nil, format, opts)
}

// RenderStreamCompared is RenderStream with the run's baseline comparison
// (nil: none). Only html shows it, as RenderHTML does (the comparison
// section on the page, its bytes counted in the page's bound); the other
// formats are the result's alone, as Render's are.
func RenderStreamCompared(w io.Writer, f *evalcore.StreamFile, cmp *evalcore.Comparison, format string, opts ExportOptions) error {
	suite := opts.SuiteName
	if suite == "" {
		suite = DefaultSuiteName
	}
	if len(suite) > MaxSuiteNameBytes || !utf8.ValidString(suite) {
		return evalcore.NewErr(evalcore.CodeInvalidSuiteName, "")
	}
	maxBytes := opts.MaxBytes
	if maxBytes == 0 {
		maxBytes = MaxExportBytes
	}
	if maxBytes < 0 || maxBytes > MaxExportBytes {
		return evalcore.NewErr(CodeInvalidExportOptions, "max_bytes")
	}
	switch format {
	case FormatMarkdown, FormatJUnit, FormatSARIF, FormatAnnotations, FormatHTML:
	case FormatJSON, FormatJSONL:
		return evalcore.ReasonErr(CodeReportNotStreamable, format, "a streamed result is its own JSON form (jsonl); it renders as "+strings.Join(StreamFormats(), ", "))
	default:
		return evalcore.NewErr(evalcore.CodeInvalidReportFormat, format)
	}
	if format == FormatAnnotations && f.Summary.CaseCount > MaxExportFindings {
		return evalcore.NewErr(evalcore.CodeAnnotationLimitExceeded, "")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var b strings.Builder
	// flush moves what b holds to the output, so b never holds more than
	// one case's part of the report.
	flush := func() error {
		_, err := bw.WriteString(b.String())
		b.Reset()
		return err
	}
	r := f.Summary
	failed := func(c *evalcore.CaseResult) bool { return !c.Passed }
	var err error
	switch format {
	case FormatMarkdown:
		markdownHead(&b, r)
		err = f.Cases(func(*evalcore.CaseResult) bool { return false }, func(_ int, c *evalcore.CaseResult) error {
			markdownCaseRow(&b, c)
			return flush()
		})
		if err == nil && r.PassedCaseCount < r.CaseCount {
			b.WriteString(markdownFailuresTitle)
			err = f.Cases(failed, func(_ int, c *evalcore.CaseResult) error {
				if cf, ok := caseFailure(c); ok {
					markdownFailure(&b, &cf)
				}
				return flush()
			})
		}
		if err == nil {
			markdownTail(&b, r)
		}
	case FormatJUnit:
		junitHead(&b, suite, r.CaseCount, r.CaseCount-r.PassedCaseCount, r.DurationMS)
		err = f.Cases(failed, func(_ int, c *evalcore.CaseResult) error {
			var cf *CaseFailure
			if x, ok := caseFailure(c); ok {
				cf = &x
			}
			junitCase(&b, suite, c, cf)
			return flush()
		})
		b.WriteString(junitEnd)
	case FormatSARIF:
		err = sarifStream(&b, f, suite, flush)
	case FormatAnnotations:
		b.WriteByte('[')
		err = failureElements(&b, f, 0, annotation, flush)
		b.WriteString("]\n")
	case FormatHTML:
		err = htmlStream(&b, f, cmp, maxBytes, flush)
	}
	if err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// sarifStream writes the SARIF document with its results array streamed.
// canonjson sorts keys, so "results" comes before "tool" in the run: the
// skeleton with an empty array is split at its first `"results":[]`
// (inside a JSON string every quote is escaped, so the first match is the
// key), and the canonical elements go in between. Canonical encoding is
// compositional, so the bytes are Render's.
func sarifStream(b *strings.Builder, f *evalcore.StreamFile, suite string, flush func() error) error {
	skel, err := canonicalJSON(map[string]any{
		"$schema": sarifSchemaURI,
		"version": "2.1.0",
		"runs":    []any{map[string]any{"tool": sarifTool(f.Summary, suite), "results": []any{}}},
	})
	if err != nil {
		return err
	}
	marker := []byte(`"results":[`)
	at := bytes.Index(skel, []byte(`"results":[]`))
	if at < 0 {
		return evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "not_json", "")
	}
	b.Write(skel[:at+len(marker)])
	if err := failureElements(b, f, MaxExportFindings, sarifResult, flush); err != nil {
		return err
	}
	b.Write(skel[at+len(marker):])
	return nil
}

// failureElements streams the canonical JSON elements elem makes of the
// failed cases f holds (at most limit of them; 0: all), comma-separated
// and flushed one at a time: the array body of the annotations and SARIF
// reports.
func failureElements(b *strings.Builder, f *evalcore.StreamFile, limit int, elem func(*CaseFailure) map[string]any, flush func() error) error {
	n := 0
	keep := func(c *evalcore.CaseResult) bool { return !c.Passed && (limit == 0 || n < limit) }
	return f.Cases(keep, func(_ int, c *evalcore.CaseResult) error {
		if limit > 0 && n == limit {
			return nil
		}
		cf, ok := caseFailure(c)
		if !ok {
			return nil
		}
		out, err := canonjson.Marshal(elem(&cf))
		if err != nil {
			return evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "not_json", "")
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(out)
		n++
		return flush()
	})
}

// htmlPiece is one case's part of an HTML page: its row in the cases
// table and its details.
type htmlPiece struct {
	row, details string
}

// errPageFull ends a walk over the cases once the page is full.
var errPageFull = errors.New("page full")

// htmlStream writes the HTML page of a stream, bounded by maxBytes (see
// RenderStream). The page's skeleton (everything but the cases) is the
// template rendered without cases, split where the rows and the details
// go: html/template escapes every '<' of a value, so the two markers can
// only be the template's own. Each case's row and details are the
// template's own pieces ("caseRow", "caseDetails"), so a page that holds
// every case is Render's bytes. Memory is the page (at most maxBytes of
// rendered pieces) and one case.
func htmlStream(b *strings.Builder, f *evalcore.StreamFile, cmp *evalcore.Comparison, maxBytes int, flush func() error) error {
	head := buildHTMLHead(f.Summary)
	r := f.Summary
	view := buildHTMLView(nil, cmp)
	view.Title, view.Result = "Evaluation report: "+r.EvalSetID+" "+r.EvalSetVersion, head
	skeleton := func() (pre, mid, post string, err error) {
		var sb bytes.Buffer
		if err := htmlReport().Execute(&sb, view); err != nil {
			return "", "", "", evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", err.Error())
		}
		s := sb.String()
		const rowsEnd, detailsStart = "</tbody>\n</table>\n<h2 id=\"details-h\">", "<h2 id=\"details-h\">Case details</h2>\n"
		i, j := strings.Index(s, rowsEnd), strings.Index(s, detailsStart)
		if i < 0 || j < i {
			return "", "", "", evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", "html skeleton")
		}
		j += len(detailsStart)
		return s[:i], s[i:j], s[j:], nil
	}
	piece := func(ci int, c *evalcore.CaseResult) (htmlPiece, error) {
		reason := ""
		if cf, ok := caseFailure(c); ok {
			reason = cf.Reason
		}
		hc := buildHTMLCase(ci, c, head.MetricIDs, reason)
		var row, det strings.Builder
		if err := htmlReport().ExecuteTemplate(&row, "caseRow", &hc); err != nil {
			return htmlPiece{}, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", err.Error())
		}
		if err := htmlReport().ExecuteTemplate(&det, "caseDetails", &hc); err != nil {
			return htmlPiece{}, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", err.Error())
		}
		return htmlPiece{row.String(), det.String()}, nil
	}
	// take walks the cases that want says, in case order, keeping the
	// pieces while they fit in budget bytes; false when one did not.
	take := func(budget int, withSamples func(*evalcore.CaseResult) bool, want func(*evalcore.CaseResult) bool, into *[]htmlPiece) (int, bool, error) {
		full := false
		err := f.Cases(withSamples, func(ci int, c *evalcore.CaseResult) error {
			if !want(c) {
				return nil
			}
			p, err := piece(ci, c)
			if err != nil {
				return err
			}
			n := len(p.row) + len(p.details)
			if n > budget {
				full = true
				return errPageFull
			}
			budget -= n
			*into = append(*into, p)
			return nil
		})
		if errors.Is(err, errPageFull) {
			err = nil
		}
		return budget, !full, err
	}
	write := func(pre, mid, post string, pieces []htmlPiece) error {
		b.WriteString(pre)
		for i := range pieces {
			b.WriteString(pieces[i].row)
			pieces[i].row = ""
			if err := flush(); err != nil {
				return err
			}
		}
		b.WriteString(mid)
		for i := range pieces {
			b.WriteString(pieces[i].details)
			pieces[i].details = ""
			if err := flush(); err != nil {
				return err
			}
		}
		b.WriteString(post)
		return nil
	}

	pre, mid, post, err := skeleton()
	if err != nil {
		return err
	}
	if n := len(pre) + len(mid) + len(post); n > maxBytes {
		// The page without a case (the summary, and a baseline
		// comparison's table of every baseline case) does not fit.
		return evalcore.ReasonErr(evalcore.CodeExportByteLimitExceeded, "page", strconv.Itoa(n))
	}
	all := func(*evalcore.CaseResult) bool { return true }
	var pieces []htmlPiece
	_, whole, err := take(maxBytes-len(pre)-len(mid)-len(post), nil, all, &pieces)
	if err != nil {
		return err
	}
	if whole {
		return write(pre, mid, post, pieces)
	}
	// Over one page: the failed cases first. The note's counts are at
	// most the case count, so a skeleton with every count at the case
	// count is at least as long as the final one.
	pieces = nil
	total, failedN := r.CaseCount, r.CaseCount-r.PassedCaseCount
	head.Paged = &htmlPaged{Total: total, Shown: total, Failed: total, ShownFailed: total, Passed: total, ShownPassed: total, MaxBytes: maxBytes}
	if pre, mid, post, err = skeleton(); err != nil {
		return err
	}
	isFailed := func(c *evalcore.CaseResult) bool { return !c.Passed }
	isPassed := func(c *evalcore.CaseResult) bool { return c.Passed }
	budget, allFailed, err := take(maxBytes-len(pre)-len(mid)-len(post), isFailed, isFailed, &pieces)
	if err != nil {
		return err
	}
	shownFailed := len(pieces)
	if allFailed {
		// Of a passed case, the first sample is drawn.
		if _, _, err = take(budget, isPassed, isPassed, &pieces); err != nil {
			return err
		}
	}
	head.Paged = &htmlPaged{Total: total, Shown: len(pieces), Failed: failedN, ShownFailed: shownFailed,
		Passed: total - failedN, ShownPassed: len(pieces) - shownFailed, MaxBytes: maxBytes}
	if pre, mid, post, err = skeleton(); err != nil {
		return err
	}
	return write(pre, mid, post, pieces)
}
