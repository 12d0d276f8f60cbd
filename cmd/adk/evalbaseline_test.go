package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// TestEvalRun_BaselineOverOneDocument: --baseline no longer stops at the
// document bound. A baseline given as a JSON Lines result, a current
// result streamed past --max-report-bytes, or both, give the comparison
// (json, markdown) of a run that fits, byte for byte, and the same verdict
// (exit 2 on a regression); the other formats are rendered from the
// stream with the verdict ANDed; adk eval compare takes jsonl on either
// side; a broken jsonl baseline is a typed error naming the file.
func TestEvalRun_BaselineOverOneDocument(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	run := func(want int, agent string, args ...string) execResult {
		t.Helper()
		r := runADK(t, dir, nil, append([]string{"eval", "run", "--config", agent, "--eval-set", "set.json", "--samples", "2", "--concurrency", "2"}, args...)...)
		if r.code != want {
			t.Fatalf("eval run %s %v: exit %d, want %d (stderr %q)", agent, args, r.code, want, r.stderr)
		}
		return r
	}
	run(exitOK, "good.json", "--format", "json", "--output", "base.json")
	run(exitOK, "good.json", "--format", "jsonl", "--output", "base.jsonl")
	for _, c := range []struct {
		agent string
		code  int
	}{{"good.json", exitOK}, {"bad.json", exitFailed}} {
		for _, format := range []string{"json", "markdown"} {
			// The comparison of a run that fits, against the document.
			want := run(c.code, c.agent, "--format", format, "--baseline", "base.json")
			if want.stderr != "" || !strings.Contains(want.stdout, "baseline_comparison") && format == "json" {
				t.Fatalf("%s %s fits: stderr %q\n%s", c.agent, format, want.stderr, want.stdout)
			}
			for _, base := range []string{"base.json", "base.jsonl"} {
				for _, bound := range []string{"", "5000"} {
					args := []string{"--format", format, "--baseline", base}
					if bound != "" {
						args = append(args, "--max-report-bytes", bound, "--output", "cur."+format)
					}
					r := run(c.code, c.agent, args...)
					if r.stdout != want.stdout {
						t.Fatalf("%s %s against %s, bound %q: the comparison differs\n%s\nwant\n%s", c.agent, format, base, bound, r.stdout, want.stdout)
					}
					if bound == "" {
						continue
					}
					kept := filepath.Join(dir, "cur."+format+".jsonl")
					if !strings.Contains(r.stderr, "over one 5000-byte document: the baseline comparison was made from its JSON Lines stream") || strings.Count(r.stderr, "\n") != 1 {
						t.Fatalf("%s %s against %s: stderr %q", c.agent, format, base, r.stderr)
					}
					// The kept stream compares offline to the same document.
					cmp := runADK(t, dir, nil, "eval", "compare", base, kept, "--format", format)
					if cmp.code != c.code || (format == "json" && cmp.stdout != want.stdout) {
						t.Fatalf("adk eval compare %s %s: exit %d, stderr %q\n%s", base, kept, cmp.code, cmp.stderr, cmp.stdout)
					}
				}
			}
		}
	}
	// Other formats: rendered from the stream, the verdict with the
	// comparison's (bad.json regresses against good.json's baseline;
	// good.json against a failing baseline does not).
	run(exitFailed, "bad.json", "--format", "jsonl", "--output", "bad.jsonl")
	for _, format := range []string{"junit", "sarif", "html"} {
		bound := "5000"
		if format == "html" {
			bound = "9000" // the page's comparison section must fit it
		}
		r := run(exitFailed, "bad.json", "--format", format, "--baseline", "base.jsonl", "--max-report-bytes", bound, "--output", "reg."+format)
		if !strings.Contains(r.stderr, "rendered case by case from its JSON Lines stream") {
			t.Fatalf("%s: stderr %q", format, r.stderr)
		}
		if format == "html" && (len(r.stdout) > 9000 || !strings.Contains(r.stdout, `id="compare-h"`)) {
			t.Fatalf("html: %d bytes, comparison shown: %t", len(r.stdout), strings.Contains(r.stdout, `id="compare-h"`))
		}
		run(exitOK, "good.json", "--format", format, "--baseline", "bad.jsonl", "--max-report-bytes", bound)
	}
	// A comparison document over the bound is written whole, never
	// truncated, and stderr says so (it was report_render_failed).
	r := runADK(t, dir, nil, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--samples", "2", "--format", "json", "--baseline", "base.jsonl", "--max-report-bytes", "200")
	if r.code != exitOK || !strings.Contains(r.stderr, "adk: the comparison is over one 200-byte document") || len(r.stdout) <= 200 {
		t.Fatalf("a comparison over the bound: exit %d, %d bytes, stderr %q", r.code, len(r.stdout), r.stderr)
	}
	if c, err := evalengine.DecodeComparison([]byte(r.stdout)); err != nil || !c.Passed {
		t.Fatalf("not the whole comparison document: %v", err)
	}

	// Bad input: a stream cut short, as --baseline and as either side of
	// adk eval compare.
	data, err := os.ReadFile(filepath.Join(dir, "base.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "cut.jsonl", string(data[:len(data)/2]))
	r = runADK(t, dir, nil, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--baseline", "cut.jsonl")
	oneErrorLine(t, r, "invalid_eval_baseline: invalid_eval_stream")
	if !strings.Contains(r.stderr, "cut.jsonl") {
		t.Errorf("the error does not name the file: %q", r.stderr)
	}
	oneErrorLine(t, runADK(t, dir, nil, "eval", "compare", "cut.jsonl", "base.jsonl"), "invalid_eval_baseline: invalid_eval_stream")
	oneErrorLine(t, runADK(t, dir, nil, "eval", "compare", "base.jsonl", "cut.jsonl"), "invalid_current_result: invalid_eval_stream")
}

// TestEvalRun_BaselineHTMLPaged: an html report whose baseline
// comparison's case table is over the page (a baseline of 300 cases,
// generated here and run as JSON Lines, against a run of two) is one page
// within --max-report-bytes, not export_byte_limit_exceeded: the
// regressions first, under a note with the counts, and the exit code of
// the gate. Both ways there: the run's own result past the bound
// (streamed), and a result that fits whose page does not.
func TestEvalRun_BaselineHTMLPaged(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	cases := []string{`{"id":"pune","expected_trajectory":["get_weather"],"input":"Weather in Pune?","expected":"Sunny"}`,
		`{"id":"oslo","input":"Weather in Oslo?","expected":"Snow"}`}
	for i := range 298 {
		cases = append(cases, fmt.Sprintf(`{"id":"oslo-%03d","input":"Weather in Oslo?","expected":"Snow"}`, i))
	}
	writeFile(t, dir, "big.json", `{"id":"weather","version":"big","cases":[`+strings.Join(cases, ",")+`]}`)
	if r := runADK(t, dir, nil, "eval", "run", "--config", "good.json", "--eval-set", "big.json", "--format", "jsonl", "--output", "big.jsonl"); r.code != exitOK {
		t.Fatalf("the baseline run: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, tc := range []struct {
		bound, how string
	}{{"9000", "rendered case by case from its JSON Lines stream"}, {"40000", "it was rendered case by case"}} {
		r := runADK(t, dir, nil, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--samples", "2",
			"--baseline", "big.jsonl", "--format", "html", "--max-report-bytes", tc.bound, "--output", "gate.html")
		// The 298 cases the run does not have regress.
		if r.code != exitFailed || !strings.Contains(r.stderr, tc.how) {
			t.Fatalf("bound %s: exit %d, stderr %q", tc.bound, r.code, r.stderr)
		}
		bound, _ := strconv.Atoi(tc.bound)
		page, err := os.ReadFile(filepath.Join(dir, "gate.html"))
		if err != nil || string(page) != r.stdout || len(page) > bound {
			t.Fatalf("bound %s: the page is %d bytes, stdout %d: %v", tc.bound, len(page), len(r.stdout), err)
		}
		m := regexp.MustCompile(`This table shows (\d+) of 300 baseline cases</strong>.*Regressions come first \((\d+) of 298 shown\), then the other cases \((\d+) of 2 shown\)`).FindStringSubmatch(r.stdout)
		if m == nil || m[1] != m[2] || m[3] != "0" || strings.Count(r.stdout, `<span class="badge REGRESSION">REGRESSION</span> missing_current_case`) != atoi(t, m[2]) {
			t.Fatalf("bound %s: the comparison's note is missing or wrong: %v", tc.bound, m)
		}
		t.Logf("bound %s: %d bytes, %s of 298 regressions shown", tc.bound, len(page), m[2])
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
