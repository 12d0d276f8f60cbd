package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/settings"
	"github.com/fadcedab/adk/store/tracenode"
)

// startTracedCluster runs `adk serve` in-process with the travel agent and
// a tokens file (tok-team → principal team, tok-other → other).
func startTracedCluster(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(tracenode.HashToken("tok-team")+" team\n"+tracenode.HashToken("tok-other")+" other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	urlc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{dataDir: filepath.Join(dir, "data"), host: "127.0.0.1", port: -1, tokensFile: tokens,
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

type tracePage struct {
	Events []struct {
		Event struct {
			TraceID    string         `json:"trace_id"`
			Attributes map[string]any `json:"attributes"`
		} `json:"event"`
	} `json:"events"`
	Truncated bool `json:"truncated"`
}

func traceQuery(t *testing.T, url, token string, args ...string) tracePage {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append([]string{"trace", "query", "--server", url, "--token", token}, args...), &out, &errb); code != exitOK {
		t.Fatalf("trace query %v: exit %d: %s", args, code, errb.String())
	}
	var p tracePage
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClusterEvalTraces_QueryByJobFromASecondStoreNode(t *testing.T) {
	url := startTracedCluster(t)
	// A second store node on the same stream: the query may be answered
	// by either, and both must have every span.
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- runStoreNode(ctx, nc, t.TempDir(), "second", tracenode.NewTokens(map[string]string{"tok-team": "team", "tok-other": "other"}),
			settings.Defaults().Store.Options(), slog.New(slog.DiscardHandler), settings.Defaults().Log.SignalWarnInterval.D(), func(*tracenode.Node) bool { close(ready); return true })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	<-ready

	res := runCLI(t, exitOK, "eval", "run", "--cluster", url, "--scope", "team", "--agent", "travel", "--eval-set", travelSet, "--criteria", travelCriteria, "--samples", "2")
	var doc map[string]any
	if err := json.Unmarshal([]byte(res), &doc); err != nil {
		t.Fatal(err)
	}
	samples, traces := sampleTraces(t, doc)
	var page struct {
		Items []struct {
			JobID string `json:"job_id"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(runCLI(t, exitOK, "eval", "jobs", "--cluster", url, "--scope", "team")), &page); err != nil || len(page.Items) != 1 {
		t.Fatalf("jobs: %v", err)
	}
	job := page.Items[0].JobID

	// Every sample's spans arrive under the job's principal, with the
	// job, case, sample and worker ids; both nodes answer alike.
	testutil.WaitFor(t, 20*time.Second, "every sample's spans on both nodes", func() bool {
		for range 4 {
			got := map[string]bool{}
			p := traceQuery(t, url, "tok-team", "--job", job)
			for _, e := range p.Events {
				if e.Event.TraceID == "" {
					continue // a v1 envelope: its ids are in metadata
				}
				if e.Event.Attributes["adk.eval.worker_id"] != serveWorkerID || e.Event.Attributes["adk.eval.job_id"] != job {
					t.Fatalf("span attributes %v", e.Event.Attributes)
				}
				if s, _ := e.Event.Attributes["adk.eval.sample_id"].(string); s != "" && e.Event.TraceID != "" {
					got[s+"/"+e.Event.TraceID] = true
				}
			}
			if len(got) != samples {
				return false
			}
		}
		return true
	})
	// The result's trace ids resolve.
	for tid := range traces {
		if p := traceQuery(t, url, "tok-team", "--trace-id", tid); len(p.Events) == 0 {
			t.Errorf("trace %s of the result has no events", tid)
		}
	}
	// Another principal sees none of it, by job or by trace.
	if p := traceQuery(t, url, "tok-other", "--job", job); len(p.Events) != 0 {
		t.Fatalf("principal other sees %d of team's events", len(p.Events))
	}
	for tid := range traces {
		if p := traceQuery(t, url, "tok-other", "--trace-id", tid); len(p.Events) != 0 {
			t.Fatalf("principal other sees team's trace")
		}
		break
	}

	// A local run sends its traces into the cluster with --trace-to, under
	// --scope; the trace ids of its result resolve there.
	local := runCLI(t, exitOK, "eval", "run", "--config", travelAgent, "--eval-set", travelSet, "--criteria", travelCriteria, "--trace-to", url, "--scope", "team")
	if err := json.Unmarshal([]byte(local), &doc); err != nil {
		t.Fatal(err)
	}
	_, localTraces := sampleTraces(t, doc)
	for tid := range localTraces {
		testutil.WaitFor(t, 10*time.Second, "the local run's trace in the cluster", func() bool {
			return len(traceQuery(t, url, "tok-team", "--trace-id", tid).Events) > 0
		})
	}
}

func TestEvalRun_TraceToUnreachableClusterKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	r, _ := travelEval(t, nil, "--trace-to", "nats://127.0.0.1:1", "--trace-drain", "200ms")
	if r.code != exitOK || !strings.Contains(r.stderr, "signals not published to --trace-to") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	r, _ = travelEval(t, nil, "--trace-to", "nats://127.0.0.1:1", "--scope", "a.b")
	if r.code != exitError || !strings.Contains(r.stderr, "invalid_trace_target") {
		t.Fatalf("bad scope: exit %d stderr %q", r.code, r.stderr)
	}
}
