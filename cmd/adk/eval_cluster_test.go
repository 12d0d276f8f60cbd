package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	travelAgent    = "../../examples/travel/AGENT.json"
	travelSet      = "../../examples/travel/evalset.json"
	travelCriteria = "../../examples/travel/criteria.json"
)

// startEvalCluster runs what `adk serve` embeds for evals (NATS with
// JetStream on a random loopback port, the one-node coordinator, a worker
// trusted with the travel agent) and returns the client URL.
func startEvalCluster(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	srv, err := bus.StartServer(bus.ServerConfig{Name: "adk-test", StoreDir: filepath.Join(dir, "nats"), Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := bus.WaitJetStreamReady(ctx, js); err != nil {
		t.Fatal(err)
	}
	ev, err := startServeEval(srv, dir, serveEvalOptions{agents: []string{"travel=" + travelAgent}, raftAddr: "127.0.0.1:0", capacity: 4},
		io.Discard, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ev.stop)
	return srv.ClientURL()
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
