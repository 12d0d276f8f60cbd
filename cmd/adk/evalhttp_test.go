package main

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
)

// startHTTPAgent builds and starts the bundled examples/http-agent server on
// 127.0.0.1:0 and returns its URL, from the address the agent logs once it
// listens (a port picked and freed by the test could be taken by a
// parallel test before the agent binds it). The process is killed and
// reaped when the test ends.
func startHTTPAgent(t *testing.T) string {
	t.Helper()
	bin := testutil.Binary(t, filepath.Join(repoRoot(t), "examples", "http-agent"))
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-drained // all reads done before Wait closes the pipe
		_ = cmd.Wait()
	})
	select {
	case l := <-lines:
		_, addr, ok := strings.Cut(l, "http-agent listening on ")
		if !ok {
			t.Fatalf("http-agent: %q", l)
		}
		return addr + "/"
	case <-time.After(10 * time.Second):
		t.Fatal("http-agent not listening after 10s")
		return ""
	}
}

// TestEvalRun_HTTPAgent evaluates the bundled HTTP example agent through
// --agent-url: the same criteria and exit codes as an AGENT.json agent.
func TestEvalRun_HTTPAgent(t *testing.T) {
	t.Parallel()
	url := startHTTPAgent(t)
	dir := t.TempDir()
	root := repoRoot(t)
	criteria := filepath.Join(root, "examples", "travel", "criteria.json")
	pass := writeFile(t, dir, "pass.json", `{"id":"http","version":"1","cases":[
		{"id":"pune","expected_trajectory":[{"tool":"get_weather","args":{"city":"Pune"}}],
		 "turns":[{"input":"What is the weather in Pune?","expected_response":"It is sunny in Pune, 31°C."}]},
		{"id":"pizza","expected_trajectory":[],"input":"Order a pizza","expected":"Sorry, I can only help with weather and flights."}]}`)
	fail := writeFile(t, dir, "fail.json", `{"id":"http","version":"1","cases":[
		{"id":"oslo","expected_trajectory":[],"turns":[{"input":"What is the weather in Oslo?","expected_response":"Snowing."}]}]}`)

	r := runADK(t, dir, nil, "eval", "run", "--agent-url", url, "--eval-set", pass, "--criteria", criteria, "--format", "markdown")
	if r.code != exitOK || !strings.Contains(r.stdout, "PASS") {
		t.Fatalf("passing set: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	r = runADK(t, dir, nil, "eval", "run", "--agent-url", url, "--eval-set", fail, "--criteria", criteria)
	if r.code != exitFailed {
		t.Fatalf("failing set: exit %d, want 2 (stderr %s)", r.code, r.stderr)
	}

	t.Run("bad input", func(t *testing.T) {
		agentJSON := filepath.Join(root, "examples", "travel", "AGENT.json")
		oneErrorLine(t, runADK(t, dir, nil, "eval", "run", "--agent-url", url, "--config", agentJSON, "--eval-set", pass), codeConflictingOptions)
		for _, bad := range []string{"ftp://127.0.0.1/", "http://user:secret-token@127.0.0.1/", "not a url", "http://"} {
			res := runADK(t, dir, nil, "eval", "run", "--agent-url", bad, "--eval-set", pass)
			oneErrorLine(t, res, codeInvalidAgentURL)
			if strings.Contains(res.stderr, "secret-token") {
				t.Errorf("stderr echoes the URL's credentials: %q", res.stderr)
			}
		}
	})
}
