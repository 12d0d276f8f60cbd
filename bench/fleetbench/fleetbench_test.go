package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// buildBinaries builds adk and openaifake once per test process.
func buildBinaries(t *testing.T) (adk, fake string) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the binaries with")
	}
	return testutil.Binary(t, "../../cmd/adk"), testutil.Binary(t, "../openaifake")
}

// TestClusterFleetbench_SmallFleet runs the harness end to end on the
// smallest fleet (one coordinator, one worker of capacity 4, a 10 ms
// fake): both kinds of job complete and every figure is filled in.
func TestClusterFleetbench_SmallFleet(t *testing.T) {
	adk, fake := buildBinaries(t)
	cfg := benchConfig{
		fleet:    fleetConfig{adk: adk, fake: fake, dir: t.TempDir(), delay: 10 * time.Millisecond, coordinators: 1, capacity: 4, signals: true},
		counts:   []int{1},
		rounds:   2,
		rssTasks: 40,
		idle:     100 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, idle, err := run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].tasks != 8 || rows[1].tasks != 40 {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if r.workers != 1 || r.leader != "c1" || r.errors != 0 || r.wall <= 0 || r.peakRSS <= 0 || r.rssAfter <= 0 || r.peakHeap <= 0 {
			t.Errorf("row %+v", r)
		}
		// One model call per task, over pooled connections: at most one
		// per run slot.
		if r.modelCalls != r.tasks || r.newConns > cfg.fleet.capacity {
			t.Errorf("%s: %d model calls for %d tasks over %d new connections", r.name, r.modelCalls, r.tasks, r.newConns)
		}
		// The workers' traces land in ADK_SIGNALS, as in a real fleet.
		if r.signalMsgs == 0 {
			t.Errorf("%s: no signal batches stored", r.name)
		}
		roles := map[string]bool{}
		for _, c := range r.cpu {
			roles[c.role] = true
		}
		if !roles["leader"] || !roles["worker"] || !roles["fake"] || len(r.cpu) != 3 {
			t.Errorf("cpu of %s: %+v", r.name, r.cpu)
		}
	}
	// The idle line names every process: leader, worker, fake, driver.
	if len(idle) != 4 {
		t.Errorf("idle cpu %+v", idle)
	}
	var out bytes.Buffer
	printTables(&out, cfg, rows)
	printIdle(&out, cfg.idle, idle)
	for _, want := range []string{"| scaling    |       1 |      8 |", "| leader-rss |       1 |     40 |", "worker w1", "Idle CPU over 100ms", "leader c1 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestProcStat_ReadsThisProcess(t *testing.T) {
	// Spend a little CPU so utime is at least one tick.
	deadline := time.Now().Add(30 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	cpu, err := cpuTime(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Fatalf("cpu %v, err %v", cpu, err)
	}
	m, err := readMemory(os.Getpid())
	if err != nil || m.rss <= 0 || m.hwm < m.rss {
		t.Fatalf("memory %+v, err %v", m, err)
	}
	if err := resetPeakRSS(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := cpuTime(1 << 30); err == nil {
		t.Fatal("a pid that does not exist has a CPU time")
	}
}

// TestFakeStats_ErrorSaysWhy: a /stats call that times out names how
// long it took, the fake's state and the load, so a lost row tells a slow
// fake from a dead one.
func TestFakeStats_ErrorSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() { // accepts and never answers
		if c, err := ln.Accept(); err == nil {
			held <- c
		}
	}()
	defer func() {
		select {
		case c := <-held:
			c.Close()
		default:
		}
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	f := &fleet{fakeURL: ln.Addr().String(), http: &http.Client{Transport: tr, Timeout: 100 * time.Millisecond}}
	_, err = f.fakeStats(context.Background())
	if err == nil {
		t.Fatal("no error from a fake that never answers")
	}
	for _, want := range []string{"openaifake stats after ", "(fake not started, load ", "Client.Timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
