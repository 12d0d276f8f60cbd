package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/settings"
	"github.com/fadcedab/adk/store/tracenode"
)

// TestStoreMetrics_ExportTheGapAndIdleCheckCounters runs a real store node
// and reads its /metrics as a scraper does: the delivery gaps and the idle
// checks are there, and the idle checks count up once the node is idle,
// never past the node's own Stats.
func TestStoreMetrics_ExportTheGapAndIdleCheckCounters(t *testing.T) {
	url := startServe(t)
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	reg := devapi.NewRegistry()
	ready := make(chan *tracenode.Node, 1)
	done := make(chan error, 1)
	go func() {
		done <- runStoreNode(ctx, nc, t.TempDir(), "metrics", tracenode.NewTokens(map[string]string{"tok-alice": "alice"}),
			settings.Defaults().Store.Options(), slog.New(slog.DiscardHandler), settings.Defaults().Log.SignalWarnInterval.D(),
			func(n *tracenode.Node) bool { register(reg, storeCollectors(n)); ready <- n; return true })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("store node: %v", err)
		}
	}()
	var node *tracenode.Node
	select {
	case node = <-ready:
	case err := <-done:
		t.Fatalf("store node: %v", err)
	}
	ops := httptest.NewServer(devapi.OpsHandler(devapi.OpsOptions{Gatherer: reg}))
	defer ops.Close()
	addr := strings.TrimPrefix(ops.URL, "http://")

	resp, err := http.Get(ops.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{
		"# HELP adk_store_delivery_gaps_total ", "# TYPE adk_store_delivery_gaps_total counter",
		"# HELP adk_store_idle_checks_total ", "# TYPE adk_store_idle_checks_total counter",
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, text)
		}
	}
	// The node applies nothing here, so its watcher asks for an idle
	// check within a tick or two (store/DESIGN.md, "A lost last delivery").
	var got float64
	testutil.WaitFor(t, 30*time.Second, "an idle check on /metrics", func() bool {
		v, ok := promSum(addr, "adk_store_idle_checks_total")
		got = v
		return ok && v >= 1
	})
	if s := node.Stats(); got > float64(s.IdleChecks) {
		t.Fatalf("adk_store_idle_checks_total %v, more than the node's idle_checks %d", got, s.IdleChecks)
	}
}
