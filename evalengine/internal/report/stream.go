package report

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/internal/canonjson"
)

// CodeReportNotStreamable refuses a format RenderStream cannot write case
// by case (html, annotations, json): the detail names the formats that
// can.
const CodeReportNotStreamable = "eval_report_not_streamable"

// StreamFormats are the formats RenderStream writes case by case.
func StreamFormats() []string { return []string{FormatMarkdown, FormatJUnit, FormatSARIF} }

// RenderStream writes the report of a streamed (jsonl) result to w case
// by case, holding one case at a time, so a result of any size renders
// (`adk eval report RESULT.jsonl`). Its bytes are exactly Render's for the
// same result:
//
//   - markdown: the head, one table row per case, then the failures,
//     reading the samples of failed cases only;
//   - junit: one testcase per case, the failure count from the summary;
//   - sarif: one document whose results array is written a result at a
//     time, at most MaxExportFindings results, as Render does.
//
// The output is not bounded by MaxBytes (the stream is bounded per line
// instead). html, annotations and json are single documents that need the
// whole result and are refused with CodeReportNotStreamable (render them
// from a result that fits one 16 MiB document, or use markdown, junit or
// sarif).
func RenderStream(w io.Writer, f *evalcore.StreamFile, format string, opts ExportOptions) error {
	suite := opts.SuiteName
	if suite == "" {
		suite = DefaultSuiteName
	}
	if len(suite) > MaxSuiteNameBytes || !utf8.ValidString(suite) {
		return evalcore.NewErr(evalcore.CodeInvalidSuiteName, "")
	}
	switch format {
	case FormatMarkdown, FormatJUnit, FormatSARIF:
	case FormatHTML, FormatAnnotations, FormatJSON, FormatJSONL:
		return evalcore.ReasonErr(CodeReportNotStreamable, format, "a streamed result renders as "+strings.Join(StreamFormats(), ", "))
	default:
		return evalcore.NewErr(evalcore.CodeInvalidReportFormat, format)
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
	n := 0
	err = f.Cases(func(c *evalcore.CaseResult) bool { return !c.Passed && n < MaxExportFindings }, func(_ int, c *evalcore.CaseResult) error {
		if n == MaxExportFindings {
			return nil
		}
		cf, ok := caseFailure(c)
		if !ok {
			return nil
		}
		out, err := canonjson.Marshal(sarifResult(&cf))
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
	if err != nil {
		return err
	}
	b.Write(skel[at+len(marker):])
	return nil
}
