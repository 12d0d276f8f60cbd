package report

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/internal/iocount"
)

// WriteComparison writes the json or markdown report of cmp to w a case
// row at a time: Render's bytes for every comparison Render takes, and
// the same document past opts.MaxBytes, which Render refuses
// (export_byte_limit_exceeded). A comparison has one row per baseline
// case, so at 100,000 cases with long case ids its document passes the
// 16 MiB of one; this writes it whole in memory O(1) beyond the
// comparison itself (one row's bytes and a 64 KiB buffer). It returns the
// bytes written, which the caller compares with its bound.
//
// Everything is checked before the first byte: an error then is a typed
// *evalcore.Error (the comparison, the options, the format: html, a
// page, is RenderHTML's); an error after it is w's.
func WriteComparison(w io.Writer, cmp *evalcore.Comparison, format string, opts ExportOptions) (int64, error) {
	return writeComparison(w, cmp, format, opts, nil, nil)
}

// WriteCompareSidesReport writes CompareSidesReport's report of cmp, the
// comparison CompareSides made of baseline and current, to w as
// WriteComparison does: its bytes when they fit eo.MaxBytes, the same
// document past it. markdown adds both sides' pass-rate intervals.
func WriteCompareSidesReport(w io.Writer, baseline, current *evalcore.CompareSide, cmp *evalcore.Comparison, format string, eo ExportOptions) (int64, error) {
	if format != FormatJSON && format != FormatMarkdown {
		return 0, evalcore.NewErr(evalcore.CodeInvalidReportFormat, format)
	}
	if baseline == nil || current == nil {
		return 0, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "nil", "")
	}
	return writeComparison(w, cmp, format, eo, baseline.Summary(), current.Summary())
}

// writeComparison writes cmp's report, with markdown's interval section
// of base and cur when they are set.
func writeComparison(w io.Writer, cmp *evalcore.Comparison, format string, opts ExportOptions, base, cur *evalcore.Result) (int64, error) {
	if len(opts.SuiteName) > MaxSuiteNameBytes || !utf8.ValidString(opts.SuiteName) {
		return 0, evalcore.NewErr(evalcore.CodeInvalidSuiteName, "")
	}
	if opts.MaxBytes < 0 || opts.MaxBytes > MaxExportBytes {
		return 0, evalcore.NewErr(CodeInvalidExportOptions, "max_bytes")
	}
	switch format {
	case FormatJSON, FormatMarkdown:
	case FormatJUnit, FormatSARIF, FormatAnnotations, FormatJSONL:
		return 0, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "result_required", format)
	case FormatHTML:
		return 0, evalcore.ReasonErr(CodeReportNotStreamable, format, "a comparison's html is one page (RenderHTML)")
	default:
		return 0, evalcore.NewErr(evalcore.CodeInvalidReportFormat, format)
	}
	if cmp == nil {
		return 0, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "nil", "")
	}
	c, err := evalcore.CheckComparison(cmp)
	if err != nil {
		return 0, &evalcore.Error{Code: evalcore.CodeInvalidExportResult, Reason: evalcore.ErrorCode(err), Err: err}
	}
	// The parts around the case rows, before anything is written.
	var head, tail []byte
	if format == FormatJSON {
		if head, tail, err = jsonComparisonSkeleton(c); err != nil {
			return 0, err
		}
	} else {
		var b strings.Builder
		markdownComparisonHead(&b, c)
		head = []byte(b.String())
		if base != nil && cur != nil {
			tail = []byte(intervalSection(base, cur))
		}
	}
	cw := &iocount.Writer{W: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	bw.Write(head)
	if format == FormatJSON {
		row := make([]byte, 0, 512)
		for i := range c.CaseDiffs {
			row = row[:0]
			if i > 0 {
				row = append(row, ',')
			}
			// CheckComparison checked every row: it encodes.
			if row, err = canonjson.Append(row, &c.CaseDiffs[i]); err != nil {
				return cw.N, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "not_json", "")
			}
			if _, err := bw.Write(row); err != nil {
				return cw.N, err
			}
		}
	} else {
		for i := range c.CaseDiffs {
			markdownDiffRow(bw, &c.CaseDiffs[i])
		}
	}
	bw.Write(tail)
	err = bw.Flush()
	return cw.N, err
}

// jsonComparisonSkeleton is the canonical JSON of c split where its case
// rows go: canonjson sorts keys, and the document encoded with an empty
// case list is split at its first `"case_diffs":[]` (inside a JSON
// string every quote is escaped, so the first match is the key). The
// rows, each the canonical encoding of its CaseDiff and comma-separated,
// go in between: canonical encoding is compositional, so the bytes are
// Render's.
func jsonComparisonSkeleton(c *evalcore.Comparison) (head, tail []byte, err error) {
	empty := *c
	empty.CaseDiffs = []evalcore.CaseDiff{}
	if empty.MetricDiffs == nil {
		empty.MetricDiffs = []evalcore.MetricDiff{}
	}
	skel, err := canonicalJSON(&empty)
	if err != nil {
		return nil, nil, err
	}
	const key = `"case_diffs":[`
	at := bytes.Index(skel, []byte(key+"]"))
	if at < 0 {
		return nil, nil, evalcore.ReasonErr(evalcore.CodeInvalidExportResult, "not_json", "")
	}
	at += len(key)
	return skel[:at], skel[at:], nil
}
