package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEvalReport_StreamedJSONL: `adk eval report` renders a jsonl result
// to the golden bytes of the document renderer (case by case for
// markdown, junit and sarif, whole for html), and a damaged stream over
// 16 MiB is refused in every format, leaving no output. The large file
// is sparse.
func TestEvalReport_StreamedJSONL(t *testing.T) {
	t.Parallel()
	golden := filepath.Join(repoRoot(t), "evalengine", "testdata", "golden")
	dir := t.TempDir()
	stream := filepath.Join(golden, "result.jsonl")
	for _, format := range []string{"markdown", "junit", "sarif", "html"} {
		want, err := os.ReadFile(filepath.Join(golden, "result."+format))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "report."+format)
		r := runADK(t, dir, nil, "eval", "report", stream, "--format", format, "--output", out)
		if r.code != exitOK || r.stdout != string(want) {
			t.Fatalf("%s: exit %d, stderr %q, stdout equals golden: %t", format, r.code, r.stderr, r.stdout == string(want))
		}
		if got, _ := os.ReadFile(out); string(got) != string(want) {
			t.Fatalf("%s: --output differs from the golden report", format)
		}
	}
	data, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.jsonl")
	if err := os.WriteFile(big, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 17<<20); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"html", "markdown", "json"} {
		out := filepath.Join(dir, "big."+format)
		r := runADK(t, dir, nil, "eval", "report", big, "--format", format, "--output", out)
		if r.code == exitOK || !strings.Contains(r.stderr, "invalid_eval_stream") {
			t.Fatalf("%s of a damaged stream: exit %d, stderr %q", format, r.code, r.stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("%s: a failed report left its output behind: %v", format, err)
		}
	}
}

// TestEvalRun_JSONLThenReport: a run's jsonl report renders as the same
// markdown the run prints itself, also when the run is over its report
// budget.
func TestEvalRun_JSONLThenReport(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	base := []string{"eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--criteria", "criteria.json", "--samples", "2"}
	md := runADK(t, dir, nil, append(base, "--format", "markdown")...)
	js := runADK(t, dir, nil, append(base, "--format", "jsonl", "--output", "run.jsonl")...)
	if md.code != 2 || js.code != 2 {
		t.Fatalf("runs exited %d and %d (stderr %q %q)", md.code, js.code, md.stderr, js.stderr)
	}
	r := runADK(t, dir, nil, "eval", "report", "run.jsonl", "--format", "markdown")
	// Each run has its own trace ids.
	traces := regexp.MustCompile(`\(trace [0-9a-f]+\)`)
	if got, want := traces.ReplaceAllString(r.stdout, ""), traces.ReplaceAllString(md.stdout, ""); r.code != exitOK || got != want || !strings.Contains(want, "## Failures") {
		t.Fatalf("report of the jsonl: exit %d, stderr %q\n%s\nwant\n%s", r.code, r.stderr, got, want)
	}
	// Over its report budget the run streams (evalspill_test.go).
	r = runADK(t, dir, nil, append(base, "--format", "markdown", "--max-report-bytes", "1")...)
	if got, want := traces.ReplaceAllString(r.stdout, ""), traces.ReplaceAllString(md.stdout, ""); r.code != exitFailed || got != want || !strings.Contains(r.stderr, "over one 1-byte document") {
		t.Fatalf("over budget: exit %d, stderr %q", r.code, r.stderr)
	}
}
