package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// bigResultJSONL writes a complete JSON Lines result of n passing cases of
// eval set "weather" whose ids are "case-NNNNNN-" and pad, made from the
// one-case result tpl (a real run's stream, case id tplCaseID): its
// sample and case lines are repeated with each case's id, index and
// sample id, and the header and summary carry n's counts and pass-rate
// interval. (The summary's metric counts stay the template's: a
// comparison side reads the summary's counts and verdict, which are
// checked, not those.) Writing it costs what writing the bytes costs, so
// a test gets a result far past one document without running it.
func bigResultJSONL(t *testing.T, tpl []byte, path string, n int, pad string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(tpl), "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], `{"type":"sample"`) || !strings.HasPrefix(lines[2], `{"type":"case"`) {
		t.Fatalf("the template is not a one-case, one-sample stream:\n%s", tpl)
	}
	header, sample, caseLine, summary := lines[0], lines[1], lines[2], lines[3]
	tplSampleID := evalengine.SampleID("weather", "big", tplCaseID, 0)
	if !strings.Contains(sample, tplSampleID) {
		t.Fatalf("the template's sample has no sample id %s", tplSampleID)
	}
	count := func(line string, key string) string {
		return strings.Replace(line, `"`+key+`":1,`, `"`+key+`":`+strconv.Itoa(n)+`,`, 1)
	}
	iv, err := evalengine.WilsonInterval(n, n, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	ivJSON, _ := json.Marshal(iv)
	summary = regexp.MustCompile(`"pass_rate_interval":\{[^}]*\}`).ReplaceAllLiteralString(count(count(summary, "case_count"), "passed_case_count"), `"pass_rate_interval":`+string(ivJSON))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(count(header, "case_count") + "\n")
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("case-%06d-%s", i, pad)
		s := strings.Replace(sample, `"case_index":0,`, `"case_index":`+strconv.Itoa(i)+`,`, 1)
		s = strings.Replace(s, tplSampleID, evalengine.SampleID("weather", "big", ids[i], 0), 1)
		w.WriteString(strings.ReplaceAll(s, tplCaseID, ids[i]) + "\n")
	}
	for i := range n {
		c := strings.Replace(caseLine, `"case_index":0,`, `"case_index":`+strconv.Itoa(i)+`,`, 1)
		w.WriteString(strings.ReplaceAll(c, tplCaseID, ids[i]) + "\n")
	}
	w.WriteString(summary + "\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

const tplCaseID = "template-case-id"

// bigResultTemplate is a real one-case run's stream, of the eval set
// "weather" version "big", its case id tplCaseID.
func bigResultTemplate(t *testing.T, dir string) []byte {
	t.Helper()
	writeFile(t, dir, "tpl.json", `{"id":"weather","version":"big","cases":[{"id":"`+tplCaseID+`","input":"Weather in Oslo?","expected":"Snow"}]}`)
	if r := runADK(t, dir, nil, "eval", "run", "--config", "good.json", "--eval-set", "tpl.json", "--format", "jsonl", "--output", "tpl.jsonl"); r.code != exitOK {
		t.Fatalf("the template run: exit %d, stderr %q", r.code, r.stderr)
	}
	tpl, err := os.ReadFile(filepath.Join(dir, "tpl.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// TestEvalCompare_PastOneDocument: a comparison whose document passes
// the 16 MiB of one (a row per baseline case) is written whole, a row at
// a time, instead of failing with export_byte_limit_exceeded; stderr
// says the document is over the bound, and the exit code is the gate's.
//
// The baseline is a generated JSON Lines result of 500 cases whose ids
// hold 6,800 '&' each: markdown escapes each as "&amp;", so its table is
// ~17 MB from an 8 MB input, which the race-built binary reads in a few
// seconds (a json comparison past 16 MiB needs 34 MB of input at least,
// each id being in the stream twice and in the document once). Past the
// real bound: `adk eval compare` in markdown (to a file and stdout, the
// same bytes). Past a lowered bound (--max-report-bytes), on 60 of those
// cases: `adk eval run --baseline` whose own result fits one document
// but whose comparison does not, and `adk eval compare` in json, decoded
// strictly, the same bytes as under the default bound. Without the race
// detector
// also json past 16 MiB (4,000 cases with 4,200-byte ids; the
// compare-100k-json row of make bench does it at 100,000 cases).
func TestEvalCompare_PastOneDocument(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	tpl := bigResultTemplate(t, dir)
	const n, cur = 500, 20
	amps := strings.Repeat("&", 6800)
	bigResultJSONL(t, tpl, filepath.Join(dir, "base.jsonl"), n, amps)
	bigResultJSONL(t, tpl, filepath.Join(dir, "cur.jsonl"), cur, amps)
	overNote := func(bound int) string {
		return fmt.Sprintf("adk: the comparison is over one %d-byte document (", bound)
	}
	escaped := strings.Repeat("&amp;", len(amps))

	t.Run("markdown", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "compare", "base.jsonl", "cur.jsonl", "--format", "markdown", "--output", "cmp.md")
		if r.code != exitFailed || !strings.Contains(r.stderr, overNote(evalengine.MaxExportBytes)) || len(r.stdout) <= evalengine.MaxExportBytes {
			t.Fatalf("exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
		}
		file, err := os.ReadFile(filepath.Join(dir, "cmp.md"))
		if err != nil || !bytes.Equal(file, []byte(r.stdout)) {
			t.Fatalf("the file (%d bytes, %v) is not stdout (%d bytes)", len(file), err, len(r.stdout))
		}
		checkMarkdownRows(t, r.stdout, escaped, n, n-cur)
		if !strings.HasSuffix(r.stdout, "\nThe intervals overlap: the pass-rate difference is not significant at 95%.\n") {
			t.Fatal("the markdown does not end with its interval section")
		}
	})
	// 60 of the baseline's cases: a 400 KB comparison, past a lowered
	// bound.
	bigResultJSONL(t, tpl, filepath.Join(dir, "mid.jsonl"), 60, amps)
	const bound = 100_000
	t.Run("eval run --baseline", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--baseline", "mid.jsonl", "--format", "markdown", "--max-report-bytes", strconv.Itoa(bound))
		if r.code != exitFailed || !strings.Contains(r.stderr, overNote(bound)) || len(r.stdout) <= bound {
			t.Fatalf("exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
		}
		// The run has none of the baseline's cases: every row regresses.
		checkMarkdownRows(t, r.stdout, escaped, 60, 60)
	})
	t.Run("json", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "compare", "mid.jsonl", "cur.jsonl", "--format", "json", "--max-report-bytes", strconv.Itoa(bound))
		if r.code != exitFailed || !strings.Contains(r.stderr, overNote(bound)) || len(r.stdout) <= bound {
			t.Fatalf("exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
		}
		doc, err := evalengine.DecodeComparison([]byte(r.stdout))
		if err != nil {
			t.Fatalf("stdout is not a valid comparison document: %v", err)
		}
		checkJSONRows(t, doc, 60, cur, len("case-000000-")+len(amps))
		whole := runADK(t, dir, nil, "eval", "compare", "mid.jsonl", "cur.jsonl", "--format", "json")
		if whole.stdout != r.stdout || whole.stderr != "" {
			t.Fatalf("under the default bound: %d bytes, stderr %q; past --max-report-bytes %d bytes", len(whole.stdout), whole.stderr, len(r.stdout))
		}
	})
	if raceEnabled {
		return
	}
	t.Run("json past 16 MiB", func(t *testing.T) {
		const n, pad = 4000, 4200
		bigResultJSONL(t, tpl, filepath.Join(dir, "long.jsonl"), n, strings.Repeat("x", pad))
		bigResultJSONL(t, tpl, filepath.Join(dir, "long-cur.jsonl"), n/2, strings.Repeat("x", pad))
		r := runADK(t, dir, nil, "eval", "compare", "long.jsonl", "long-cur.jsonl", "--format", "json")
		if r.code != exitFailed || !strings.Contains(r.stderr, overNote(evalengine.MaxExportBytes)) || len(r.stdout) <= evalengine.MaxExportBytes {
			t.Fatalf("exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
		}
		// One JSON document (over DecodeComparison's input bound).
		var doc evalengine.Comparison
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil || dec.More() {
			t.Fatalf("stdout is not one comparison document: %v", err)
		}
		checkJSONRows(t, &doc, n, n/2, len("case-000000-")+pad)
		// The canonical bytes: what Render writes for a comparison that
		// fits, key order and all.
		if !strings.HasPrefix(r.stdout, `{"baseline_pass_rate":1,"baseline_version":"big","case_diffs":[{"baseline_status":"passed","case_id":"case-000000-`) ||
			!strings.HasSuffix(r.stdout, `,"pass_rate_drop":0,"passed":false,"report_schema_version":1,"report_type":"baseline_comparison"}`+"\n") {
			t.Fatalf("not the canonical document: %q … %q", r.stdout[:120], r.stdout[len(r.stdout)-120:])
		}
		// adk eval report reads it back a row at a time and renders it
		// as a comparison that fits: json is the same bytes, markdown
		// the comparison's table (compare adds the interval section).
		writeFile(t, dir, "long-cmp.json", r.stdout)
		again := runADK(t, dir, nil, "eval", "report", "long-cmp.json", "--format", "json")
		if again.code == exitError || again.stdout != r.stdout || !strings.Contains(again.stderr, overNote(evalengine.MaxExportBytes)) {
			t.Fatalf("report json: exit %d, %d bytes (want %d), stderr %q", again.code, len(again.stdout), len(r.stdout), again.stderr)
		}
		md := runADK(t, dir, nil, "eval", "report", "long-cmp.json", "--format", "markdown")
		cmpMD := runADK(t, dir, nil, "eval", "compare", "long.jsonl", "long-cur.jsonl", "--format", "markdown")
		if md.code == exitError || len(md.stdout) <= evalengine.MaxExportBytes || !strings.HasPrefix(cmpMD.stdout, md.stdout) || !strings.HasPrefix(cmpMD.stdout[len(md.stdout):], "\n## Pass-rate intervals") {
			t.Fatalf("report markdown: exit %d, %d bytes, stderr %q; compare's %d bytes", md.code, len(md.stdout), md.stderr, len(cmpMD.stdout))
		}
		page := runADK(t, dir, nil, "eval", "report", "long-cmp.json", "--format", "html")
		if page.code == exitError || len(page.stdout) > evalengine.MaxExportBytes || !strings.Contains(page.stdout, "</html>") {
			t.Fatalf("report html: exit %d, %d bytes, stderr %q", page.code, len(page.stdout), page.stderr)
		}
		// A forged row is refused with its place in the document.
		forged := strings.Replace(r.stdout, `"regression":false`, `"regression":"no"`, 1)
		writeFile(t, dir, "forged-cmp.json", forged)
		oneErrorLine(t, runADK(t, dir, nil, "eval", "report", "forged-cmp.json"), "invalid_eval_report_input: invalid_eval_comparison: invalid_type")
	})
}

// checkJSONRows checks a comparison of n baseline cases against the
// first cur of them: every row in case id order, its id idLen bytes, the
// missing ones regressions.
func checkJSONRows(t *testing.T, doc *evalengine.Comparison, n, cur, idLen int) {
	t.Helper()
	if doc.Passed || doc.ReportType != "baseline_comparison" || len(doc.CaseDiffs) != n || doc.BaselinePassRate != 1 || doc.CurrentPassRate != 1 {
		t.Fatalf("the document: passed %v, type %q, %d rows, pass rates %v %v", doc.Passed, doc.ReportType, len(doc.CaseDiffs), doc.BaselinePassRate, doc.CurrentPassRate)
	}
	for i, d := range doc.CaseDiffs {
		missing := i >= cur
		if want := fmt.Sprintf("case-%06d-", i); !strings.HasPrefix(d.CaseID, want) || len(d.CaseID) != idLen ||
			d.Regression != missing || (missing && d.Reason != "missing_current_case") || (!missing && (d.Reason != "none" || d.TrajectoryChanged)) {
			t.Fatalf("row %d: %.20s… %+v", i, d.CaseID, d)
		}
	}
}

// checkMarkdownRows checks a comparison's markdown case table: n rows,
// case-NNNNNN-pad in case id order, the last regs of them regressions
// (missing cases), the others passed in both.
func checkMarkdownRows(t *testing.T, md, pad string, n, regs int) {
	t.Helper()
	_, table, ok := strings.Cut(md, "\n## Cases\n\n| Case | Baseline | Current | Status |\n| --- | --- | --- | --- |\n")
	if !ok {
		t.Fatal("no case table")
	}
	lines := strings.SplitN(table, "\n", n+1)
	if len(lines) != n+1 || strings.HasPrefix(lines[n], "| case-") {
		t.Fatalf("the table does not have %d rows", n)
	}
	for i := range n {
		want := fmt.Sprintf("| case-%06d-%s | passed | passed | ok |", i, pad)
		if i >= n-regs {
			want = fmt.Sprintf("| case-%06d-%s | passed | missing | REGRESSION |", i, pad)
		}
		if lines[i] != want {
			t.Fatalf("row %d: %.60q…, want %.60q…", i, lines[i], want)
		}
	}
}

// TestEvalReport_ComparisonHTMLPaged: the html page of a saved comparison
// document (adk eval report COMPARISON.json) whose case table does not
// fit the page is one page within --max-report-bytes, regressions first
// under the note with the counts, not export_byte_limit_exceeded; json
// and markdown of it are the document's bytes whole past the bound.
func TestEvalReport_ComparisonHTMLPaged(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	tpl := bigResultTemplate(t, dir)
	bigResultJSONL(t, tpl, filepath.Join(dir, "base.jsonl"), 300, "xxxxxxxx")
	bigResultJSONL(t, tpl, filepath.Join(dir, "cur.jsonl"), 100, "xxxxxxxx")
	r := runADK(t, dir, nil, "eval", "compare", "base.jsonl", "cur.jsonl", "--format", "json", "--output", "cmp.json")
	if r.code != exitFailed || r.stderr != "" {
		t.Fatalf("compare: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runADK(t, dir, nil, "eval", "report", "cmp.json", "--format", "html", "--max-report-bytes", "20000")
	if r.code != exitOK || len(r.stdout) > 20000 || !strings.Contains(r.stderr, "html comparison is over one 20000-byte page") {
		t.Fatalf("html: exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
	}
	m := regexp.MustCompile(`This table shows (\d+) of 300 baseline cases</strong>.*Regressions come first \((\d+) of 200 shown\), then the other cases \((\d+) of 100 shown\)`).FindStringSubmatch(r.stdout)
	if m == nil || m[1] != m[2] || m[3] != "0" || strings.Count(r.stdout, "missing_current_case</td>") != atoi(t, m[2]) {
		t.Fatalf("the page's note is missing or wrong: %v", m)
	}
	for _, format := range []string{"json", "markdown"} {
		whole := runADK(t, dir, nil, "eval", "report", "cmp.json", "--format", format)
		cut := runADK(t, dir, nil, "eval", "report", "cmp.json", "--format", format, "--max-report-bytes", "1000")
		if whole.code != exitOK || cut.code != exitOK || whole.stdout != cut.stdout || whole.stderr != "" ||
			!strings.Contains(cut.stderr, "the comparison is over one 1000-byte document") {
			t.Fatalf("%s: exits %d %d, %d and %d bytes, stderr %q", format, whole.code, cut.code, len(whole.stdout), len(cut.stdout), cut.stderr)
		}
	}
	saved, err := os.ReadFile(filepath.Join(dir, "cmp.json"))
	if err != nil || runADK(t, dir, nil, "eval", "report", "cmp.json", "--format", "json").stdout != string(saved) {
		t.Fatalf("the json report of the saved comparison is not its bytes: %v", err)
	}
}
