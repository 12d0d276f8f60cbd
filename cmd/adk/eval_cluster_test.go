package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/client"
)

const (
	travelAgent    = "../../examples/travel/AGENT.json"
	travelSet      = "../../examples/travel/evalset.json"
	travelCriteria = "../../examples/travel/criteria.json"
)

// startEvalCluster runs `adk serve` in-process (NATS with JetStream on a
// random loopback port, the trace store node, the one-node coordinator and
// a worker trusted with the travel agent and the agents name=AGENT.json
// more) and returns its client URL.
func startEvalCluster(t *testing.T, more ...string) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	urlc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{dataDir: filepath.Join(dir, "data"), host: "127.0.0.1", port: -1,
			eval:  serveEvalOptions{agents: append([]string{"travel=" + travelAgent}, more...), raftAddr: "127.0.0.1:0", capacity: 4},
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
	// An agent no live worker offers is refused before anything is
	// submitted, naming the agents that are offered.
	var out, errb bytes.Buffer
	before := strings.Count(runCLI(t, exitOK, "eval", "jobs", "--nats", url), `"job_id"`)
	if code := run([]string{"eval", "run", "--nats", url, "--agent", "nobody", "--eval-set", travelSet}, &out, &errb); code != exitError ||
		!strings.Contains(errb.String(), "unknown_eval_agent: nobody (live workers offer: travel)") || out.Len() != 0 {
		t.Fatalf("unknown agent: exit %d stderr %q", code, errb.String())
	}
	if after := strings.Count(runCLI(t, exitOK, "eval", "jobs", "--nats", url), `"job_id"`); after != before {
		t.Fatalf("a job was submitted for an unknown agent: %d jobs, was %d", after, before)
	}
}

// TestClusterServeBinary_EvalRunAndCleanShutdown runs the README's "Running
// on a fleet" commands through the built binary: `adk serve` with the travel
// agent (on a free port and a temp data dir instead of the documented ones),
// then `adk eval run --cluster` (exit 0, the local Markdown report), and
// stops serve with SIGTERM (exit 0).
func TestClusterServeBinary_EvalRunAndCleanShutdown(t *testing.T) {
	bin := adkBinary(t)
	serveArgs, evals := readmeFleetCommands(t)
	evalArgs := evals[0]
	for i := range serveArgs {
		switch {
		case i > 0 && serveArgs[i-1] == "--port":
			serveArgs[i] = "-1"
		case i > 0 && serveArgs[i-1] == "--data-dir":
			serveArgs[i] = filepath.Join(t.TempDir(), "data")
		}
	}
	serve := exec.Command(bin, append(serveArgs, "--capacity", "4")...)
	serve.Dir = repoRoot(t)
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
	for i := range evalArgs {
		if i > 0 && evalArgs[i-1] == "--nats" {
			evalArgs[i] = url
		}
	}
	r := runADK(t, repoRoot(t), nil, evalArgs...)
	if r.code != exitOK || r.stdout != local {
		t.Fatalf("adk eval run --cluster: exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	// The jsonl lines: the fleet's stream written page by page, rendered
	// from the file and from the job by id, is the local report.
	runReadmeFleetStream(t, url, local, evals[1:])

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

// readmeFleetCommands returns the arguments of the commands in the
// README's "Running on a fleet" section: `adk serve ... &` and the `adk
// eval` commands, in order (the first is `adk eval run --nats ...`).
func readmeFleetCommands(t *testing.T) (serve []string, evals [][]string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := strings.CutPrefix(string(readme)[strings.Index(string(readme), "\n## Running on a fleet\n")+1:], "## Running on a fleet\n")
	if !ok {
		t.Fatal(`README has no "## Running on a fleet" section`)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	for _, line := range strings.Split(section, "\n") {
		fields := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), "&"))
		if len(fields) < 2 || fields[0] != "./bin/adk" {
			continue
		}
		switch fields[1] {
		case "serve":
			serve = fields[1:]
		case "eval":
			evals = append(evals, fields[1:])
		}
	}
	if serve == nil || len(evals) == 0 {
		t.Fatalf("README's fleet section lacks the serve or eval run command")
	}
	return serve, evals
}

// runReadmeFleetStream runs the README's fleet jsonl commands against the
// cluster at url (outputs in a temp dir, JOB_ID the jsonl run's job): the
// stream file and the job by id both render as the local markdown report.
func runReadmeFleetStream(t *testing.T, url, localMarkdown string, cmds [][]string) {
	t.Helper()
	if len(cmds) < 5 {
		t.Fatalf("README's fleet section has %d commands after the first run, want the jsonl run, report FILE, report JOB_ID, the run over the bound and its report", len(cmds))
	}
	dir := t.TempDir()
	var jobID string
	for _, args := range cmds {
		args = append([]string(nil), args...)
		for i := range args {
			switch {
			case i > 0 && args[i-1] == "--nats":
				args[i] = url
			case i > 0 && args[i-1] == "--output", i == 2 && args[1] == "report" && strings.HasSuffix(args[i], ".jsonl"):
				args[i] = filepath.Join(dir, args[i])
			case args[i] == "JOB_ID":
				args[i] = jobID
			}
		}
		r := runADK(t, repoRoot(t), nil, args...)
		if r.code != exitOK {
			t.Fatalf("adk %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
		if args[1] == "run" && slices.Contains(args, "--max-report-bytes") {
			// Over the bound: the local report, from the job's stream,
			// which is kept beside --output.
			if r.stdout != localMarkdown || !strings.Contains(r.stderr, "kept as ") {
				t.Fatalf("adk %s: stderr %q\n%s", strings.Join(args, " "), r.stderr, r.stdout)
			}
		}
		if args[1] == "run" {
			jobID = lastClusterJob(t, url)
			// The stream file renders as the local report.
			out := runCLI(t, exitOK, "eval", "report", filepath.Join(dir, "fleet.jsonl"), "--format", "markdown")
			if out != localMarkdown {
				t.Fatalf("the fleet's jsonl renders differently from the local run:\n%s", out)
			}
		}
		if args[1] == "report" && slices.Contains(args, "markdown") && r.stdout != localMarkdown {
			t.Fatalf("adk %s:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "fleet.junit.xml")); err != nil || !bytes.Contains(b, []byte("<testsuite")) {
		t.Fatalf("fleet.junit.xml: %v\n%.500s", err, b)
	}
}

// lastClusterJob is the id of the newest job in the default scope.
func lastClusterJob(t *testing.T, url string) string {
	t.Helper()
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs, err := client.New(nc, 10*time.Second).ListJobs(ctx, "default", 50, "")
	if err != nil || len(jobs.Items) == 0 {
		t.Fatalf("jobs: %+v %v", jobs, err)
	}
	last := jobs.Items[0]
	for _, j := range jobs.Items {
		if j.CreatedAt > last.CreatedAt {
			last = j
		}
	}
	return last.JobID
}
