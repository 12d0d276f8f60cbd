package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// adkBinary builds cmd/adk once per test process.
func adkBinary(t *testing.T) string {
	t.Helper()
	return testutil.Binary(t, "../../cmd/adk")
}

// telemetrygenForTest finds a telemetrygen binary without downloading one:
// $ADK_TELEMETRYGEN, the repository's bin/telemetrygen (where the
// benchmark installs it), or PATH.
func telemetrygenForTest(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ADK_TELEMETRYGEN"); p != "" {
		return p
	}
	if p, err := filepath.Abs("../../bin/telemetrygen"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("telemetrygen"); err == nil {
		return p
	}
	t.Skip("telemetrygen not found ($ADK_TELEMETRYGEN, bin/telemetrygen or PATH); `go run ./bench/otlpbench` installs it into bin/")
	return ""
}

// TestRun_ShortLoadIsStoredAndAccountedFor runs the benchmark's core for
// two seconds against a freshly built adk: every span the receiver
// accepted is exported to the stream and stored, the probes become
// queryable, and the CPU and disk figures are there.
func TestRun_ShortLoadIsStoredAndAccountedFor(t *testing.T) {
	tg := telemetrygenForTest(t)
	adk := adkBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := Run(ctx, Config{ADK: adk, Telemetrygen: tg, Procs: 1, Workers: 1, Rate: 2000, BatchSize: 100,
		Duration: 2 * time.Second, Idle: 200 * time.Millisecond, ProbeInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	accepted := r.Receiver["spans_accepted"]
	switch {
	case r.GeneratedSpans == 0 || accepted == 0:
		t.Fatalf("generated %d, accepted %d", r.GeneratedSpans, accepted)
	case r.Bus["exported"] != accepted:
		t.Errorf("bus exported %d of %d accepted spans", r.Bus["exported"], accepted)
	case r.StoredSpans() != accepted || uint64(r.Store.Events) != accepted:
		t.Errorf("stored %d (%d live) of %d accepted spans", r.StoredSpans(), r.Store.Events, accepted)
	case len(r.Lags) == 0 || r.ProbesFailed > 0:
		t.Errorf("probes: %d measured, %d failed", len(r.Lags), r.ProbesFailed)
	case r.ADKCPU <= 0 || r.TGCPU <= 0 || r.TracesDisk <= 0 || r.NATSDisk <= 0:
		t.Errorf("cpu adk %v tg %v, disk traces %d nats %d", r.ADKCPU, r.TGCPU, r.TracesDisk, r.NATSDisk)
	case r.PeakRSS <= 0 || r.PeakRssAnon <= 0 || r.PeakRSS < r.PeakRssAnon:
		t.Errorf("peak RSS %d, RssAnon %d", r.PeakRSS, r.PeakRssAnon)
	case r.IngestWall < r.GenWall:
		t.Errorf("ingestion wall %v shorter than generation wall %v", r.IngestWall, r.GenWall)
	case r.Queries == nil || len(r.Queries.TraceByID) == 0 || r.Queries.TraceSpans < len(r.Queries.TraceByID)/queryRounds ||
		len(r.Queries.ByRun) != queryRounds*r.ProbeSpans:
		t.Errorf("query latency: %+v (%d probes)", r.Queries, r.ProbeSpans)
	}
	var out bytes.Buffer
	printReport(&out, []*Result{r})
	for _, want := range []string{"SUSTAINED STORED SPANS/S", "ADK CPU µs / STORED SPAN", "DISK B / LIVE SPAN", "PEAK RSS", "visibility lag", "reference", "trace by id", "run_id search"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestProcCPU_ReadsThisProcess(t *testing.T) {
	busy := time.Now().Add(30 * time.Millisecond)
	for time.Now().Before(busy) { // burn some CPU so utime is non-zero
	}
	d, err := procCPU(os.Getpid())
	if err != nil {
		t.Skip(err) // not Linux
	}
	if d <= 0 {
		t.Fatalf("cpu %v", d)
	}
}

func TestLabelledAndQuantile(t *testing.T) {
	m := map[string]float64{
		`adk_otlp_receiver_events_total{outcome="spans_accepted"}`: 7,
		`adk_observability_bus_events_total{counter="exported"}`:   7,
		`adk_observability_bus_queue_events`:                       0,
	}
	if got := labelled(m, "adk_otlp_receiver_events_total", "outcome"); len(got) != 1 || got["spans_accepted"] != 7 {
		t.Fatalf("labelled: %v", got)
	}
	l := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if q := quantile(l, 0.5); q != 5 {
		t.Errorf("p50 %v", q)
	}
	if q := quantile(l, 0.99); q != 10 {
		t.Errorf("p99 %v", q)
	}
}

// TestRun_ReplayLoad: every span the replay generator posts is received,
// and every accepted one is stored.
func TestRun_ReplayLoad(t *testing.T) {
	adk := adkBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := Run(ctx, Config{ADK: adk, Load: LoadReplay, Procs: 1, Workers: 2, BatchSize: 64, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.GeneratedSpans == 0 || r.Receiver["spans_received"] != r.GeneratedSpans || r.StoredSpans() != r.Receiver["spans_accepted"] {
		t.Fatalf("generated %d, received %d, accepted %d, stored %d", r.GeneratedSpans, r.Receiver["spans_received"], r.Receiver["spans_accepted"], r.StoredSpans())
	}
	if r.Queries == nil || len(r.Queries.TraceByID) == 0 || r.Queries.TraceSpans == 0 {
		t.Fatalf("query latency: %+v", r.Queries)
	}
}
