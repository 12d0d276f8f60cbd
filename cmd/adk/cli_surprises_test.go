package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// TestCLI_NoSurprises holds the CLI to issue 16's "a CLI without surprises"
// list, each through the built binary.
func TestCLI_NoSurprises(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	run := func(args ...string) execResult { return runADK(t, dir, nil, args...) }
	base := []string{"eval", "run", "--config", "good.json", "--eval-set", "set.json"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }

	t.Run("--version prints what adk version prints", func(t *testing.T) {
		a, b := run("--version"), run("version")
		if a.code != exitOK || a.stdout != b.stdout || !strings.HasPrefix(a.stdout, "adk ") {
			t.Fatalf("--version: exit %d %q, version %q", a.code, a.stdout, b.stdout)
		}
	})
	t.Run("a bare eval run names the missing flags", func(t *testing.T) {
		oneErrorLine(t, run("eval", "run"), "missing_required_options: --config|--agent-url|--agent,--eval-set")
	})
	t.Run("usage errors name the flag and list what is valid", func(t *testing.T) {
		for _, tc := range []struct {
			args       []string
			code, want string
		}{
			{with("--format", "pdf"), "invalid_eval_report_format: pdf", "--format is one of " + strings.Join(evalengine.Formats(), ", ")},
			{with("--empty-criteria", "maybe"), "invalid_empty_criteria_policy: empty_criteria", `--empty-criteria is one of error, pass, got "maybe"`},
			{with("--samples", "zero"), "invalid_positive_integer: samples", `--samples wants an integer 1..100, got "zero"`},
			{with("--samples", "101"), "invalid_eval_options: sample_count", "--samples 1..100"},
			{with("--pass-rate-threshold", "2"), "invalid_fraction: pass_rate_threshold", "--pass-rate-threshold wants a number 0..1"},
			{with("--capture-events", "yes"), "invalid_boolean: capture_events", "--capture-events wants true or false"},
			{with("--timeout", "soon"), "invalid_duration: timeout", "such as 30s or 5m (a plain integer is milliseconds)"},
			{with("--case-timeout", "2h"), "invalid_duration: case_timeout", "1ms..1h0m0s"},
			{[]string{"eval", "report", "r.json", "--format", "pdf"}, "invalid_eval_report_format: pdf", strings.Join(evalengine.Formats(), ", ")},
			{[]string{"eval", "compare", "a.json", "b.json", "--format", "junit"}, "invalid_eval_report_format: junit", "--format is one of json, markdown"},
			{[]string{"eval", "stats", "a.json", "--format", "xml"}, "invalid_eval_report_format: xml", "--format is one of text, markdown, json"},
			{[]string{"eval", "status", "j1"}, "missing_required_options: --nats", "$ADK_CLUSTER"},
		} {
			r := run(tc.args...)
			oneErrorLine(t, r, tc.code)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%v: stderr %q does not say %q", tc.args, r.stderr, tc.want)
			}
		}
	})
	t.Run("durations take 30s and plain integers stay milliseconds", func(t *testing.T) {
		for _, v := range []string{"30s", "30000", "1m30s"} {
			r := run(with("--timeout", v, "--case-timeout", v)...)
			if r.code != exitOK {
				t.Fatalf("--timeout %s: exit %d stderr %q", v, r.code, r.stderr)
			}
		}
	})
	t.Run("booleans are typed: alone, =value and the old separate value", func(t *testing.T) {
		for _, args := range [][]string{{"--capture-tool-content"}, {"--capture-tool-content=true"}, {"--capture-tool-content", "true"}} {
			r := run(with(args...)...)
			if r.code != exitOK || !strings.Contains(r.stdout, `"args":{"city":"Pune"}`) {
				t.Fatalf("%v: exit %d stderr %q", args, r.code, r.stderr)
			}
		}
		r := run(with("--capture-events=false")...)
		res, err := evalengine.DecodeResult([]byte(r.stdout))
		if err != nil || r.code != exitOK {
			t.Fatalf("--capture-events=false: exit %d %v", r.code, err)
		}
		if ev := res.Cases[0].Samples[0].Turns[0].Events; len(ev) != 0 {
			t.Fatalf("events captured with --capture-events=false: %d", len(ev))
		}
	})
	t.Run("--quiet writes the file and nothing else", func(t *testing.T) {
		r := run(with("--quiet", "--format", "junit", "--output", "r.xml")...)
		data, err := os.ReadFile(filepath.Join(dir, "r.xml"))
		if r.code != exitOK || r.stdout != "" || r.stderr != "" || err != nil || !strings.Contains(string(data), "<testsuite") {
			t.Fatalf("exit %d stdout %q stderr %q file %v", r.code, r.stdout, r.stderr, err)
		}
		// Without a file, --quiet never loses the report.
		if r := run(with("-q")...); r.code != exitOK || !json.Valid([]byte(r.stdout)) {
			t.Fatalf("-q without --output: exit %d stdout %q", r.code, r.stdout)
		}
	})
	t.Run("one NATS flag name: --nats, old names hidden, ADK_CLUSTER", func(t *testing.T) {
		for _, cmd := range [][]string{{"eval", "run"}, {"eval", "submit"}, {"eval", "report"}, {"eval", "status"}, {"worker"}, {"coordinator"}, {"store"}, {"trace", "query"}} {
			help := run(append(cmd, "--help")...).stdout
			for _, want := range []string{"--nats string", "--nats-creds", "--nats-nkey", "--nats-user", "$ADK_CLUSTER"} {
				if !strings.Contains(help, want) {
					t.Errorf("adk %s --help lacks %q", strings.Join(cmd, " "), want)
				}
			}
			for _, hidden := range []string{"--cluster ", "--server ", "--creds "} {
				if strings.Contains(help, hidden) {
					t.Errorf("adk %s --help shows the old %q", strings.Join(cmd, " "), hidden)
				}
			}
		}
		// $ADK_CLUSTER is the URL of every command; an unreachable one is
		// a typed error, not a missing flag.
		r := runADK(t, dir, []string{"ADK_CLUSTER=nats://127.0.0.1:1"}, "eval", "status", "j1")
		oneErrorLine(t, r, "eval_cluster_unavailable")
		r = runADK(t, dir, nil, "eval", "status", "j1", "--cluster", "nats://127.0.0.1:1")
		oneErrorLine(t, r, "eval_cluster_unavailable")
	})
	t.Run("shell completion completes --format", func(t *testing.T) {
		r := run("__complete", "eval", "run", "--format", "")
		for _, f := range evalengine.Formats() {
			if !strings.Contains(r.stdout, f+"\n") {
				t.Fatalf("completion of --format lacks %s: %q", f, r.stdout)
			}
		}
		if r := run("completion", "bash"); r.code != exitOK || !strings.Contains(r.stdout, "bash completion") {
			t.Fatalf("completion bash: exit %d", r.code)
		}
	})
}
