package coordinator

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
)

// gatedLog is the real Raft log store (raft-wal) whose writes wait while
// the gate is shut: Raft's leader loop, which writes the log itself, then
// cannot take an apply out of its queue.
type gatedLog struct {
	raft.LogStore
	mu      sync.Mutex
	shut    bool
	open    chan struct{}
	entered chan struct{} // closed when a write first waits at the shut gate
	once    sync.Once
}

func (g *gatedLog) wait() {
	g.mu.Lock()
	shut, open := g.shut, g.open
	g.mu.Unlock()
	if shut {
		g.once.Do(func() { close(g.entered) })
		<-open
	}
}

func (g *gatedLog) StoreLog(l *raft.Log) error     { g.wait(); return g.LogStore.StoreLog(l) }
func (g *gatedLog) StoreLogs(ls []*raft.Log) error { g.wait(); return g.LogStore.StoreLogs(ls) }
func (g *gatedLog) IsMonotonic() bool              { return true }

// goroutines returns every goroutine's stack.
func goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// count returns how many goroutines have fn in their stack.
func count(fn string) int {
	n := 0
	for _, g := range goroutines() {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// stopWaitsForGoroutines reports whether Node.Stop itself (not a service
// it stops) waits in WaitGroup.Wait.
func stopWaitsForGoroutines() bool {
	for _, g := range goroutines() {
		lines := strings.Split(g, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "sync.(*WaitGroup).Wait(") && i+2 < len(lines) &&
				strings.HasPrefix(lines[i+2], "github.com/fadcedab/adk/coordinator.(*Node).stop(") {
				return true
			}
		}
	}
	return false
}

// TestNodeStop_AnswersAppliesQueuedInRaft is the regression test of a
// Stop that hung for ever (session 10, h17i): with BatchApplyCh, an apply
// still in Raft's apply queue when Raft shuts down is never answered
// (hashicorp/raft's logFuture has no shutdown channel), so a Stop that
// shut Raft down before waiting for its own goroutines waited for ever
// for the one blocked on that apply. Here the leader's log write is held
// (the real raft-wal behind a gate) so that Raft's leader loop cannot
// take the next apply, a forwarded write's apply is queued behind it,
// and the gate opens only once Stop is under way: when Raft has been
// shut down (the old order) or Stop waits for its goroutines (the fixed
// order, Raft still running). Stop must return.
func TestNodeStop_AnswersAppliesQueuedInRaft(t *testing.T) {
	gate := &gatedLog{open: make(chan struct{}), entered: make(chan struct{})}
	raftLogStoreWrap = func(s raft.LogStore) raft.LogStore { gate.LogStore = s; return gate }
	defer func() { raftLogStoreWrap = nil }()
	var release sync.Once
	openGate := func() { release.Do(func() { close(gate.open) }) }
	defer openGate()

	srv := bustest.Start(t, bus.ServerConfig{})
	n := startOneNode(t, srv)
	stopped := make(chan struct{})
	stopping := false
	defer func() {
		if !stopping {
			n.Stop()
		}
	}()
	testutil.WaitFor(t, 20*time.Second, "a leader", n.IsLeader)

	// Shut the gate; the leader's next log write (its own lease renewal,
	// or the first forwarded write) holds Raft's leader loop.
	lease := func() {
		b, err := encodeCmd(cmdLease, &leaseCmd{Lease: evalrecord.Lease{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.NC.PublishRequest(forwardSubject("c0"), srv.NC.NewInbox(), b); err != nil {
			t.Fatal(err)
		}
	}
	gate.mu.Lock()
	gate.shut = true
	gate.mu.Unlock()
	lease()
	select {
	case <-gate.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no log write reached the gate")
	}
	// A forwarded write now queues its apply in Raft: its goroutine (one
	// of the node's) waits for an answer only Raft's leader loop gives.
	before := count("coordinator.(*Node).applyLocal(")
	lease()
	testutil.WaitFor(t, 20*time.Second, "an apply queued behind the held write", func() bool {
		return count("coordinator.(*Node).applyLocal(") > before
	})

	stopping = true
	go func() {
		defer close(stopped)
		n.Stop()
	}()
	testutil.WaitFor(t, 20*time.Second, "Stop under way (Raft shut down, or Stop waiting for its goroutines)", func() bool {
		return n.raft.State() == raft.Shutdown || stopWaitsForGoroutines()
	})
	openGate()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		var b bytes.Buffer
		for _, g := range goroutines() {
			if strings.Contains(g, "coordinator.(*Node)") {
				b.WriteString(g + "\n\n")
			}
		}
		t.Fatalf("Stop did not return: an apply queued in Raft at its shutdown is never answered\n%s", b.String())
	}
}

// startOneNode starts coordinator c0 alone, bootstrapping a cluster of
// one on srv. The caller stops it.
func startOneNode(t *testing.T, srv *bustest.Server) *Node {
	t.Helper()
	n, err := Start(Config{ID: "c0", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: true, NATS: srv.NC,
		Workers: []string{"w0"}, Streams: bus.TaskStreamConfig{Replicas: 1}, MemTableSize: 16 << 20,
		Timing: Timing{RaftHeartbeat: 300 * time.Millisecond, RaftLeaderLease: 150 * time.Millisecond, Tick: 20 * time.Millisecond,
			LeaseInterval: 200 * time.Millisecond, FenceLease: 1500 * time.Millisecond, WorkerTTL: time.Second,
			DispatchGrace: 2 * time.Second, TaskAckWait: 2 * time.Second, ResultAckWait: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Stop may be called more than once, from more than one goroutine: every
// call returns once the node is stopped. Before, a second call closed the
// service's quit channel again and panicked.
func TestNodeStop_MoreThanOnce(t *testing.T) {
	srv := bustest.Start(t, bus.ServerConfig{})
	n := startOneNode(t, srv)
	testutil.WaitFor(t, 20*time.Second, "a serving leader", n.Serving)
	var wg sync.WaitGroup
	panics := make(chan any, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					panics <- p
				}
			}()
			n.Stop()
		}()
	}
	wg.Wait()
	close(panics)
	for p := range panics {
		t.Errorf("a concurrent Stop panicked: %v", p)
	}
	n.Stop() // and once more after the others returned
	if n.raft.State() != raft.Shutdown {
		t.Fatalf("raft state after Stop: %v, want Shutdown", n.raft.State())
	}
}
