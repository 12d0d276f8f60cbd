package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	travelAgent    = "../../examples/travel/AGENT.json"
	travelSet      = "../../examples/travel/evalset.json"
	travelCriteria = "../../examples/travel/criteria.json"
)

// startEvalCluster runs `adk serve` in-process (NATS with JetStream on a
// random loopback port, the trace store node, the one-node coordinator and
// a worker trusted with the travel agent) and returns its client URL.
func startEvalCluster(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	urlc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{dataDir: filepath.Join(dir, "data"), host: "127.0.0.1", port: -1,
			eval:  serveEvalOptions{agents: []string{"travel=" + travelAgent}, raftAddr: "127.0.0.1:0", capacity: 4},
			ready: func(u string) { urlc <- u }}, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case u := <-urlc:
		return u
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve not ready")
	}
	return ""
}

func runCLI(t *testing.T, wantCode int, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != wantCode {
		t.Fatalf("adk %s: exit %d (want %d), stderr %q", strings.Join(args, " "), code, wantCode, errb.String())
	}
	return out.String()
}

func TestClusterEvalCLI_RunEqualsLocalRun(t *testing.T) {
	url := startEvalCluster(t)
	local := runCLI(t, exitOK, "eval", "run", "--config", travelAgent, "--eval-set", travelSet, "--criteria", travelCriteria, "--format", "markdown")
	remote := runCLI(t, exitOK, "eval", "run", "--cluster", url, "--agent", "travel", "--eval-set", travelSet, "--criteria", travelCriteria, "--format", "markdown")
	if remote != local {
		t.Fatalf("cluster report differs from the local one:\n--- cluster\n%s\n--- local\n%s", remote, local)
	}

	var page struct {
		Items []struct {
			JobID string `json:"job_id"`
			Phase string `json:"phase"`
		} `json:"items"`
	}
	jobs := runCLI(t, exitOK, "eval", "jobs", "--cluster", url)
	if err := json.Unmarshal([]byte(jobs), &page); err != nil || len(page.Items) != 1 || page.Items[0].Phase != "completed" {
		t.Fatalf("jobs: %v %s", err, jobs)
	}
	id := page.Items[0].JobID
	if st := runCLI(t, exitOK, "eval", "status", id, "--cluster", url); !strings.Contains(st, `"phase": "completed"`) {
		t.Fatalf("status: %s", st)
	}
	if rep := runCLI(t, exitOK, "eval", "report", id, "--cluster", url, "--format", "markdown"); rep != local {
		t.Fatalf("report of the stored result differs:\n%s", rep)
	}
	if res := runCLI(t, exitOK, "eval", "result", id, "--cluster", url); !strings.Contains(res, `"eval_set_id":"travel-core"`) {
		t.Fatalf("result: %.300s", res)
	}
	runCLI(t, exitError, "eval", "cancel", id, "--cluster", url) // already terminal

	detached := runCLI(t, exitOK, "eval", "submit", "--cluster", url, "--agent", "travel", "--eval-set", travelSet, "--detach")
	if !strings.Contains(detached, `"job_id"`) {
		t.Fatalf("submit --detach: %s", detached)
	}
	// A job naming an agent no worker trusts fails its samples, not the CLI.
	runCLI(t, exitFailed, "eval", "run", "--cluster", url, "--agent", "nobody", "--eval-set", travelSet, "--format", "markdown")
}

// TestClusterServeBinary_EvalRunAndCleanShutdown starts the built binary's
// `adk serve` with the travel agent, runs the example with the binary's
// `adk eval run --cluster` (exit 0, the local Markdown report), and stops
// serve with SIGTERM (exit 0).
func TestClusterServeBinary_EvalRunAndCleanShutdown(t *testing.T) {
	bin := adkBinary(t)
	agentPath, err := filepath.Abs(travelAgent)
	if err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(bin, "serve", "--data-dir", filepath.Join(t.TempDir(), "data"), "--port", "-1", "--agent", "travel="+agentPath, "--capacity", "4")
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var serveErr bytes.Buffer
	serve.Stderr = &serveErr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- serve.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = serve.Process.Kill()
			<-exited
		}
	})
	// The NATS URL comes first, then the eval coordinator's line.
	var url string
	evalUp := false
	deadline := time.After(30 * time.Second)
	for !evalUp {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve exited early: %s", serveErr.String())
			}
			if rest, found := strings.CutPrefix(l, "adk serve: nats "); found {
				url, _, _ = strings.Cut(rest, ",")
			}
			evalUp = url != "" && strings.HasPrefix(l, "adk serve: eval coordinator")
		case <-deadline:
			t.Fatalf("serve not ready: %s", serveErr.String())
		}
	}

	local := runCLI(t, exitOK, "eval", "run", "--config", travelAgent, "--eval-set", travelSet, "--criteria", travelCriteria, "--format", "markdown")
	r := runADK(t, t.TempDir(), nil, "eval", "run", "--cluster", url, "--agent", "travel", "--eval-set", mustAbs(t, travelSet),
		"--criteria", mustAbs(t, travelCriteria), "--format", "markdown")
	if r.code != exitOK || r.stdout != local {
		t.Fatalf("adk eval run --cluster: exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}

	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v, stderr %s", err, serveErr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
