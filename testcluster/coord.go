package testcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/fadcedab/adk/worker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EvalOptions size an eval cluster. Zero fields take the defaults below.
type EvalOptions struct {
	NATSNodes    int // default 3
	Coordinators int // default 3
	// Workers are the allowlisted worker ids (default w0..w3).
	Workers []string
	// Rogue workers have NATS credentials but are not on the allowlist.
	Rogue    []string
	Capacity int // per worker, default 4
	// Agent is every worker's "scripted" agent (default a zero-latency one).
	Agent *ScriptedAgent
	// AgentFiles are more trusted agents of every worker: name to
	// AGENT.json path (worker.Config.AgentFiles).
	AgentFiles map[string]string
	Limits     coordinator.Limits
	Timing     coordinator.Timing
	// StoreLimits are each coordinator's eval-store quotas.
	StoreLimits evalstore.Limits
	// ResultDocuments makes the coordinators complete jobs with a result
	// document, the form before results as records (coordinator.Config).
	ResultDocuments bool
	// HeartbeatInterval, FenceAfter and ResultWindow for workers.
	HeartbeatInterval, FenceAfter, ResultWindow time.Duration
	// MemTableSize for each coordinator's Badger (default 16 MiB; a
	// stored result must fit in 15% of it).
	MemTableSize int64
	// Logger receives coordinator and worker logs (default: discarded).
	Logger *slog.Logger
	// Signals makes workers trace every task into ADK_SIGNALS (created at
	// start) through a publisher pool on their own restricted connection,
	// as adk worker does.
	Signals bool
	// SignalReplicas of ADK_SIGNALS: 0 is 3 on a 3-node NATS cluster (1
	// otherwise); the product's default, signals.replicas, is 1.
	SignalReplicas int
	// TrailingLogs is coordinator.Config.TrailingLogs: lowered, a
	// coordinator that was stopped catches up by installing a snapshot.
	TrailingLogs uint64
	// CoordWithoutOps is coordinator.Config.WithoutOps of every
	// coordinator: the cluster's coordinators then stand in for an
	// earlier build's, which has no responder for operations added since.
	CoordWithoutOps []string
	// ResultTails is coordinator.Config.ResultTails of every coordinator
	// (empty: the default, at completion).
	ResultTails coordinator.ResultTails
}

// Test defaults: small timeouts sized for a 2-core machine. DispatchGrace
// counts from when a task left its worker's queue (a delivery stalled
// under the race detector on two loaded cores is not lost), and workers
// report a task from the moment it is handed to them.
var testTiming = coordinator.Timing{
	RaftHeartbeat: 300 * time.Millisecond, RaftLeaderLease: 150 * time.Millisecond,
	Tick: 20 * time.Millisecond, LeaseInterval: 200 * time.Millisecond, FenceLease: 1500 * time.Millisecond,
	WorkerTTL: time.Second, DispatchGrace: 2 * time.Second, TaskAckWait: 2 * time.Second,
	ResultAckWait: 2 * time.Second,
}

// The coordinator's NATS user (unrestricted), for tests that inspect
// streams.
const (
	CoordUser     = "coord"
	CoordPassword = "coord-secret"
)

const (
	coordUser     = CoordUser
	coordPassword = CoordPassword
	workerSecret  = "worker-secret-"
)

// EvalCluster is NATS + Raft coordinators + workers in one process.
type EvalCluster struct {
	t      testing.TB
	opts   EvalOptions
	NATS   *NATSCluster
	Agent  *ScriptedAgent
	mu     sync.Mutex
	coords []*CoordNode
	wks    []*WorkerNode
}

// CoordNode is one coordinator slot; Node is nil while it is stopped.
type CoordNode struct {
	ID   string
	Dir  string
	Addr string
	Node *coordinator.Node
	nc   *nats.Conn
}

// WorkerNode is one worker slot; W is nil while it is stopped.
type WorkerNode struct {
	ID   string
	W    *worker.Worker
	nc   *nats.Conn
	pool *bus.PublisherPool // with EvalOptions.Signals
}

// StartEval starts the NATS cluster (with per-worker users), the
// coordinators (node 0 bootstraps, the others join) and the workers, and
// waits until a leader serves (WaitServing). Everything stops in
// t.Cleanup.
func StartEval(t testing.TB, o EvalOptions) *EvalCluster {
	t.Helper()
	if o.NATSNodes == 0 {
		o.NATSNodes = 3
	}
	if o.Coordinators == 0 {
		o.Coordinators = 3
	}
	if o.Workers == nil {
		o.Workers = []string{"w0", "w1", "w2", "w3"}
	}
	if o.Capacity == 0 {
		o.Capacity = 4
	}
	if o.Agent == nil {
		o.Agent = &ScriptedAgent{}
	}
	if o.Timing == (coordinator.Timing{}) {
		o.Timing = testTiming
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = 16 << 20
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = 100 * time.Millisecond
	}
	if o.FenceAfter == 0 {
		o.FenceAfter = o.Timing.FenceLease
	}
	users := []bus.User{{Name: coordUser, Password: coordPassword}}
	for _, w := range append(append([]string{}, o.Workers...), o.Rogue...) {
		users = append(users, bus.WorkerPermissions(w, workerSecret+w))
	}
	c := &EvalCluster{t: t, opts: o, Agent: o.Agent}
	// Directories first: cleanups run last-in first-out, so every
	// coordinator is stopped before its Raft and Badger directory goes.
	for i := range o.Coordinators {
		c.coords = append(c.coords, &CoordNode{ID: "c" + strconv.Itoa(i), Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	}
	c.NATS = StartNATS(t, o.NATSNodes, WithUsers(users...))
	t.Cleanup(c.stopAll)
	if o.Signals {
		c.ensureSignalStream()
	}
	c.StartCoordinator(0, true)
	c.WaitLeader(10 * time.Second)
	for i := 1; i < o.Coordinators; i++ {
		c.StartCoordinator(i, false)
		cn := c.coords[i]
		// Leadership can move under load while the cluster forms: join
		// through whoever leads (AddVoter is idempotent).
		var err error
		testutil.WaitFor(t, 10*time.Second, "join "+cn.ID, func() bool {
			l := c.LeaderIndex()
			if l < 0 {
				return false
			}
			if n := c.Coordinator(l); n != nil {
				err = n.Join(cn.ID, cn.Addr)
			}
			return err == nil
		})
	}
	for _, w := range append(append([]string{}, o.Workers...), o.Rogue...) {
		c.wks = append(c.wks, &WorkerNode{ID: w})
		c.StartWorker(len(c.wks) - 1)
	}
	c.WaitServing(servingBudget)
	return c
}

// servingBudget bounds how long a new cluster may take to serve
// (WaitServing). The first leader serves only once it has created the
// task streams and one consumer per worker, all R3 on three NATS nodes:
// under -race on a loaded 2-core machine clusters took up to ~9 s to come
// up (load 12-14, 2026-12-06), and a leader change during the set-up
// starts it over on the next leader. 30 s is three times the slowest seen.
const servingBudget = 30 * time.Second

// WaitServing waits up to d until a coordinator serves: it leads and has
// taken over (coordinator.Node.Serving), so it answers heartbeats and
// renews the lease. A job submitted before that can meet a leader change
// during the first leader's set-up, and the next leader then finds the
// lease older than the fence and fails the job
// evaluation_service_restarted (a full restart, by design): what a test
// then sees is the cluster forming, not what it tests.
func (c *EvalCluster) WaitServing(d time.Duration) {
	c.t.Helper()
	testutil.WaitFor(c.t, d, "a coordinator serving", func() bool {
		for i := range c.coords {
			if n := c.Coordinator(i); n != nil && n.Serving() {
				return true
			}
		}
		return false
	})
}

// ConnectCoord returns a connection with the unrestricted coordinator
// user, knowing every NATS node, closed by t.Cleanup.
func (c *EvalCluster) ConnectCoord() *nats.Conn {
	return c.NATS.ConnectAll(c.t, bus.WithUserPassword(coordUser, coordPassword))
}

// CoordURL is every NATS node's URL with the coordinator user's
// credentials, for a process started outside the test (a gateway binary).
func (c *EvalCluster) CoordURL() string {
	urls := c.NATS.URLs()
	for i, u := range urls {
		urls[i] = strings.Replace(u, "nats://", "nats://"+coordUser+":"+coordPassword+"@", 1)
	}
	return strings.Join(urls, ",")
}

// Client returns an API client on its own connection.
func (c *EvalCluster) Client() *client.Client { return client.New(c.ConnectCoord(), 10*time.Second) }

// StartCoordinator (re)starts coordinator i with its data dir and address.
func (c *EvalCluster) StartCoordinator(i int, bootstrap bool) *coordinator.Node {
	c.t.Helper()
	c.mu.Lock()
	cn := c.coords[i]
	c.mu.Unlock()
	nc := c.ConnectCoord()
	n, err := coordinator.Start(coordinator.Config{
		ID: cn.ID, DataDir: cn.Dir, RaftAddr: cn.Addr, Bootstrap: bootstrap, NATS: nc,
		Workers: c.opts.Workers, Streams: bus.TaskStreamConfig{Replicas: min(3, c.opts.NATSNodes), MaxBytes: 64 << 20}, Limits: c.opts.Limits,
		Timing: c.opts.Timing, MemTableSize: c.opts.MemTableSize, Logger: c.opts.Logger, StoreLimits: c.opts.StoreLimits,
		TrailingLogs: c.opts.TrailingLogs, ResultDocuments: c.opts.ResultDocuments, WithoutOps: c.opts.CoordWithoutOps,
		ResultTails: c.opts.ResultTails,
	})
	if err != nil {
		c.t.Fatalf("start coordinator %s: %v", cn.ID, err)
	}
	c.mu.Lock()
	cn.Node, cn.nc, cn.Addr = n, nc, n.RaftAddr()
	c.mu.Unlock()
	return n
}

// StopCoordinator stops coordinator i (its Raft peer goes silent).
func (c *EvalCluster) StopCoordinator(i int) {
	if i < 0 || i >= len(c.coords) {
		// Fail the test, not a panic under c.mu that deadlocks its clean-up.
		c.t.Fatalf("testcluster: StopCoordinator(%d): no such coordinator (0..%d)", i, len(c.coords)-1)
	}
	c.mu.Lock()
	cn := c.coords[i]
	n, nc := cn.Node, cn.nc
	cn.Node, cn.nc = nil, nil
	c.mu.Unlock()
	if n != nil {
		// A stop that hangs (seen once in a loaded benchmark, in
		// Node.Stop's wait for its own goroutines) leaves a dump of every
		// goroutine on stderr to diagnose it by.
		dump := time.AfterFunc(stopDumpAfter, func() {
			fmt.Fprintf(os.Stderr, "testcluster: coordinator %s still stopping after %s; goroutines:\n", cn.ID, stopDumpAfter)
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		})
		n.Stop()
		dump.Stop()
		nc.Close()
	}
}

// stopDumpAfter is how long a coordinator may take to stop before its
// goroutines are dumped.
const stopDumpAfter = 2 * time.Minute

// Coordinator returns coordinator i's node (nil while stopped).
func (c *EvalCluster) Coordinator(i int) *coordinator.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.coords[i].Node
}

// CoordDir returns coordinator i's data dir.
func (c *EvalCluster) CoordDir(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.coords[i].Dir
}

// CoordConn returns coordinator i's NATS connection (nil while stopped);
// closing it partitions the node from NATS while its Raft keeps running.
func (c *EvalCluster) CoordConn(i int) *nats.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.coords[i].nc
}

// LeaderIndex returns the index of the running leader, or -1.
func (c *EvalCluster) LeaderIndex() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, cn := range c.coords {
		if cn.Node != nil && cn.Node.IsLeader() {
			return i
		}
	}
	return -1
}

// Leader returns the leader node, waiting up to 10 s for one: on two
// loaded cores an election can be under way at any moment (fails the test
// if none appears).
func (c *EvalCluster) Leader() *coordinator.Node {
	c.t.Helper()
	return c.WaitLeader(10 * time.Second)
}

// WaitLeader waits up to d for a running leader and returns that node (the
// one seen leading, not a second lookup that an election could race).
func (c *EvalCluster) WaitLeader(d time.Duration) *coordinator.Node {
	c.t.Helper()
	var leader *coordinator.Node
	testutil.WaitFor(c.t, d, "a coordinator leader", func() bool {
		i := c.LeaderIndex()
		if i < 0 {
			return false
		}
		leader = c.Coordinator(i)
		return leader != nil
	})
	return leader
}

// StartWorker (re)starts worker i with its restricted credentials.
func (c *EvalCluster) StartWorker(i int) *worker.Worker {
	c.t.Helper()
	c.mu.Lock()
	wn := c.wks[i]
	c.mu.Unlock()
	nc := c.NATS.ConnectAll(c.t, bus.WithUserPassword(wn.ID, workerSecret+wn.ID),
		bus.WithNATSOptions(nats.CustomInboxPrefix(bus.WorkerInboxPrefix(wn.ID))))
	cfg := worker.Config{ID: wn.ID, NATS: nc, Capacity: c.opts.Capacity,
		Agents: map[string]evalengine.Adapter{"scripted": c.Agent}, AgentFiles: c.opts.AgentFiles,
		HeartbeatInterval: c.opts.HeartbeatInterval, FenceAfter: c.opts.FenceAfter, ResultWindow: c.opts.ResultWindow, Logger: c.opts.Logger}
	var pool *bus.PublisherPool
	if c.opts.Signals {
		pool = bus.NewPublisherPool(nc, bus.HighRatePublisherConfig(nil), 0)
		cfg.Signals = pool
	}
	w, err := worker.Start(cfg)
	if err != nil {
		c.t.Fatalf("start worker %s: %v", wn.ID, err)
	}
	c.mu.Lock()
	wn.W, wn.nc, wn.pool = w, nc, pool
	c.mu.Unlock()
	return w
}

// ConnectAsWorker opens a connection with worker i's credentials and
// permissions, for tests that speak the worker protocol by hand.
func (c *EvalCluster) ConnectAsWorker(i int) *nats.Conn {
	c.mu.Lock()
	id := c.wks[i].ID
	c.mu.Unlock()
	return c.NATS.ConnectAll(c.t, bus.WithUserPassword(id, workerSecret+id),
		bus.WithNATSOptions(nats.CustomInboxPrefix(bus.WorkerInboxPrefix(id))))
}

// StopWorker kills worker i: its tasks stop, its heartbeats end.
func (c *EvalCluster) StopWorker(i int) {
	c.mu.Lock()
	wn := c.wks[i]
	w, nc, pool := wn.W, wn.nc, wn.pool
	wn.W, wn.nc, wn.pool = nil, nil, nil
	c.mu.Unlock()
	if w != nil {
		w.Stop()
		if pool != nil {
			pool.Close()
		}
		nc.Close()
	}
}

// Worker returns worker i (allowlisted first, then rogue), nil if stopped.
func (c *EvalCluster) Worker(i int) *worker.Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wks[i].W
}

// WorkerConn returns worker i's restricted connection.
func (c *EvalCluster) WorkerConn(i int) *nats.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wks[i].nc
}

// Workers returns the number of worker slots.
func (c *EvalCluster) Workers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.wks)
}

func (c *EvalCluster) stopAll() {
	for i := range c.wks {
		c.StopWorker(i)
	}
	for i := range c.coords {
		c.StopCoordinator(i)
	}
}

// WaitJob polls status until the job reaches phase (or fails the test).
func (c *EvalCluster) WaitJob(cl *client.Client, scope, jobID string, d time.Duration, phases ...string) string {
	c.t.Helper()
	var last, reason string
	var lastErr error
	defer func() {
		if c.t.Failed() {
			c.t.Logf("job %s: last phase %q (reason %q), last status error %v", jobID, last, reason, lastErr)
		}
	}()
	testutil.WaitFor(c.t, d, fmt.Sprintf("job %s in %v", jobID, phases), func() bool {
		j, err := cl.Status(context.Background(), scope, jobID)
		if err != nil {
			lastErr = err
			return false
		}
		last, reason = string(j.Phase), j.Reason
		for _, p := range phases {
			if last == p {
				return true
			}
		}
		return false
	})
	return last
}

// SignalStats sums the publisher counters of every running worker
// (zero without EvalOptions.Signals).
func (c *EvalCluster) SignalStats() bus.PublisherStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum bus.PublisherStats
	for _, wn := range c.wks {
		if wn.pool == nil {
			continue
		}
		for _, s := range wn.pool.Stats() {
			sum.Accepted += s.Accepted
			sum.Exported += s.Exported
			sum.Rejected += s.Rejected
			sum.ExportFailed += s.ExportFailed
			sum.QueueEvents += s.QueueEvents
		}
	}
	return sum
}

// DrainSignals waits until every running worker's publishers have
// delivered (or accounted for) what they accepted, or ctx ends.
func (c *EvalCluster) DrainSignals(ctx context.Context) error {
	c.mu.Lock()
	var pools []*bus.PublisherPool
	for _, wn := range c.wks {
		if wn.pool != nil {
			pools = append(pools, wn.pool)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, p := range pools {
		errs = append(errs, p.Drain(ctx))
	}
	return errors.Join(errs...)
}

// ensureSignalStream creates ADK_SIGNALS as the coordinator user.
func (c *EvalCluster) ensureSignalStream() {
	c.t.Helper()
	nc := c.NATS.ConnectAll(c.t, bus.WithUserPassword(coordUser, coordPassword))
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	replicas := c.opts.SignalReplicas
	if replicas == 0 {
		replicas = 1
		if c.opts.NATSNodes >= 3 {
			replicas = 3
		}
	}
	if _, err := bus.EnsureSignalStream(ctx, js, bus.SignalStreamConfig{Replicas: replicas}); err != nil {
		c.t.Fatalf("create %s: %v", bus.SignalStreamName, err)
	}
}
