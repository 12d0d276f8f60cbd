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
//     it shows and how to render every case (markdown etc.). With a
//     baseline comparison (RenderStreamCompared) its case-changes table
//     is paged too, regressions first (see htmlStream).
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
// formats are the result's alone, as Render's are. A page that cannot
// hold the comparison's case rows and every case shows, each only once
// everything before it fitted: the regressions, the failed cases, the
// other comparison rows, the passed cases, as many as fit, under a note
// per table with its counts and the command that prints every row (`adk
// eval compare`). Only a page without any row over the bound (its
// summaries and notes) is export_byte_limit_exceeded (reason page).
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
	if cmp != nil && format == FormatHTML {
		var err error
		if cmp, err = evalcore.CheckComparison(cmp); err != nil {
			return &evalcore.Error{Code: evalcore.CodeInvalidExportResult, Reason: evalcore.ErrorCode(err), Err: err}
		}
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
// RenderStream). The page's skeleton (everything but the comparison's
// case rows and the cases) is the template rendered without them, split
// where the comparison's rows, the case rows and the details go:
// html/template escapes every '<' of a value, so the markers can only be
// the template's own. Each row and each case's details are the
// template's own pieces ("diffRow", "caseRow", "caseDetails"), so a page
// that holds everything is Render's bytes. Memory is the page (at most
// maxBytes of rendered pieces), one case, and the comparison.
//
// A page that cannot hold everything shows, as far as each fits and
// each only when the one before it fitted whole: the comparison's
// regressions, the failed cases, the comparison's other rows, the
// passed cases; a note above each table that leaves rows out says how
// many it shows and how to get them all.
func htmlStream(b *strings.Builder, f *evalcore.StreamFile, cmp *evalcore.Comparison, maxBytes int, flush func() error) error {
	head := buildHTMLHead(f.Summary)
	r := f.Summary
	view := buildHTMLView(nil, cmp)
	view.Title, view.Result = "Evaluation report: "+r.EvalSetID+" "+r.EvalSetVersion, head
	var diffs []evalcore.CaseDiff // regressions first
	if view.Compare != nil {
		diffs, view.Compare.Cases = view.Compare.Cases, nil
	}
	renderErr := func(err error) error {
		return evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", err.Error())
	}
	// skeleton is the page without a comparison row or a case, in four
	// parts: the comparison's rows go after the first, the case rows
	// after the second, the details after the third.
	skeleton := func() (parts [4]string, n int, err error) {
		var sb bytes.Buffer
		if err := htmlReport().Execute(&sb, view); err != nil {
			return parts, 0, renderErr(err)
		}
		s := sb.String()
		const diffTable, tbody = `<table aria-label="Case changes, newly failing first">`, "<tbody>\n"
		const rowsEnd, detailsStart = "</tbody>\n</table>\n<h2 id=\"details-h\">", "<h2 id=\"details-h\">Case details</h2>\n"
		i, j := strings.Index(s, rowsEnd), strings.Index(s, detailsStart)
		if i < 0 || j < i {
			return parts, 0, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", "html skeleton")
		}
		j += len(detailsStart)
		d := 0 // no comparison: no rows go there
		if view.Compare != nil {
			k := strings.Index(s, diffTable)
			t := strings.Index(s[max(k, 0):], tbody)
			if k < 0 || t < 0 || k+t+len(tbody) > i {
				return parts, 0, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", "html skeleton")
			}
			d = k + t + len(tbody)
		}
		return [4]string{s[:d], s[d:i], s[i:j], s[j:]}, len(s), nil
	}
	piece := func(ci int, c *evalcore.CaseResult) (htmlPiece, error) {
		reason := ""
		if cf, ok := caseFailure(c); ok {
			reason = cf.Reason
		}
		hc := buildHTMLCase(ci, c, head.MetricIDs, reason)
		var row, det strings.Builder
		if err := htmlReport().ExecuteTemplate(&row, "caseRow", &hc); err != nil {
			return htmlPiece{}, renderErr(err)
		}
		if err := htmlReport().ExecuteTemplate(&det, "caseDetails", &hc); err != nil {
			return htmlPiece{}, renderErr(err)
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
	// takeDiffs is take of the comparison's case rows.
	takeDiffs := func(budget int, want func(*evalcore.CaseDiff) bool, into *[]string) (int, bool, error) {
		return takeDiffRows(diffs, budget, want, into)
	}
	write := func(parts [4]string, rows []string, pieces []htmlPiece) error {
		b.WriteString(parts[0])
		for i := range rows {
			b.WriteString(rows[i])
			rows[i] = ""
			if err := flush(); err != nil {
				return err
			}
		}
		b.WriteString(parts[1])
		for i := range pieces {
			b.WriteString(pieces[i].row)
			pieces[i].row = ""
			if err := flush(); err != nil {
				return err
			}
		}
		b.WriteString(parts[2])
		for i := range pieces {
			b.WriteString(pieces[i].details)
			pieces[i].details = ""
			if err := flush(); err != nil {
				return err
			}
		}
		b.WriteString(parts[3])
		return nil
	}

	parts, n, err := skeleton()
	if err != nil {
		return err
	}
	all := func(*evalcore.CaseResult) bool { return true }
	allDiffs := func(*evalcore.CaseDiff) bool { return true }
	var rows []string
	var pieces []htmlPiece
	if n <= maxBytes {
		budget, whole, err := takeDiffs(maxBytes-n, allDiffs, &rows)
		if err == nil && whole {
			_, whole, err = take(budget, nil, all, &pieces)
		}
		if err != nil {
			return err
		}
		if whole {
			return write(parts, rows, pieces)
		}
	}
	// Over one page. The notes' counts are at most the case count and
	// the comparison's row count, so a skeleton with every count at
	// those is at least as long as the final one.
	rows, pieces = nil, nil
	total, failedN := r.CaseCount, r.CaseCount-r.PassedCaseCount
	head.Paged = &htmlPaged{Total: total, Shown: total, Failed: total, ShownFailed: total, Passed: total, ShownPassed: total, MaxBytes: maxBytes}
	regsN := 0
	for i := range diffs {
		if diffs[i].Regression {
			regsN++
		}
	}
	if view.Compare != nil {
		d := len(diffs)
		view.Compare.Paged = &htmlComparePaged{Total: d, Shown: d, Regressions: d, ShownRegressions: d, Others: d, ShownOthers: d, MaxBytes: maxBytes}
	}
	if _, n, err = skeleton(); err != nil {
		return err
	}
	if n > maxBytes {
		// The page without any row (the summaries, the metric tables
		// and the notes) does not fit.
		return evalcore.ReasonErr(evalcore.CodeExportByteLimitExceeded, "page", strconv.Itoa(n))
	}
	isReg := func(d *evalcore.CaseDiff) bool { return d.Regression }
	isOther := func(d *evalcore.CaseDiff) bool { return !d.Regression }
	isFailed := func(c *evalcore.CaseResult) bool { return !c.Passed }
	isPassed := func(c *evalcore.CaseResult) bool { return c.Passed }
	budget, ok, err := takeDiffs(maxBytes-n, isReg, &rows)
	shownRegs, shownFailed := len(rows), 0
	if err == nil && ok {
		budget, ok, err = take(budget, isFailed, isFailed, &pieces)
		shownFailed = len(pieces)
	}
	if err == nil && ok {
		budget, ok, err = takeDiffs(budget, isOther, &rows)
	}
	if err == nil && ok {
		// Of a passed case, the first sample is drawn.
		_, _, err = take(budget, isPassed, isPassed, &pieces)
	}
	if err != nil {
		return err
	}
	head.Paged = nil
	if len(pieces) < total {
		head.Paged = &htmlPaged{Total: total, Shown: len(pieces), Failed: failedN, ShownFailed: shownFailed,
			Passed: total - failedN, ShownPassed: len(pieces) - shownFailed, MaxBytes: maxBytes}
	}
	if view.Compare != nil {
		view.Compare.Paged = nil
		if len(rows) < len(diffs) {
			view.Compare.Paged = &htmlComparePaged{Total: len(diffs), Shown: len(rows), Regressions: regsN, ShownRegressions: shownRegs,
				Others: len(diffs) - regsN, ShownOthers: len(rows) - shownRegs, MaxBytes: maxBytes}
		}
	}
	if parts, _, err = skeleton(); err != nil {
		return err
	}
	return write(parts, rows, pieces)
}

// takeDiffRows renders the comparison rows of diffs that want says, in
// order, keeping them while they fit in budget bytes; false when one did
// not.
func takeDiffRows(diffs []evalcore.CaseDiff, budget int, want func(*evalcore.CaseDiff) bool, into *[]string) (int, bool, error) {
	var row strings.Builder
	for i := range diffs {
		if !want(&diffs[i]) {
			continue
		}
		row.Reset()
		if err := htmlReport().ExecuteTemplate(&row, "diffRow", &diffs[i]); err != nil {
			return budget, false, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", err.Error())
		}
		if row.Len() > budget {
			return budget, false, nil
		}
		budget -= row.Len()
		*into = append(*into, row.String())
	}
	return budget, true, nil
}

// RenderComparisonPage is RenderHTML of a comparison alone, paged like a
// streamed page's comparison (htmlStream) when it does not fit
// opts.MaxBytes: its case table shows the regressions, then the other
// rows, each in case id order, as many as fit, under the note with the
// counts and the command that prints every row. A page that fits is
// RenderHTML's bytes. Only a page without any row over the bound is
// export_byte_limit_exceeded (reason page).
func RenderComparisonPage(cmp *evalcore.Comparison, opts ExportOptions) ([]byte, error) {
	out, err := RenderHTML(nil, cmp, opts)
	if evalcore.ErrorCode(err) != evalcore.CodeExportByteLimitExceeded {
		return out, err
	}
	maxBytes := opts.MaxBytes
	if maxBytes == 0 {
		maxBytes = MaxExportBytes
	}
	// RenderHTML checked cmp and the options.
	view := buildHTMLView(nil, cmp)
	diffs := view.Compare.Cases
	view.Compare.Cases = nil
	skeleton := func() (head, tail string, err error) {
		var sb bytes.Buffer
		if err := htmlReport().Execute(&sb, view); err != nil {
			return "", "", evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", err.Error())
		}
		s := sb.String()
		const diffTable, tbody = `<table aria-label="Case changes, newly failing first">`, "<tbody>\n"
		k := strings.Index(s, diffTable)
		t := strings.Index(s[max(k, 0):], tbody)
		if k < 0 || t < 0 {
			return "", "", evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "render_failed", "html skeleton")
		}
		d := k + t + len(tbody)
		return s[:d], s[d:], nil
	}
	// The note's counts are at most the row count, so a skeleton with
	// every count at it is at least as long as the final one.
	d := len(diffs)
	view.Compare.Paged = &htmlComparePaged{Total: d, Shown: d, Regressions: d, ShownRegressions: d, Others: d, ShownOthers: d, MaxBytes: maxBytes}
	head, tail, err := skeleton()
	if err != nil {
		return nil, err
	}
	if n := len(head) + len(tail); n > maxBytes {
		return nil, evalcore.ReasonErr(evalcore.CodeExportByteLimitExceeded, "page", strconv.Itoa(n))
	}
	var rows []string
	budget, ok, err := takeDiffRows(diffs, maxBytes-len(head)-len(tail), func(d *evalcore.CaseDiff) bool { return d.Regression }, &rows)
	shownRegs := len(rows)
	if err == nil && ok {
		_, _, err = takeDiffRows(diffs, budget, func(d *evalcore.CaseDiff) bool { return !d.Regression }, &rows)
	}
	if err != nil {
		return nil, err
	}
	regs := 0
	for i := range diffs {
		if diffs[i].Regression {
			regs++
		}
	}
	view.Compare.Paged = &htmlComparePaged{Total: d, Shown: len(rows), Regressions: regs, ShownRegressions: shownRegs,
		Others: d - regs, ShownOthers: len(rows) - shownRegs, MaxBytes: maxBytes}
	if head, tail, err = skeleton(); err != nil {
		return nil, err
	}
	size := len(head) + len(tail)
	for _, r := range rows {
		size += len(r)
	}
	page := make([]byte, 0, size)
	page = append(page, head...)
	for _, r := range rows {
		page = append(page, r...)
	}
	return append(page, tail...), nil
}
