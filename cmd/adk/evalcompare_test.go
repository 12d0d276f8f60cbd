package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// savedResults runs the good and the bad agent once each and saves their
// results as good-result.json and bad-result.json in dir.
func savedResults(t *testing.T, dir string) {
	t.Helper()
	for _, a := range []string{"good", "bad"} {
		r := runADK(t, dir, nil, "eval", "run", "--config", a+".json", "--eval-set", "set.json", "--output", a+"-result.json")
		if r.code == exitError {
			t.Fatalf("run %s: %q", a, r.stderr)
		}
	}
}

func TestEvalCompare(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	savedResults(t, dir)

	t.Run("no regression and a passing current result exits 0", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "compare", "good-result.json", "good-result.json")
		if r.code != exitOK || r.stderr != "" || !strings.HasPrefix(r.stdout, "# Evaluation baseline comparison") ||
			!strings.Contains(r.stdout, "## Pass-rate intervals") {
			t.Fatalf("exit %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
		}
	})
	t.Run("regression exits 2, json equals the file and run --baseline", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "compare", "good-result.json", "bad-result.json", "--format", "json", "--output", "cmp.json")
		if r.code != exitFailed || r.stderr != "" {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
		file, err := os.ReadFile(filepath.Join(dir, "cmp.json"))
		if err != nil || !bytes.Equal(file, []byte(r.stdout)) {
			t.Fatalf("file (%v) differs from stdout", err)
		}
		c, err := evalengine.DecodeComparison(file)
		if err != nil || c.Passed || c.PassRateDrop != 0.5 {
			t.Fatalf("comparison: %v %+v", err, c)
		}
		live := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--baseline", "good-result.json")
		if live.stdout != r.stdout {
			t.Fatalf("compare and run --baseline disagree:\n%s\n%s", r.stdout, live.stdout)
		}
	})
	t.Run("no regression still exits 2 when the current result failed", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "compare", "bad-result.json", "bad-result.json", "--format", "json")
		var c map[string]any
		if r.code != exitFailed || json.Unmarshal([]byte(r.stdout), &c) != nil || c["passed"] != true {
			t.Fatalf("exit %d stdout %q", r.code, r.stdout)
		}
	})
	t.Run("improvement with tolerances exits 0", func(t *testing.T) {
		writeFile(t, dir, "tol.json", `{"response":0.1}`)
		r := runADK(t, dir, nil, "eval", "compare", "bad-result.json", "good-result.json", "--metric-tolerances", "tol.json")
		if r.code != exitOK {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		code string
	}{
		{"result-only format", []string{"good-result.json", "bad-result.json", "--format", "junit"}, "invalid_eval_report_format"},
		{"current not a result", []string{"good-result.json", "set.json"}, "invalid_current_result: unsupported_eval_result_schema_version (set.json)"},
		{"baseline not a result", []string{"set.json", "good-result.json"}, "invalid_eval_baseline"},
		{"missing file", []string{"good-result.json", "nope.json"}, "eval_file_unreadable: current"},
		{"bad drop", []string{"good-result.json", "bad-result.json", "--max-pass-rate-drop", "2"}, "invalid_fraction: max_pass_rate_drop"},
		{"one argument", []string{"good-result.json"}, "usage:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runADK(t, dir, nil, append([]string{"eval", "compare", "--output", "err.out"}, tc.args...)...)
			oneErrorLine(t, r, tc.code)
			if _, err := os.Stat(filepath.Join(dir, "err.out")); err == nil {
				t.Fatal("an error left an output file")
			}
		})
	}
}

func TestEvalStats(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	savedResults(t, dir)

	t.Run("a single result prints its intervals and exits 0", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "stats", "bad-result.json")
		if r.code != exitOK || r.stderr != "" || r.stdout == "" {
			t.Fatalf("exit %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
		}
	})
	t.Run("no regression against earlier results exits 0", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "stats", "bad-result.json", "good-result.json", "good-result.json",
			"--format", "json", "--confidence", "0.99", "--output", "stats.json")
		if r.code != exitOK {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
		var doc evalengine.StatsDocument
		file, _ := os.ReadFile(filepath.Join(dir, "stats.json"))
		if !bytes.Equal(file, []byte(r.stdout)) || json.Unmarshal(file, &doc) != nil ||
			!doc.Passed || doc.ConfidenceLevel != 0.99 || len(doc.Results) != 3 || doc.Gate == nil || doc.Gate.BaselineResults != 2 {
			t.Fatalf("stats document: %s", r.stdout)
		}
	})
	t.Run("a regression exits 2", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "stats", "good-result.json", "good-result.json", "bad-result.json",
			"--require-significance", "false", "--format", "markdown")
		if r.code != exitFailed || r.stderr != "" || !strings.Contains(r.stdout, "| pass rate | 1.0000 | 0.5000 | 0.5000 | 0.0000 | REGRESSION |") {
			t.Fatalf("exit %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
		}
		r = runADK(t, dir, nil, "eval", "stats", "good-result.json", "good-result.json", "bad-result.json",
			"--require-significance", "false", "--max-mean-drop", "0.5")
		if r.code != exitOK {
			t.Fatalf("a tolerated drop: exit %d stdout %q", r.code, r.stdout)
		}
	})
	t.Run("a jsonl result has the statistics of its document", func(t *testing.T) {
		// The same result written both ways: a jsonl run, and its
		// document rebuilt by adk eval report.
		r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--format", "jsonl", "--output", "bad.jsonl")
		if r.code == exitError {
			t.Fatalf("run: %q", r.stderr)
		}
		if r = runADK(t, dir, nil, "eval", "report", "bad.jsonl", "--format", "json", "--output", "bad-doc.json"); r.code != exitOK {
			t.Fatalf("report: %q", r.stderr)
		}
		for _, format := range []string{"text", "markdown", "json"} {
			doc := runADK(t, dir, nil, "eval", "stats", "good-result.json", "bad-doc.json", "--format", format, "--require-significance", "false")
			jsonl := runADK(t, dir, nil, "eval", "stats", "good-result.json", "bad.jsonl", "--format", format, "--require-significance", "false")
			if doc.code != exitFailed || jsonl.code != doc.code || jsonl.stderr != "" || jsonl.stdout != doc.stdout {
				t.Fatalf("%s: document exit %d %q, jsonl exit %d %q (stderr %q)", format, doc.code, doc.stdout, jsonl.code, jsonl.stdout, jsonl.stderr)
			}
		}
		data, err := os.ReadFile(filepath.Join(dir, "bad.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "cut.jsonl", string(data[:len(data)/2]))
		r = runADK(t, dir, nil, "eval", "stats", "cut.jsonl")
		oneErrorLine(t, r, "invalid_eval_result: invalid_eval_stream")
	})
	for _, tc := range []struct {
		name string
		args []string
		code string
	}{
		{"confidence not allowed", []string{"--confidence", "0.8", "good-result.json"}, "invalid_confidence_level"},
		{"confidence not a number", []string{"--confidence", "high", "good-result.json"}, "invalid_confidence_level"},
		{"bad boolean", []string{"--require-significance", "yes", "good-result.json"}, "invalid_boolean: require_significance"},
		{"bad format", []string{"--format", "sarif", "good-result.json"}, "invalid_eval_report_format"},
		{"not a result", []string{"good-result.json", "set.json"}, "invalid_eval_result"},
		{"no results", nil, "usage:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runADK(t, dir, nil, append([]string{"eval", "stats", "--output", "err.out"}, tc.args...)...)
			oneErrorLine(t, r, tc.code)
			if _, err := os.Stat(filepath.Join(dir, "err.out")); err == nil {
				t.Fatal("an error left an output file")
			}
		})
	}
}
