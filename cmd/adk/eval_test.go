package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
)

// goodAgent answers both cities right; badAgent gets Oslo wrong.
const goodAgent = `{"schema_version":1,"name":"weather","model":{"provider":"scripted","rules":[
 {"match":{"contains":"Pune"},"steps":[{"tool_calls":[{"name":"get_weather","args":{"city":"Pune"}}]},{"text":"Sunny"}]},
 {"match":{"contains":"Oslo"},"steps":[{"text":"Snow"}]}]},
 "tools":[{"name":"get_weather","mock":{"default":{"result":{"sky":"clear"}}}}]}`

const badAgent = `{"schema_version":1,"name":"weather","model":{"provider":"scripted","rules":[
 {"match":{"contains":"Pune"},"steps":[{"tool_calls":[{"name":"get_weather","args":{"city":"Pune"}}]},{"text":"Sunny"}]},
 {"match":{"contains":"Oslo"},"steps":[{"text":"Rain"}]}]},
 "tools":[{"name":"get_weather","mock":{"default":{"result":{"sky":"clear"}}}}]}`

const weatherSet = `{"id":"weather","version":"1","cases":[
 {"id":"pune","expected_trajectory":["get_weather"],"input":"Weather in Pune?","expected":"Sunny"},
 {"id":"oslo","input":"Weather in Oslo?","expected":"Snow"}]}`

const weatherCriteria = `{"criteria":[{"id":"response","criterion":"exact_response"},
 {"id":"trajectory","criterion":"tool_trajectory","threshold":1}]}`

// fixture writes the standard files into a fresh directory.
func fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "good.json", goodAgent)
	writeFile(t, dir, "bad.json", badAgent)
	writeFile(t, dir, "set.json", weatherSet)
	writeFile(t, dir, "criteria.json", weatherCriteria)
	return dir
}

func TestEvalRun_ExitCodes(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	t.Run("pass exits 0 with a result and nothing on stderr", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--samples", "2")
		if r.code != exitOK || r.stderr != "" {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
		res, err := evalengine.DecodeResult([]byte(r.stdout))
		if err != nil {
			t.Fatalf("stdout is not a valid result: %v", err)
		}
		if !res.Passed || res.ResultSchemaVersion != 2 || res.SampleCount != 2 || !strings.HasSuffix(r.stdout, "\n") {
			t.Fatalf("result: passed %v schema %d samples %d", res.Passed, res.ResultSchemaVersion, res.SampleCount)
		}
	})
	t.Run("failed evaluation exits 2", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--format", "markdown")
		if r.code != exitFailed || r.stderr != "" || !strings.Contains(r.stdout, "**Status: FAIL**") {
			t.Fatalf("exit %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
		}
	})
	t.Run("a lowered threshold passes", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--pass-rate-threshold", "0.5")
		if r.code != exitOK {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
	})
	t.Run("an error exits 1", func(t *testing.T) {
		oneErrorLine(t, runADK(t, dir, nil, "eval", "run", "--config", "good.json"), "missing_required_options: --eval-set")
	})
}

func TestEvalRun_OutputFileEqualsStdout(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	for _, format := range evalengine.Formats() {
		t.Run(format, func(t *testing.T) {
			out := filepath.Join(dir, "report."+format)
			r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json",
				"--criteria", "criteria.json", "--format", format, "--output", out)
			if r.code != exitFailed {
				t.Fatalf("exit %d stderr %q", r.code, r.stderr)
			}
			file, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(file, []byte(r.stdout)) || len(file) == 0 || file[len(file)-1] != '\n' {
				t.Fatalf("file (%d bytes) and stdout (%d bytes) differ or lack the final newline", len(file), len(r.stdout))
			}
			if st, _ := os.Stat(out); st.Mode().Perm() != 0o644 {
				t.Errorf("report mode %v", st.Mode().Perm())
			}
		})
	}
}

// TestEvalRun_BadInput is every bad-input case of the issue and the
// contract's CLI error atoms: exit 1, one typed line, no output file.
func TestEvalRun_BadInput(t *testing.T) {
	t.Parallel()
	deep := `{"id":"d","version":"1","cases":[{"id":"c","input":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `,"expected":"x"}]}`
	sparse := func(name string, size int64) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
		}
	}
	file := func(name, content string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) { writeFile(t, dir, name, content) }
	}
	base := []string{"eval", "run", "--config", "good.json", "--eval-set", "set.json", "--output", "out.json"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		args  []string
		code  string
	}{
		{"malformed set JSON", file("set.json", `{"id":"x",`), nil, "invalid_eval_set"},
		{"set too deep", file("set.json", deep), nil, "invalid_eval_set: eval_data_depth_exceeded"},
		{"set too large", sparse("set.json", 16<<20+1), nil, "eval_file_too_large: eval_set"},
		{"set not an object", file("set.json", `"x"`), nil, "eval_set_must_be_object"},
		{"unknown set key", file("set.json", `{"id":"x","version":"1","cases":[],"extra":1}`), nil, "invalid_eval_set: unknown_eval_set_keys"},
		{"duplicate case ids", file("set.json", `{"id":"x","version":"1","cases":[{"id":"a","input":"q"},{"id":"a","input":"q"}]}`), nil, "invalid_eval_set: duplicate_eval_case_id"},
		{"missing set file", nil, []string{"eval", "run", "--config", "good.json", "--eval-set", "nope.json", "--output", "out.json"}, "eval_file_unreadable: eval_set"},
		{"set is a directory", func(t *testing.T, dir string) { os.Mkdir(filepath.Join(dir, "d"), 0o755) }, []string{"eval", "run", "--config", "good.json", "--eval-set", "d", "--output", "out.json"}, "eval_file_unreadable: eval_set"},
		{"agent config too large", sparse("good.json", 1<<20+1), nil, "eval_file_too_large: config"},
		{"agent config invalid", file("good.json", `{"schema_version":1,"name":"a","model":{"provider":"nope"}}`), nil, "invalid_agent_config"},
		{"agent config unknown key", file("good.json", `{"schema_version":1,"name":"a","bogus":1}`), nil, "invalid_agent_config"},
		{"criteria naming an unknown criterion", file("c.json", `[{"id":"r","criterion":"rouge"}]`), with("--criteria", "c.json"), "invalid_eval_criterion"},
		{"criteria unknown item keys", file("c.json", `[{"id":"r","criterion":"exact_response","weight":2}]`), with("--criteria", "c.json"), "unknown_eval_criterion_keys"},
		{"criteria wrapper unknown keys", file("c.json", `{"criteria":[],"x":1}`), with("--criteria", "c.json"), "unknown_eval_criteria_keys"},
		{"criteria not an array", file("c.json", `"x"`), with("--criteria", "c.json"), "eval_criteria_must_be_array"},
		{"criteria threshold 2", file("c.json", `[{"id":"r","criterion":"exact_response","threshold":2}]`), with("--criteria", "c.json"), "invalid_eval_criterion"},
		{"criteria too large", sparse("c.json", 1<<20+1), with("--criteria", "c.json"), "eval_file_too_large: criteria"},
		{"empty criteria", file("c.json", `[]`), with("--criteria", "c.json"), "evaluation_failed: empty_eval_criteria"},
		{"tolerances without baseline", file("t.json", `{"response":0.1}`), with("--metric-tolerances", "t.json"), "baseline_required_for_comparison_options"},
		{"max drop without baseline", nil, with("--max-pass-rate-drop", "0.1"), "baseline_required_for_comparison_options"},
		{"tolerances not an object", file("b.json", `{}`), with("--baseline", "b.json", "--metric-tolerances", "b.json"), "invalid_eval_baseline"},
		{"tolerance file not object", file("t.json", `[1]`), with("--baseline", "set.json", "--metric-tolerances", "t.json"), "metric_tolerances_must_be_object"},
		{"tolerance out of range", file("t.json", `{"response":2}`), with("--baseline", "set.json", "--metric-tolerances", "t.json"), "invalid_metric_tolerances"},
		{"baseline not an object", file("b.json", `[1]`), with("--baseline", "b.json"), "eval_baseline_must_be_object"},
		{"baseline not a result", file("b.json", `{"result_schema_version":2}`), with("--baseline", "b.json"), "invalid_eval_baseline"},
		{"baseline too large", sparse("b.json", 16<<20+1), with("--baseline", "b.json"), "eval_file_too_large: baseline"},
		{"bad format", nil, with("--format", "pdf"), "invalid_eval_report_format"},
		{"samples zero", nil, with("--samples", "0"), "invalid_positive_integer: samples"},
		{"samples over the bound", nil, with("--samples", "101"), "invalid_eval_options: sample_count"},
		{"concurrency not a number", nil, with("--concurrency", "many"), "invalid_positive_integer: concurrency"},
		{"fraction out of range", nil, with("--pass-rate-threshold", "1.5"), "invalid_fraction: pass_rate_threshold"},
		{"empty criteria policy", nil, with("--empty-criteria", "maybe"), "invalid_empty_criteria_policy: empty_criteria"},
		{"boolean", nil, with("--capture-events", "yes"), "invalid_boolean: capture_events"},
		{"empty output path", nil, []string{"eval", "run", "--config", "good.json", "--eval-set", "set.json", "--output", ""}, "invalid_eval_output_path"},
		{"unwritable output", nil, []string{"eval", "run", "--config", "good.json", "--eval-set", "set.json", "--output", "missing-dir/out.json"}, "report_write_failed"},
		{"unknown flag", nil, with("--bogus"), "usage: unknown flag"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixture(t)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			before, _ := os.ReadDir(dir)
			args := tc.args
			if args == nil {
				args = base
			}
			r := runADK(t, dir, nil, args...)
			oneErrorLine(t, r, tc.code)
			keep := make([]string, len(before))
			for i, e := range before {
				keep[i] = e.Name()
			}
			noFilesBut(t, dir, keep...)
		})
	}
}

// A NUL byte cannot travel through argv (exec refuses it), so this one
// case runs the command in process.
func TestEvalRun_NULInOutputPath(t *testing.T) {
	dir := fixture(t)
	var out, errb bytes.Buffer
	code := run([]string{"eval", "run", "--config", filepath.Join(dir, "good.json"), "--eval-set", filepath.Join(dir, "set.json"),
		"--output", filepath.Join(dir, "a\x00b")}, &out, &errb)
	if code != exitError || out.Len() != 0 || errb.String() != "adk: invalid_eval_output_path\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out.String(), errb.String())
	}
	noFilesBut(t, dir, "good.json", "bad.json", "set.json", "criteria.json")
}

func TestEvalRun_BaselineGate(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	save := func(agent, name string) {
		t.Helper()
		r := runADK(t, dir, nil, "eval", "run", "--config", agent, "--eval-set", "set.json", "--output", name)
		if r.code == exitError {
			t.Fatalf("baseline run: %q", r.stderr)
		}
	}
	save("good.json", "good-result.json")
	save("bad.json", "bad-result.json")

	t.Run("regression exits 2 with the comparison document", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--baseline", "good-result.json")
		if r.code != exitFailed {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
		c, err := evalengine.DecodeComparison([]byte(r.stdout))
		if err != nil {
			t.Fatalf("stdout is not a comparison: %v", err)
		}
		if c.Passed || c.PassRateDrop != 0.5 {
			t.Fatalf("comparison: %+v", c)
		}
		var keys map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &keys); err != nil || len(keys) != 12 {
			t.Fatalf("comparison has %d keys, want exactly the contract's 12", len(keys))
		}
	})
	t.Run("an allowed drop passes the gate but not the absolute verdict", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--baseline", "good-result.json",
			"--max-pass-rate-drop", "0.5", "--format", "markdown")
		if r.code != exitFailed {
			t.Fatalf("exit %d, want 2: the current run still fails its threshold", r.code)
		}
	})
	t.Run("failing versus an equally failing baseline exits 2", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--baseline", "bad-result.json", "--format", "markdown")
		if r.code != exitFailed || !strings.Contains(r.stdout, "# Evaluation baseline comparison") || !strings.Contains(r.stdout, "PASS") {
			t.Fatalf("exit %d stdout %q", r.code, r.stdout)
		}
	})
	t.Run("improvement exits 0", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--baseline", "bad-result.json",
			"--metric-tolerances", "criteria.json")
		if r.code != exitError {
			t.Fatalf("a criteria file is not a tolerance map: exit %d", r.code)
		}
		writeFile(t, dir, "tol.json", `{"response":0.1}`)
		r = runADK(t, dir, nil, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--baseline", "bad-result.json",
			"--metric-tolerances", "tol.json", "--format", "junit")
		if r.code != exitOK || !strings.Contains(r.stdout, "<testsuite") {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
	})
	t.Run("report renders a saved result offline", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "report", "bad-result.json", "--format", "markdown")
		direct := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--format", "markdown")
		// Two runs: the same report but for the samples' trace ids.
		if r.code != exitOK || traceIDs.ReplaceAllString(r.stdout, "T") != traceIDs.ReplaceAllString(direct.stdout, "T") {
			t.Fatalf("exit %d: report %q, run %q", r.code, r.stdout, direct.stdout)
		}
		cmp := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--baseline", "good-result.json", "--output", "cmp.json")
		if cmp.code != exitFailed {
			t.Fatalf("exit %d", cmp.code)
		}
		r = runADK(t, dir, nil, "eval", "report", "cmp.json", "--format", "markdown")
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "# Evaluation baseline comparison") {
			t.Fatalf("comparison report: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		oneErrorLine(t, runADK(t, dir, nil, "eval", "report", "set.json"), "invalid_eval_report_input")
	})
	t.Run("html holds the result, its diff and the comparison in one file", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--criteria", "criteria.json",
			"--baseline", "good-result.json", "--format", "html", "--output", "report.html")
		if r.code != exitFailed {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
		for _, want := range []string{"<!DOCTYPE html>", "Comparison with the baseline", "<del>Snow</del><ins>Rain</ins>", "case_no_longer_passes"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("html report lacks %q", want)
			}
		}
		rep := runADK(t, dir, nil, "eval", "report", "bad-result.json", "--format", "html")
		if rep.code != exitOK || !strings.Contains(rep.stdout, "<del>Snow</del><ins>Rain</ins>") || strings.Contains(rep.stdout, "Comparison with") {
			t.Fatalf("report: exit %d stderr %q", rep.code, rep.stderr)
		}
	})
}

func TestScrubReport_HTMLSpellingOfASecret(t *testing.T) {
	const secret = "k+y&<z>'\\"
	data := []byte("<pre>" + htmlText(secret) + "</pre>" + secret)
	out := scrubReport(data, []string{secret})
	if string(out) != "<pre>[REDACTED]</pre>[REDACTED]" {
		t.Fatalf("scrubbed %q", out)
	}
}

// TestEvalRun_NeverPrintsTheAPIKey runs an openai agent whose server fails
// every call with a body that echoes the Authorization header: the key must
// reach the server and appear in neither stdout nor stderr.
func TestEvalRun_NeverPrintsTheAPIKey(t *testing.T) {
	t.Parallel()
	const key = "sk-test-Zq9uVb3kX7mW2pR8"
	var sawKey atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if strings.Contains(auth, key) {
			sawKey.Store(true)
		}
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"bad key %s"}}`, auth)
	}))
	defer srv.Close()
	dir := fixture(t)
	writeFile(t, dir, "openai.json", `{"schema_version":1,"name":"a","model":{"provider":"openai","model":"gpt-test",
		"base_url":"`+srv.URL+`/v1","api_key_env":"ADK_TEST_OPENAI_KEY","max_attempts":1}}`)
	env := []string{"ADK_TEST_OPENAI_KEY=" + key}
	for _, format := range evalengine.Formats() {
		r := runADK(t, dir, env, "eval", "run", "--config", "openai.json", "--eval-set", "set.json", "--format", format, "--capture-tool-content", "true")
		if r.code != exitFailed {
			t.Fatalf("%s: exit %d stderr %q", format, r.code, r.stderr)
		}
		if strings.Contains(r.stdout, key) || strings.Contains(r.stderr, key) || strings.Contains(r.stdout, "sk-test") {
			t.Fatalf("%s: the API key leaked into the output", format)
		}
	}
	if !sawKey.Load() {
		t.Fatal("the server never saw the key: the test proves nothing")
	}
	// A run that fails with an error (bad eval set) does not print it either.
	writeFile(t, dir, "broken.json", `{"id":`)
	r := runADK(t, dir, env, "eval", "run", "--config", "openai.json", "--eval-set", "broken.json")
	oneErrorLine(t, r, "invalid_eval_set")
	if strings.Contains(r.stderr, key) {
		t.Fatal("the API key leaked into stderr")
	}
	// An unset key variable is a config error naming the variable only.
	r = runADK(t, dir, []string{"ADK_TEST_OPENAI_KEY="}, "eval", "run", "--config", "openai.json", "--eval-set", "set.json")
	oneErrorLine(t, r, "invalid_agent_config")
}

func TestEvalRun_InterruptCancelsCleanly(t *testing.T) {
	var hits atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server notices the client going away
		hits.Add(1)
		select { // answer never: only the interrupt ends the run
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	dir := fixture(t)
	writeFile(t, dir, "openai.json", `{"schema_version":1,"name":"a","model":{"provider":"openai","model":"m","base_url":"`+srv.URL+`","max_attempts":1}}`)
	cmd := exec.Command(adkBinary(t), "eval", "run", "--config", "openai.json", "--eval-set", "set.json", "--output", "out.json")
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the first model call", func() bool { return hits.Load() > 0 })
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitError {
		t.Fatalf("wait: %v, stderr %q", err, errb.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to stop", d)
	}
	// The partial report precedes the error line; no sample finished, so
	// no journal is kept.
	if errb.String() != "adk: interrupted after 0 of 2 samples (0 passed, 0 failed, 0 error)\nadk: evaluation_failed: evaluation_cancelled\n" || out.Len() != 0 {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
	noFilesBut(t, dir, "good.json", "bad.json", "set.json", "criteria.json", "openai.json")
}

// TestEvalRun_ExampleDemo is the README's demo (make demo) and its
// regressions set.
func TestEvalRun_ExampleDemo(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	r := runADK(t, root, nil, "eval", "run", "--config", "examples/travel/AGENT.json", "--eval-set", "examples/travel/evalset.json",
		"--criteria", "examples/travel/criteria.json", "--format", "markdown")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "# Evaluation report\n") || !strings.Contains(r.stdout, "**Status: PASS**") {
		t.Fatalf("demo: exit %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
	}
	r = runADK(t, root, nil, "eval", "run", "--config", "examples/travel/AGENT.json", "--eval-set", "examples/travel/evalset_regressions.json",
		"--criteria", "examples/travel/criteria.json", "--format", "markdown")
	if r.code != exitFailed || !strings.Contains(r.stdout, "**Status: FAIL**") {
		t.Fatalf("regressions: exit %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
	}
	for _, set := range []string{"evalset.json", "evalset_regressions.json"} {
		r := runADK(t, root, nil, "eval", "validate", "examples/travel/"+set)
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "ok: eval set ") || strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("validate %s: exit %d %q %q", set, r.code, r.stdout, r.stderr)
		}
	}
}

// A Google ADK EvalSet as adk-python writes it, against an agent that
// answers its one question.
const googleSet = `{
  "eval_set_id": "home_automation",
  "name": "Home automation",
  "description": null,
  "eval_cases": [{
    "eval_id": "device_off",
    "conversation": [{
      "invocation_id": "e-1",
      "user_content": {"role": "user", "parts": [{"video_metadata": null, "thought": null, "text": "Turn off device_2 in the Bedroom."}]},
      "final_response": {"role": "model", "parts": [{"text": "I have set the device_2 status to off."}]},
      "intermediate_data": {"tool_uses": [{"id": null, "name": "set_device_info", "args": {"location": "Bedroom", "device_id": "device_2", "status": "OFF"}}],
        "intermediate_responses": []},
      "creation_timestamp": 1747337309.2360144
    }],
    "session_input": {"app_name": "home", "user_id": "u1", "state": {"home": "flat"}},
    "creation_timestamp": 1747337309.2360282
  }],
  "creation_timestamp": 1747337309.23
}`

const homeAgent = `{"schema_version":1,"name":"home","model":{"provider":"scripted","rules":[
 {"match":{"contains":"device_2"},"steps":[
   {"tool_calls":[{"name":"set_device_info","args":{"location":"Bedroom","device_id":"device_2","status":"OFF"}}]},
   {"text":"I have set the device_2 status to off."}]}]},
 "tools":[{"name":"set_device_info","mock":{"default":{"result":{"ok":true}}}}]}`

func TestEvalConvert_GoogleEvalSetRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "home.evalset.json", googleSet)
	writeFile(t, dir, "agent.json", homeAgent)
	writeFile(t, dir, "criteria.json", `[{"id":"response","criterion":"exact_response"},{"id":"tools","criterion":"tool_trajectory"}]`)

	r := runADK(t, dir, nil, "eval", "convert", "home.evalset.json", "v2.json")
	if r.code != exitOK || r.stdout != "" {
		t.Fatalf("convert: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	v2, err := os.ReadFile(filepath.Join(dir, "v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Converting the converted file (to stdout) changes nothing.
	again := runADK(t, dir, nil, "eval", "convert", "v2.json", "-")
	if again.code != exitOK || again.stdout != string(v2) {
		t.Fatalf("second conversion differs:\n%s\n%s", again.stdout, v2)
	}
	set, err := evalengine.ParseSet(v2)
	if err != nil || set.ID != "home_automation" || len(set.Cases) != 1 || set.Cases[0].SessionInput == nil {
		t.Fatalf("converted set: %v %+v", err, set)
	}
	// The Google file runs unchanged and gives the same report as its
	// conversion.
	var reports []string
	for _, s := range []string{"home.evalset.json", "v2.json"} {
		r := runADK(t, dir, nil, "eval", "run", "--config", "agent.json", "--eval-set", s, "--criteria", "criteria.json", "--format", "markdown")
		if r.code != exitOK {
			t.Fatalf("run %s: exit %d %q %q", s, r.code, r.stderr, r.stdout)
		}
		reports = append(reports, r.stdout)
	}
	if reports[0] != reports[1] {
		t.Fatalf("reports differ:\n%s\n%s", reports[0], reports[1])
	}
	oneErrorLine(t, runADK(t, dir, nil, "eval", "convert", "missing.json", "x.json"), "eval_file_unreadable")
	noFilesBut(t, dir, "home.evalset.json", "agent.json", "criteria.json", "v2.json")
}

func TestEvalValidate_Errors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "dup.json", `{"id":"x","version":"1","cases":[{"id":"a","input":"q"},{"id":"a","input":"q"}]}`)
	oneErrorLine(t, runADK(t, dir, nil, "eval", "validate", "dup.json"), "invalid_eval_set: duplicate_eval_case_id (a)")
	oneErrorLine(t, runADK(t, dir, nil, "eval", "validate"), "usage:")
}

// TestEvalUsage checks the in-process command tree: the usage text names
// `adk eval run`, and a subcommand is required.
func TestEvalUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"eval", "--help"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "run") {
		t.Fatalf("help: exit %d %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"eval", "run", "--help"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "adk eval run") {
		t.Fatalf("run help: exit %d %q", code, out.String())
	}
	errb.Reset()
	if code := run([]string{"eval"}, &out, &errb); code != exitError || !strings.HasPrefix(errb.String(), "adk: usage:") {
		t.Fatalf("bare eval: exit %d %q", code, errb.String())
	}
}
