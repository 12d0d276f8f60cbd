package evalengine_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// readSides are the comparison of a baseline stream of 2n cases that all
// passed and a current one of n (every tenth failed): n/10 cases that no
// longer pass and n missing ones regress.
func readSides(t testing.TB, n int) (base, cur *evalengine.CompareSide, cmp *evalengine.Comparison) {
	t.Helper()
	var err error
	if base, err = evalengine.ReadStreamSide(bytes.NewReader(sideStream(t, 2*n, 1, true))); err != nil {
		t.Fatal(err)
	}
	if cur, err = evalengine.ReadStreamSide(bytes.NewReader(sideStream(t, n, 1, false))); err != nil {
		t.Fatal(err)
	}
	if cmp, err = evalengine.CompareSides(base, cur, evalengine.CompareOptions{}); err != nil {
		t.Fatal(err)
	}
	return base, cur, cmp
}

// TestWriteComparison_PastTheBound: a comparison's json and markdown are
// written a case row at a time. Under the bound they are Render's (and
// CompareSidesReport's) bytes; past it, where Render refuses with
// export_byte_limit_exceeded, they are the same document whole, and the
// count returned says how far past the bound it went. (The bound is
// lowered here; the 16 MiB one is crossed through the binary, in
// cmd/adk's TestEvalCompare_PastOneDocument.)
func TestWriteComparison_PastTheBound(t *testing.T) {
	base, cur, cmp := readSides(t, 150)
	if cmp.Passed || len(cmp.CaseDiffs) != 300 {
		t.Fatalf("the fixture: passed %v, %d rows", cmp.Passed, len(cmp.CaseDiffs))
	}
	for _, format := range []string{evalengine.FormatJSON, evalengine.FormatMarkdown} {
		whole, err := evalengine.Render(cmp, format, evalengine.ExportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sides, _, err := evalengine.CompareSidesReport(base, cur, evalengine.CompareOptions{}, format, evalengine.ExportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, bound := range []int{0, len(whole), len(whole) - 1, 4096} {
			eo := evalengine.ExportOptions{MaxBytes: bound}
			var got bytes.Buffer
			n, err := evalengine.WriteComparison(&got, cmp, format, eo)
			if err != nil || !bytes.Equal(got.Bytes(), whole) || n != int64(len(whole)) {
				t.Fatalf("%s, bound %d: %d bytes, %v; not Render's %d bytes", format, bound, n, err, len(whole))
			}
			got.Reset()
			n, err = evalengine.WriteCompareSidesReport(&got, base, cur, cmp, format, eo)
			if err != nil || !bytes.Equal(got.Bytes(), sides) || n != int64(len(sides)) {
				t.Fatalf("%s, bound %d: sides report %d bytes, %v; not CompareSidesReport's %d", format, bound, n, err, len(sides))
			}
			_, err = evalengine.Render(cmp, format, eo)
			if bound != 0 && bound < len(whole) {
				wantCode(t, err, evalengine.CodeExportByteLimitExceeded)
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if format == evalengine.FormatJSON {
			// One document: every row, in case id order.
			var doc evalengine.Comparison
			if err := json.Unmarshal(whole, &doc); err != nil || len(doc.CaseDiffs) != 300 || doc.Passed {
				t.Fatalf("the json: %v, %d rows", err, len(doc.CaseDiffs))
			}
		} else if rows := regexp.MustCompile(`(?m)^\| case-\d+ \| passed \| (passed|failed|missing) \| (ok|REGRESSION) \|$`).FindAll(whole, -1); len(rows) != 300 {
			t.Fatalf("the markdown has %d case rows, want 300", len(rows))
		}
	}
}

// TestWriteComparison_Refuses: everything is checked before the first
// byte, with Render's codes; html is a page (RenderHTML,
// RenderComparisonPage), not written row by row.
func TestWriteComparison_Refuses(t *testing.T) {
	base, cur, cmp := readSides(t, 10)
	forged := *cmp
	forged.Passed = true
	for _, tc := range []struct {
		name, format, code string
		cmp                *evalengine.Comparison
		eo                 evalengine.ExportOptions
	}{
		{"junit", evalengine.FormatJUnit, evalengine.CodeInvalidExportResult, cmp, evalengine.ExportOptions{}},
		{"html", evalengine.FormatHTML, evalengine.CodeReportNotStreamable, cmp, evalengine.ExportOptions{}},
		{"unknown format", "yaml", evalengine.CodeInvalidReportFormat, cmp, evalengine.ExportOptions{}},
		{"suite name", evalengine.FormatJSON, evalengine.CodeInvalidSuiteName, cmp, evalengine.ExportOptions{SuiteName: strings.Repeat("s", 257)}},
		{"bound", evalengine.FormatJSON, evalengine.CodeInvalidExportOptions, cmp, evalengine.ExportOptions{MaxBytes: evalengine.MaxExportBytes + 1}},
		{"nil", evalengine.FormatJSON, evalengine.CodeInvalidExportResult, nil, evalengine.ExportOptions{}},
		{"forged", evalengine.FormatMarkdown, evalengine.CodeInvalidExportResult, &forged, evalengine.ExportOptions{}},
	} {
		var out bytes.Buffer
		n, err := evalengine.WriteComparison(&out, tc.cmp, tc.format, tc.eo)
		wantCode(t, err, tc.code)
		if n != 0 || out.Len() != 0 {
			t.Errorf("%s: %d bytes written before the error", tc.name, out.Len())
		}
	}
	_, err := evalengine.WriteCompareSidesReport(io.Discard, base, cur, cmp, evalengine.FormatJUnit, evalengine.ExportOptions{})
	wantCode(t, err, evalengine.CodeInvalidReportFormat)
	// A failing output is the writer's error, untyped.
	boom := errors.New("disk full")
	_, err = evalengine.WriteComparison(failingWriter{boom}, cmp, evalengine.FormatJSON, evalengine.ExportOptions{})
	if !errors.Is(err, boom) || evalengine.ErrorCode(err) != "" {
		t.Fatalf("a failed write: %v", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestWriteComparison_MemoryPerRow: writing a comparison allocates O(1)
// per case row, whatever the rows: four times the rows cost at most one
// allocation and a few bytes a row more (none without the race
// detector, whose sync.Pool drops pooled encoders at random), so the
// document is never held, only the comparison it is written from.
func TestWriteComparison_MemoryPerRow(t *testing.T) {
	const n = 200
	_, _, small := readSides(t, n)
	_, _, large := readSides(t, 4*n)
	extra := float64(len(large.CaseDiffs) - len(small.CaseDiffs))
	cost := func(cmp *evalengine.Comparison, format string) (mallocs, bytes float64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range 4 {
			if _, err := evalengine.WriteComparison(io.Discard, cmp, format, evalengine.ExportOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / 4, float64(after.TotalAlloc-before.TotalAlloc) / 4
	}
	for _, format := range []string{evalengine.FormatJSON, evalengine.FormatMarkdown} {
		m1, b1 := cost(small, format)
		m4, b4 := cost(large, format)
		perRow, bytesPerRow := (m4-m1)/extra, (b4-b1)/extra
		t.Logf("%s: %d rows %.0f allocations, %.0f B; %d rows %.0f, %.0f B: %.3f allocations and %.1f B per extra row",
			format, len(small.CaseDiffs), m1, b1, len(large.CaseDiffs), m4, b4, perRow, bytesPerRow)
		if perRow > 1 || bytesPerRow > 128 {
			t.Errorf("%s: %.3f allocations and %.1f B per row: the writer holds what it wrote", format, perRow, bytesPerRow)
		}
	}
}

// TestRenderComparisonPage: the html page of a comparison alone (adk eval
// report COMPARISON.json --format html) that does not fit its bound is
// one page within it, not export_byte_limit_exceeded: the regressions
// first, then the other rows, under the note with the counts. A page
// that fits is RenderHTML's.
func TestRenderComparisonPage(t *testing.T) {
	_, _, cmp := readSides(t, 150) // 300 rows: 165 regressions, 135 ok
	whole, err := evalengine.RenderHTML(nil, cmp, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	same, err := evalengine.RenderComparisonPage(cmp, evalengine.ExportOptions{})
	if err != nil || !bytes.Equal(same, whole) {
		t.Fatalf("a page that fits: %v, %d bytes against RenderHTML's %d", err, len(same), len(whole))
	}
	note := regexp.MustCompile(`This table shows (\d+) of 300 baseline cases</strong>.*Regressions come first \((\d+) of 165 shown\), then the other cases \((\d+) of 135 shown\)`)
	for _, bound := range []int{len(whole) - 1, len(whole) / 2, len(whole) / 4} {
		_, err := evalengine.RenderHTML(nil, cmp, evalengine.ExportOptions{MaxBytes: bound})
		wantCode(t, err, evalengine.CodeExportByteLimitExceeded)
		page, err := evalengine.RenderComparisonPage(cmp, evalengine.ExportOptions{MaxBytes: bound})
		if err != nil || len(page) > bound {
			t.Fatalf("bound %d: %v, %d bytes", bound, err, len(page))
		}
		m := note.FindStringSubmatch(string(page))
		if m == nil {
			t.Fatalf("bound %d: no note with the counts", bound)
		}
		shown, regs, others := atoi(t, m[1]), atoi(t, m[2]), atoi(t, m[3])
		rows := strings.Count(string(page), "<span class=\"badge REGRESSION\">REGRESSION</span> ") - countMetricRegressions(cmp)
		if shown != regs+others || rows != regs || (others > 0 && regs != 165) || shown == 300 {
			t.Fatalf("bound %d: shown %d = %d regressions + %d others, %d regression rows on the page", bound, shown, regs, others, rows)
		}
		t.Logf("bound %d: %d bytes, %d regressions and %d other rows shown", bound, len(page), regs, others)
	}
	// A bound below the page's frame: nothing to page.
	_, err = evalengine.RenderComparisonPage(cmp, evalengine.ExportOptions{MaxBytes: 100})
	wantCode(t, err, evalengine.CodeExportByteLimitExceeded)
}

func countMetricRegressions(c *evalengine.Comparison) int {
	n := 0
	for _, d := range c.MetricDiffs {
		if d.Regression {
			n++
		}
	}
	return n
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
