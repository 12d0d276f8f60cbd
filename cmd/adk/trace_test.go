package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/settings"
	"github.com/fadcedab/adk/store/tracenode"
)

// startServe runs `adk serve` in-process on a random port with one token
// and returns its URL; the test's cleanup stops it.
func startServe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(tracenode.HashToken("tok-alice")+" alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	urlc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{dataDir: filepath.Join(dir, "data"), host: "127.0.0.1", port: -1, tokensFile: tokens,
			ready: func(u string) { urlc <- u }}, &bytes.Buffer{})
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
	case <-time.After(20 * time.Second):
		t.Fatal("serve not ready")
	}
	return ""
}

func publishSpans(t *testing.T, url string, n int) {
	t.Helper()
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p, err := bus.NewPublisher(nc, bus.PublisherConfig{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range n {
		if err := p.Enqueue(&observability.SpanSignal{Schema: 2, Signal: "span", Phase: "start", Name: "gen_ai.chat", Kind: "client",
			TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: fmt.Sprintf("%016x", i+1), TraceFlags: 1, StartTimeUnixNano: 1e9,
			Attributes: observability.Attributes{"run_id": "r1"}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestServeAndTraceQuery(t *testing.T) {
	url := startServe(t)
	publishSpans(t, url, 3)

	var page struct {
		Events []struct {
			Cursor uint64 `json:"cursor"`
		} `json:"events"`
		NextCursor uint64 `json:"next_cursor"`
		Schema     int    `json:"schema_version"`
	}
	testutil.WaitFor(t, 10*time.Second, "three events queryable", func() bool {
		var out, errb bytes.Buffer
		if code := run([]string{"trace", "query", "--server", url, "--token", "tok-alice", "--run-id", "r1"}, &out, &errb); code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		if err := json.Unmarshal(out.Bytes(), &page); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return len(page.Events) == 3
	})
	if page.Schema != 1 {
		t.Fatalf("page %+v", page)
	}

	var out, errb bytes.Buffer
	code := run([]string{"trace", "query", "--server", url, "--token", "tok-alice", "--run-id", "r1", "--after", fmt.Sprint(page.Events[0].Cursor), "--limit", "1", "--format", "table"}, &out, &errb)
	if code != exitOK || !strings.Contains(out.String(), "gen_ai.chat") || !strings.Contains(out.String(), "truncated true") || strings.Count(out.String(), "observability") != 1 {
		t.Fatalf("table: exit %d\n%s%s", code, out.String(), errb.String())
	}

	out.Reset()
	errb.Reset()
	if code := run([]string{"trace", "query", "--server", url, "--token", "wrong"}, &out, &errb); code != exitError || !strings.Contains(errb.String(), "trace_unauthenticated") {
		t.Fatalf("bad token: exit %d %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"trace", "query", "--server", url, "--token", "tok-alice", "--after", "99999999999"}, &out, &errb); code != exitError || !strings.Contains(errb.String(), "cursor_ahead") {
		t.Fatalf("cursor ahead: exit %d %s", code, errb.String())
	}

	// tail: the window, then new events as they arrive.
	f := &traceFlags{token: "tok-alice", runID: "r1", format: "json", interval: 20 * time.Millisecond, timeout: 5 * time.Second}
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	w := &testutil.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- tail(ctx, w, f, func(ctx context.Context, req tracenode.QueryRequest) (*tracenode.QueryReply, error) {
			return tracenode.Query(ctx, nc, req)
		})
	}()
	testutil.WaitFor(t, 10*time.Second, "tail prints the window", func() bool { return strings.Count(w.String(), "\n") == 3 })
	publishSpans(t, url, 2)
	testutil.WaitFor(t, 10*time.Second, "tail follows", func() bool { return strings.Count(w.String(), "\n") == 5 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestStoreNodeAgainstExternalNATS(t *testing.T) {
	url := startServe(t)
	var out, errb bytes.Buffer
	if code := run([]string{"store", "--server", url}, &out, &errb); code != exitError || !strings.Contains(errb.String(), "--data-dir") {
		t.Fatalf("missing data dir: exit %d %s", code, errb.String())
	}
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- runStoreNode(ctx, nc, t.TempDir(), "second", tracenode.NewTokens(map[string]string{"tok-alice": "alice"}),
			settings.Defaults().Store.Options(), slog.New(slog.DiscardHandler), settings.Defaults().Log.SignalWarnInterval.D(), func(*tracenode.Node) bool { close(ready); return true })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("store node: %v", err)
	}
	publishSpans(t, url, 2)
	// Both nodes answer in the queue group; every answer is complete.
	testutil.WaitFor(t, 10*time.Second, "both nodes applied", func() bool {
		for range 4 {
			var out, errb bytes.Buffer
			if run([]string{"trace", "query", "--server", url, "--token", "tok-alice", "--run-id", "r1", "--format", "table"}, &out, &errb) != exitOK ||
				strings.Count(out.String(), "observability") != 2 {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
