package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// Peer is a Raft voter: its node id and TCP address.
type Peer struct {
	ID   string
	Addr string
}

// Limits are the service's admission and validation limits (CONTRACTS §6).
type Limits struct {
	MaxConcurrency     int           // running jobs, default 4
	MaxQueue           int           // queued jobs, default 1000
	MaxQueueBytes      int64         // default 64 MiB
	TaskTimeout        time.Duration // upper bound of one task, default 1 h
	JobTimeout         time.Duration // upper bound of a job's timeout_ms, default 1 h
	MaxPendingSubmits  int           // concurrent validations, default 64
	ValidationTimeout  time.Duration // per submit, default 1 s
	DefaultOwnerTTL    time.Duration // when a submit names an owner without TTL, default 10 s
	MaxTasksPerCommand int           // assignments or outcomes per Raft entry, default 512
}

func (l Limits) withDefaults() Limits {
	if l.MaxConcurrency <= 0 {
		l.MaxConcurrency = 4
	}
	if l.MaxQueue < 0 {
		l.MaxQueue = 0
	} else if l.MaxQueue == 0 {
		l.MaxQueue = 1000
	}
	if l.MaxQueueBytes <= 0 {
		l.MaxQueueBytes = 64 << 20
	}
	if l.TaskTimeout <= 0 {
		l.TaskTimeout = time.Hour
	}
	if l.JobTimeout <= 0 {
		l.JobTimeout = time.Hour
	}
	if l.MaxPendingSubmits <= 0 {
		l.MaxPendingSubmits = 64
	}
	if l.ValidationTimeout <= 0 {
		l.ValidationTimeout = time.Second
	}
	if l.DefaultOwnerTTL <= 0 {
		l.DefaultOwnerTTL = 10 * time.Second
	}
	if l.MaxTasksPerCommand <= 0 {
		l.MaxTasksPerCommand = 512
	}
	return l
}

// Timing holds every duration of Raft and of the liveness scheme. The
// zero value means production defaults; tests shrink them.
type Timing struct {
	RaftHeartbeat   time.Duration // raft HeartbeatTimeout and ElectionTimeout (default 1 s)
	RaftLeaderLease time.Duration // default 500 ms
	Tick            time.Duration // leader loop period (default 50 ms)
	LeaseInterval   time.Duration // coordinator lease renewal through Raft (default 1 s)
	FenceLease      time.Duration // workers self-fence after this without a leader (default 5 s)
	WorkerTTL       time.Duration // a worker silent this long is lost (default 5 s)
	DispatchGrace   time.Duration // a dispatched task no heartbeat reports after this is lost (default 10 s)
	TaskAckWait     time.Duration // worker consumer AckWait (default 10 s)
	ResultAckWait   time.Duration // results consumer AckWait (default 5 s)
	ApplyTimeout    time.Duration // raft Apply enqueue timeout (default 5 s)
	// ResultLinger is how long a result batch waits for more after its
	// first message, unless it already covers every task in flight
	// (default 20 ms).
	ResultLinger time.Duration
	// RaftCommit is raft's CommitTimeout: how often the leader sends an
	// AppendEntries to a follower with nothing new (default 20 ms; see
	// nudgeFollowers). Tests lengthen it to show the nudge at work.
	RaftCommit time.Duration
	// ReadWait bounds how long a request carrying MinIndex waits for this
	// node to apply it before it answers coordinator_behind (default 1 s:
	// under the client's FirstRetry, so the answer comes before the
	// client would send the request again for want of one).
	ReadWait time.Duration
}

func (t Timing) withDefaults() Timing {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.RaftHeartbeat, time.Second)
	def(&t.RaftLeaderLease, 500*time.Millisecond)
	def(&t.Tick, 50*time.Millisecond)
	def(&t.LeaseInterval, time.Second)
	def(&t.FenceLease, 5*time.Second)
	def(&t.WorkerTTL, 5*time.Second)
	def(&t.DispatchGrace, 10*time.Second)
	def(&t.TaskAckWait, 10*time.Second)
	def(&t.ResultAckWait, 5*time.Second)
	def(&t.ApplyTimeout, 5*time.Second)
	def(&t.ResultLinger, 20*time.Millisecond)
	def(&t.RaftCommit, 20*time.Millisecond)
	def(&t.ReadWait, time.Second)
	return t
}

// Config configures a coordinator node.
type Config struct {
	// ID is the node id (Raft ServerID), a subject token.
	ID string
	// DataDir holds raft.db, snapshots and the Badger eval store.
	DataDir string
	// RaftAddr is the TCP bind address, e.g. 127.0.0.1:0.
	RaftAddr string
	// Bootstrap starts a new cluster whose voters are Peers (this node
	// alone when empty). Ignored when DataDir already has Raft state.
	Bootstrap bool
	Peers     []Peer
	// Join makes a node without Raft state ask the running cluster (over
	// NATS, adk.coord.v1.join) to add it as a voter, retrying with backoff
	// until it is a member and has caught up to its own addition; only
	// then does it serve the API. Ignored when DataDir has Raft state.
	Join bool
	// Coordinators is the allowlist of coordinator ids this node, while it
	// leads, lets join. The node itself and Peers are always on it.
	Coordinators []string
	// NATS is the node's connection; the node does not close it.
	NATS *nats.Conn
	// Workers is the allowlist of worker ids tasks may go to.
	Workers []string
	// Streams sizes ADK_TASKS and ADK_RESULTS (replicas 1 or 3, limits).
	Streams bus.TaskStreamConfig
	// Signals, when set, is the ADK_SIGNALS stream a new leader ensures
	// beside the task streams (`adk coordinator` passes the settings'
	// `signals` section): on an external NATS server nothing else creates
	// it, and without it every worker's traces are dropped and store
	// nodes wait. Failing to ensure it (a stream made with other replicas
	// or storage, a JetStream limit) is logged and never blocks the eval
	// service. nil leaves the stream to its owner (`adk serve`, tests).
	Signals     *bus.SignalStreamConfig
	Limits      Limits
	StoreLimits evalstore.Limits
	Timing      Timing
	// MemTableSize for Badger (default evalstore.DefaultMemTableSize);
	// the same on every node.
	MemTableSize int64
	Logger       *slog.Logger
	// TrailingLogs is how many Raft entries a snapshot leaves in the log
	// (default 10,240): a peer further behind catches up by installing a
	// snapshot. Tests lower it to exercise that path.
	TrailingLogs uint64
	// ResultDocuments makes this leader complete jobs the previous way,
	// with a result document every node builds (the second form), not as
	// records: tests use it to check that such entries still apply.
	ResultDocuments bool
	// ResultTails says when this node builds the result tail of a
	// completed records job: at completion (empty: the default), on the
	// job's first read here, or never (coordinator/DESIGN.md "The result
	// tail"). Nodes of one cluster may differ: a tail is node-local.
	ResultTails ResultTails
	// WithoutOps are adk.coord.v1 operations this node does not serve
	// (it subscribes no responder for them). Tests stand a node in for
	// a coordinator of an earlier build with it, which has no responder
	// for the operations added since (result_samples, result_cases).
	WithoutOps []string
	// earlierBuild stands this node in for a coordinator of a build
	// before cluster identities (tests): it draws none when it leads, its
	// FSM skips the one a lease carries, its replies name none and it
	// reads no request's.
	earlierBuild bool
}

// Node is one coordinator: a Raft peer with its FSM and eval store, the
// adk.coord.v1 service, and (while it leads) the scheduler.
type Node struct {
	cfg     Config
	log     *slog.Logger
	store   *evalstore.Store
	fsm     *FSM
	tails   *tailCache
	raft    *raft.Raft
	trans   *raft.NetworkTransport
	wal     *wal.WAL
	walMeta *metadb.BoltMetaDB
	nc      *nats.Conn
	js      jetstream.JetStream

	allow    map[string]bool
	peers    map[string]bool // coordinator ids allowed to join
	joinMu   sync.Mutex      // one membership change at a time
	stopOnce sync.Once       // Stop runs once; later calls wait for it
	live     *liveness
	owned    atomic.Pointer[map[string]ownedJob] // running owned jobs, while leading (setOwned)
	limits   *fleetLimits                        // provider rate limits split among workers (ratelimits.go)
	svc      *service

	rejected atomic.Int64  // results refused: not allowlisted, undecodable
	leading  atomic.Bool   // leader loop established (barrier, recovery done)
	kick     chan struct{} // results applied: schedule now (cap 1)
	existing bool          // DataDir had Raft state at start

	// fatal receives the error that stopped this node's service (fail
	// closed); stopped makes the leader loop and writes stand still.
	fatal   chan error
	stopped atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // monitorLeadership, forward handlers
	subs   []*nats.Subscription
}

// Start opens the store and Raft, bootstraps if asked, creates the task
// streams, and serves the API. Stop undoes it.
func Start(cfg Config) (*Node, error) { return StartContext(context.Background(), cfg) }

// StartContext is Start; with cfg.Join it also joins the running cluster
// first, which lasts until the node is a member or ctx ends.
func StartContext(ctx context.Context, cfg Config) (n *Node, err error) {
	if err := bus.ValidToken(cfg.ID); err != nil {
		return nil, fmt.Errorf("coordinator id: %w", err)
	}
	if cfg.NATS == nil || cfg.DataDir == "" {
		return nil, errors.New("coordinator: NATS and DataDir are required")
	}
	if cfg.ResultTails, err = resultTails(cfg.ResultTails); err != nil {
		return nil, err
	}
	cfg.Limits = cfg.Limits.withDefaults()
	cfg.Timing = cfg.Timing.withDefaults()
	if cfg.RaftAddr == "" {
		cfg.RaftAddr = "127.0.0.1:0"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("coordinator", cfg.ID)
	n = &Node{cfg: cfg, log: log, nc: cfg.NATS, allow: map[string]bool{}, kick: make(chan struct{}, 1)}
	for _, w := range cfg.Workers {
		if err := bus.ValidToken(w); err != nil {
			return nil, fmt.Errorf("worker id %q: %w", w, err)
		}
		n.allow[w] = true
	}
	n.peers = map[string]bool{cfg.ID: true}
	for _, id := range cfg.Coordinators {
		if err := bus.ValidToken(id); err != nil {
			return nil, fmt.Errorf("coordinator id %q: %w", id, err)
		}
		n.peers[id] = true
	}
	for _, p := range cfg.Peers {
		n.peers[p.ID] = true
	}
	n.live = newLiveness()
	n.limits = newFleetLimits()
	started := n // the returns below set n to nil
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.fatal = make(chan error, 1)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	n.store, err = evalstore.Open(evalstore.Options{Dir: filepath.Join(cfg.DataDir, "evalstore"), Limits: cfg.StoreLimits,
		MemTableSize: cfg.MemTableSize, Logger: log})
	if err != nil {
		return nil, err
	}
	n.fsm = NewFSM(n.store, log)
	if !cfg.ResultDocuments {
		// Jobs complete as records: no document is built at completion,
		// so decoding every sample into the cache on every node would be
		// CPU and memory (up to DefaultSampleCacheBytes) for nothing. A
		// second-form completion replayed from an older log builds from
		// the store instead.
		n.fsm.samples.disable()
	}
	n.fsm.skipCluster = cfg.earlierBuild
	n.fsm.onFail = n.failStop // a storage failure in an apply stops the service, not the process
	// Every completed records job gets its result tail, rendered off the
	// apply goroutine by the service (tails.go), when it completes or on
	// its first read as ResultTails says; completions applied before the
	// service starts (a replay) wait in the queue.
	n.tails = newTailCache(cfg.ResultTails)
	n.tails.watch(n.fsm, cfg.ResultTails)
	if n.js, err = jetstream.New(n.nc); err != nil {
		return nil, err
	}
	if err := n.startRaft(); err != nil {
		return nil, err
	}
	if err := n.subscribe(); err != nil {
		return nil, err
	}
	if cfg.Join && !n.existing {
		if err := n.joinCluster(ctx); err != nil {
			return nil, err
		}
	}
	if n.svc, err = startService(n); err != nil {
		return nil, err
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.monitorLeadership()
	}()
	return n, nil
}

func (n *Node) startRaft() error {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	t := n.cfg.Timing
	rc.HeartbeatTimeout, rc.ElectionTimeout = t.RaftHeartbeat, t.RaftHeartbeat
	rc.LeaderLeaseTimeout = t.RaftLeaderLease
	// CommitTimeout paces the leader's AppendEntries to each follower when
	// no entry is new: the only way a follower learns the commit index of
	// the last entries of a burst. At 5 ms those sends were most of an idle
	// fleet's CPU (leader 12%, each follower 5% of a core, fleetbench
	// -idle) and part of every job's; a write a client may read back on a
	// follower nudges the followers instead (nudgeFollowers).
	rc.CommitTimeout = t.RaftCommit
	rc.BatchApplyCh = true
	// hashicorp/raft allocates a slice of MaxAppendEntries pointers for
	// every AppendEntries (8 KiB at 1024, a tenth of a busy leader's CPU
	// with 5 ms idle sends), but one send carries at most that many
	// entries and the rest wait for the next trigger or CommitTimeout: at
	// 64, with 20 ms, the 4-worker fleetbench row ran slower in 3 of 3
	// loaded runs. Fewer idle sends (above) cut most of that allocation.
	rc.MaxAppendEntries = 1024
	rc.SnapshotThreshold = 8192
	rc.TrailingLogs = 10240
	if n.cfg.TrailingLogs > 0 {
		rc.TrailingLogs = n.cfg.TrailingLogs
	}
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft-" + n.cfg.ID, Level: hclog.Error, Output: io.Discard})
	raftDir := filepath.Join(n.cfg.DataDir, "raft")
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		return err
	}
	// The log and stable store is raft-wal (segment files plus a bbolt
	// meta store): it builds against current go-metrics, unlike
	// raft-boltdb/v2, and applies faster (bench/RESULTS.md). A data dir of
	// a build that used raft-boltdb has raft/raft.db: refuse it rather
	// than start an empty log beside it.
	if _, err := os.Stat(filepath.Join(raftDir, "raft.db")); err == nil {
		return fmt.Errorf("raft log store: %s holds a raft.db of an earlier adk build (raft-boltdb); this build uses raft-wal: start from an empty data dir", raftDir)
	}
	walDir := filepath.Join(raftDir, "wal")
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		return err
	}
	// The node owns the WAL's bbolt meta store: WAL.Close does not close
	// it, and its file lock would make a restart in the same process (or a
	// later Open of this directory) wait forever.
	n.walMeta = &metadb.BoltMetaDB{}
	var err error
	n.wal, err = wal.Open(walDir, wal.WithLogger(rc.Logger), wal.WithMetaStore(n.walMeta))
	if err != nil {
		_ = n.walMeta.Close()
		n.walMeta = nil
		return fmt.Errorf("raft wal: %w", err)
	}
	var store raft.LogStore = compactedLog{n.wal}
	if raftLogStoreWrap != nil {
		store = raftLogStoreWrap(store)
	}
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 2, rc.Logger)
	if err != nil {
		return err
	}
	var trans raftTransport
	n.trans, trans, err = newRaftTransport(n.cfg.RaftAddr, rc.Logger)
	if err != nil {
		return fmt.Errorf("raft transport: %w", err)
	}
	existing, err := raft.HasExistingState(logs, n.wal, snaps)
	if err != nil {
		return err
	}
	n.existing = existing
	if n.cfg.Bootstrap && !existing {
		conf := raft.Configuration{}
		peers := n.cfg.Peers
		if len(peers) == 0 {
			peers = []Peer{{ID: n.cfg.ID, Addr: string(n.trans.LocalAddr())}}
		}
		for _, p := range peers {
			conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if err := raft.BootstrapCluster(rc, logs, n.wal, snaps, trans, conf); err != nil {
			return fmt.Errorf("raft bootstrap: %w", err)
		}
	}
	n.raft, err = raft.NewRaft(rc, n.fsm, logs, n.wal, snaps, trans)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	return nil
}

// Stop leaves the service, stops the leader loop, shuts Raft down and
// closes the stores. It is safe on a partly started node.
// Fatal delivers the error that stopped this node's service, fail closed
// (CONTRACTS §6 "Fail-closed stops"): a job result the eval store refuses
// to persist (evaluation_result_persistence_failed), or a storage failure
// inside a Raft apply (evaluation_result_persistence_failed,
// evaluation_cancel_persistence_failed or eval_store_recovery_failed by
// what the entry recorded; the FSM then applies nothing more). The node then takes
// no more decisions, the job stays running, and the caller must Stop it
// and exit with the error; another coordinator that leads next meets the
// same refusal and stops too, so the service stops rather than lose the
// result.
func (n *Node) Fatal() <-chan error { return n.fatal }

// failStop stops this node's service with err (see Fatal).
func (n *Node) failStop(err error) {
	if n.stopped.Swap(true) {
		return
	}
	n.log.Error("stopping the eval service (fail closed)", "err", err)
	n.fatal <- err
}

// Stop stops the node: its service, leader loop and handlers, then Raft,
// its transport and stores. It may be called more than once and from
// more than one goroutine (a test's clean-up and its body, a signal
// handler and a fail-closed exit): the first call stops the node, and
// every other call returns once that stop is done.
func (n *Node) Stop() { n.stopOnce.Do(n.stop) }

func (n *Node) stop() {
	if n.svc != nil {
		n.svc.stop()
	}
	for _, s := range n.subs {
		_ = s.Unsubscribe()
	}
	if n.cancel != nil {
		n.cancel()
	}
	// The leader loop and the forward handlers end with their context,
	// but may be waiting for an apply's answer first: wait for them while
	// Raft still runs. With BatchApplyCh an apply still queued when Raft
	// shuts down is never answered, and a Stop that shut Raft down first
	// waited for it forever ("still stopping after 2m0s" in tests that
	// stop a leader, main included).
	n.wg.Wait()
	if n.raft != nil {
		if err := n.raft.Shutdown().Error(); err != nil {
			n.log.Error("raft shutdown", "err", err)
		}
	}
	if n.trans != nil {
		// Close does not close pooled outbound connections; without this the
		// peers' handleConn goroutines read from them forever.
		n.trans.CloseStreams()
		n.trans.Close()
	}
	if n.wal != nil {
		if err := n.wal.Close(); err != nil {
			n.log.Error("raft wal close", "err", err)
		}
	}
	if n.walMeta != nil {
		if err := n.walMeta.Close(); err != nil {
			n.log.Error("raft wal meta close", "err", err)
		}
	}
	if n.store != nil {
		n.store.Close()
	}
}

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the Raft transport address (useful with port 0).
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// IsLeader reports whether this node is the Raft leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Serving reports whether this node leads and has taken over: the lease
// decided and renewed, the task streams and consumers ensured. Only then
// does it answer heartbeats and dispatch; a Raft leader still setting up
// (IsLeader) does neither.
func (n *Node) Serving() bool { return n.leading.Load() }

// Leader returns the current leader's id ("" when unknown).
func (n *Node) Leader() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// Store exposes the eval store for reads (tests, the CLI's status).
func (n *Node) Store() *evalstore.Store { return n.store }

// Join adds a voter; it must run on the leader. Unlike a join request it
// skips the coordinator allowlist (the caller is in-process and trusted);
// it is idempotent and refuses conflicting addresses like one.
func (n *Node) Join(id, addr string) error {
	_, _, err := n.addVoter(id, addr)
	return err
}

// Snapshot forces a Raft snapshot (tests, operators).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// AppliedIndex is the FSM's last applied index.
func (n *Node) AppliedIndex() uint64 { return n.store.AppliedIndex() }

// RejectedResults counts results refused before Raft (sender not
// allowlisted, undecodable) plus outcomes fenced out by the FSM.
func (n *Node) RejectedResults() int64 { return n.rejected.Load() }

func forwardSubject(id string) string { return bus.CoordSubjectPrefix + "fwd-" + id }

// propose applies a command through Raft: locally on the leader, else
// forwarded to the leader over NATS (rqlite's try-local-else-forward).
func (n *Node) propose(ctx context.Context, t cmdType, body any) (*applyResult, error) {
	data, err := encodeCmd(t, body)
	if err != nil {
		return nil, err
	}
	for {
		if n.raft.State() == raft.Leader {
			res, err := n.applyLocal(data)
			if err == nil || api.AsError(err).Code != api.CodeNotLeader {
				return res, err
			}
		} else if leader := n.Leader(); leader != "" && leader != n.cfg.ID {
			res, err := n.forward(ctx, leader, data)
			if err == nil || api.AsError(err).Code != api.CodeNotLeader {
				return res, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, api.Errorf(api.CodeServiceUnavailable, "no leader")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (n *Node) applyLocal(data []byte) (*applyResult, error) {
	f := n.raft.Apply(data, n.cfg.Timing.ApplyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
			return nil, api.Errorf(api.CodeNotLeader, "%v", err)
		}
		return nil, api.Errorf(api.CodeServiceUnavailable, "%v", err)
	}
	res, _ := f.Response().(*applyResult)
	if res == nil {
		return nil, api.Errorf(api.CodeInternal, "empty apply response")
	}
	res.Index = f.Index()
	if res.Err != nil {
		return res, res.Err
	}
	// Whatever ended the jobs (a user's cancel, owner lost, timed out,
	// failed, a recovery), and whichever node proposed it: their tasks
	// stop now, not at their workers' next heartbeat answer.
	n.pushKills(res.kills)
	if nudges(data) {
		n.nudgeFollowers()
	}
	if res.Job != nil {
		// A job was admitted, started or ended (queued ones admitted):
		// schedule now, not at the next tick.
		n.kickLeader()
	}
	return res, nil
}

// nudges reports whether an applied command is a write a client may read
// back on a follower at once (a submit, a job's end, a cancel, a
// baseline, a prune), as opposed to the steady stream of assign, finish
// and lease entries, whose successors carry their commit soon enough.
func nudges(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	switch cmdType(data[0] &^ cmdCompressed) {
	case cmdAssign, cmdFinish, cmdLease:
		return false
	}
	return true
}

// nudgeFollowers makes the followers learn the commit index now rather
// than up to 2 × Timing.RaftCommit later: a barrier is a new entry, and the
// AppendEntries that carries it carries the commit index too, so a
// status held on a follower (wait_ms) sees a job's end as the leader
// does. It does not wait for the barrier, and it is never called from
// the FSM (raft's apply loop must not wait on its own queue).
func (n *Node) nudgeFollowers() {
	_ = n.raft.Barrier(n.cfg.Timing.ApplyTimeout)
}

// kickLeader makes the leader loop run its tick now (it coalesces).
func (n *Node) kickLeader() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *Node) forward(ctx context.Context, leader string, data []byte) (*applyResult, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := n.nc.RequestWithContext(rctx, forwardSubject(leader), data)
	if err != nil {
		return nil, api.Errorf(api.CodeNotLeader, "forward: %v", err)
	}
	var res applyResult
	if err := msgpack.Unmarshal(msg.Data, &res); err != nil {
		return nil, api.Errorf(api.CodeInternal, "forward reply: %v", err)
	}
	if res.Err != nil {
		return &res, res.Err
	}
	return &res, nil
}

// forwardSlots bounds concurrent forwarded applies.
const forwardSlots = 256

func (n *Node) subscribe() error {
	slots := make(chan struct{}, forwardSlots)
	sub, err := n.nc.Subscribe(forwardSubject(n.cfg.ID), func(m *nats.Msg) {
		select {
		case slots <- struct{}{}:
		default:
			b, _ := msgpack.Marshal(&applyResult{Err: api.Errorf(api.CodeServiceUnavailable, "forward queue full")})
			_ = m.Respond(b)
			return
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer func() { <-slots }()
			var res *applyResult
			if n.raft.State() != raft.Leader {
				res = &applyResult{Err: api.Errorf(api.CodeNotLeader, "")}
			} else {
				var err error
				res, err = n.applyLocal(m.Data)
				if res == nil {
					res = &applyResult{Err: api.AsError(err)}
				}
			}
			b, err := msgpack.Marshal(res)
			if err == nil {
				_ = m.Respond(b)
			}
		}()
	})
	if err != nil {
		return err
	}
	n.subs = append(n.subs, sub)
	hb, err := n.nc.Subscribe(bus.AllHeartbeatsSubject, n.onHeartbeat)
	if err != nil {
		return err
	}
	// Status first, then the subscription: a break between the two is
	// seen, and listening counts from after the subscribe.
	status := n.nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
	owner, err := n.nc.Subscribe(bus.AllOwnersSubject, n.onOwnerRenew)
	if err != nil {
		n.nc.RemoveStatusListener(status)
		return err
	}
	if n.nc.IsConnected() {
		n.live.setListening(time.Now())
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.watchConn(status)
	}()
	join, err := n.nc.Subscribe(joinForwardSubject(n.cfg.ID), n.onJoinForward)
	if err != nil {
		return err
	}
	n.subs = append(n.subs, hb, owner, join)
	return nil
}

// watchConn keeps liveness.listenFrom: a NATS connection that breaks
// misses owner renewals until it is back (the client resubscribes before
// it reports CONNECTED).
func (n *Node) watchConn(status chan nats.Status) {
	defer n.nc.RemoveStatusListener(status)
	for {
		select {
		case <-n.ctx.Done():
			return
		case s, ok := <-status:
			if !ok {
				return
			}
			if s == nats.CONNECTED {
				n.live.setListening(time.Now())
			} else {
				n.live.setListening(time.Time{})
			}
		}
	}
}

// joinForwardSubject is where a leader takes joins forwarded by the other
// nodes ("fwdjoin-" never collides with a forward subject "fwd-"+id).
func joinForwardSubject(id string) string { return bus.CoordSubjectPrefix + "fwdjoin-" + id }

// joinRequestTimeout bounds one join call: a forward plus AddVoter (10 s).
const joinRequestTimeout = 15 * time.Second

// validJoin checks a join request's shape; the allowlist is the leader's.
func validJoin(j *api.JoinRequest) error {
	if j == nil {
		return api.Errorf(api.CodeInvalidRequest, "join is required")
	}
	if err := bus.ValidToken(j.ID); err != nil {
		return api.Errorf(api.CodeInvalidRequest, "join id: %v", err)
	}
	if len(j.RaftAddr) > api.MaxRaftAddrLen {
		return api.Errorf(api.CodeInvalidRequest, "raft_addr longer than %d bytes", api.MaxRaftAddrLen)
	}
	host, port, err := net.SplitHostPort(j.RaftAddr)
	if err != nil || host == "" {
		return api.Errorf(api.CodeInvalidRequest, "raft_addr is not host:port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return api.Errorf(api.CodeInvalidRequest, "raft_addr port")
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return api.Errorf(api.CodeInvalidRequest, "raft_addr %s is not advertisable", host)
	}
	return nil
}

// members lists a Raft configuration.
func members(conf raft.Configuration) []api.Member {
	out := make([]api.Member, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		out = append(out, api.Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out
}

// Members returns the latest Raft configuration this node knows.
func (n *Node) Members() ([]api.Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return members(f.Configuration()), nil
}

// admitJoin is the leader's half of a join: the allowlist, then addVoter.
func (n *Node) admitJoin(j *api.JoinRequest) ([]api.Member, uint64, error) {
	if err := validJoin(j); err != nil {
		return nil, 0, err
	}
	if !n.peers[j.ID] {
		return nil, 0, api.Errorf(api.CodeJoinNotAllowed, "%s is not an allowlisted coordinator", j.ID)
	}
	return n.addVoter(j.ID, j.RaftAddr)
}

// addVoter makes id a voter at addr, on the leader. It is a no-op when id
// already votes at addr, and coordinator_member_conflict when id is a
// member at another address or addr is another member's (raft.AddVoter
// would silently move the member).
func (n *Node) addVoter(id, addr string) ([]api.Member, uint64, error) {
	n.joinMu.Lock()
	defer n.joinMu.Unlock()
	if n.raft.State() != raft.Leader {
		return nil, 0, api.Errorf(api.CodeNotLeader, "")
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, 0, api.Errorf(api.CodeServiceUnavailable, "configuration: %v", err)
	}
	conf := cf.Configuration()
	for _, s := range conf.Servers {
		sameID, sameAddr := string(s.ID) == id, string(s.Address) == addr
		switch {
		case sameID && sameAddr && s.Suffrage == raft.Voter:
			// Already a member: the joiner catches up to the leader's log.
			return members(conf), n.raft.LastIndex(), nil
		case sameID && !sameAddr:
			return nil, 0, api.Errorf(api.CodeMemberConflict, "%s is already a member at another address", id)
		case !sameID && sameAddr:
			return nil, 0, api.Errorf(api.CodeMemberConflict, "%s is the address of member %s", addr, s.ID)
		}
	}
	// prevIndex 0: joinMu already orders this node's changes, and
	// GetConfiguration's future carries no index to compare with.
	f := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 10*time.Second)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
			return nil, 0, api.Errorf(api.CodeNotLeader, "%v", err)
		}
		return nil, 0, api.Errorf(api.CodeServiceUnavailable, "add voter: %v", err)
	}
	n.log.Info("coordinator joined", "member", id, "addr", addr, "index", f.Index())
	ms, err := n.Members()
	if err != nil {
		return nil, 0, api.Errorf(api.CodeServiceUnavailable, "configuration: %v", err)
	}
	return ms, f.Index(), nil
}

// joinViaLeader admits a join on the leader: locally when this node
// leads, else forwarded to the leader; not_leader answers are retried
// until ctx ends, like propose.
func (n *Node) joinViaLeader(ctx context.Context, j *api.JoinRequest) ([]api.Member, uint64, error) {
	for {
		var err error
		if n.raft.State() == raft.Leader {
			var ms []api.Member
			var idx uint64
			if ms, idx, err = n.admitJoin(j); err == nil {
				return ms, idx, nil
			}
		} else if leader := n.Leader(); leader != "" && leader != n.cfg.ID {
			var rep *api.Reply
			if rep, err = n.requestJoin(ctx, joinForwardSubject(leader), j); err == nil {
				return rep.Members, rep.Index, nil
			}
		}
		if err != nil && api.AsError(err).Code != api.CodeNotLeader {
			return nil, 0, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, api.Errorf(api.CodeServiceUnavailable, "no leader")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// requestJoin sends one join request to subject and decodes the answer.
func (n *Node) requestJoin(ctx context.Context, subject string, j *api.JoinRequest) (*api.Reply, error) {
	b, err := wire.Encode(api.KindRequest, &api.Request{Scope: "_", Join: j})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, joinRequestTimeout)
	defer cancel()
	msg, err := n.nc.RequestWithContext(rctx, subject, b)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, api.Errorf(api.CodeServiceUnavailable, "no coordinator answers %s", subject)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return nil, api.Errorf(api.CodeTimeout, "%s", subject)
	case err != nil:
		return nil, api.Errorf(api.CodeServiceUnavailable, "%v", err)
	}
	var rep api.Reply
	if err := wire.Decode(msg.Data, api.SmallLimits, api.KindReply, &rep); err != nil {
		return nil, api.Errorf(api.CodeInternal, "join reply: %v", err)
	}
	if rep.Err != nil {
		return nil, rep.Err
	}
	return &rep, nil
}

// onJoinForward serves joinForwardSubject: only the leader admits; any
// other node answers not_leader and the forwarding node retries.
func (n *Node) onJoinForward(m *nats.Msg) {
	rep := &api.Reply{}
	req, err := decodeRequest(m.Data, api.SmallLimits)
	if err == nil {
		rep.Members, rep.Index, err = n.admitJoin(req.Join)
	}
	if err != nil {
		rep = fail(err)
	}
	b, err := wire.Encode(api.KindReply, rep)
	if err == nil {
		_ = m.Respond(b)
	}
}

// joinCluster asks the running cluster to add this node as a voter,
// retrying retryable answers (no coordinator yet, no leader, timeouts) with
// capped exponential backoff; an answer like coordinator_join_not_allowed
// or coordinator_member_conflict ends it. Then it waits until this node has
// applied its own addition, so it serves reads no older than its join.
func (n *Node) joinCluster(ctx context.Context) error {
	subj, err := bus.CoordSubject(api.OpJoin)
	if err != nil {
		return err
	}
	j := &api.JoinRequest{ID: n.cfg.ID, RaftAddr: n.RaftAddr()}
	if err := validJoin(j); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		rep, err := n.requestJoin(ctx, subj, j)
		if err == nil {
			n.log.Info("joined the cluster", "index", rep.Index, "members", len(rep.Members))
			return n.awaitApplied(ctx, rep.Index)
		}
		if ae := api.AsError(err); !ae.Retryable() {
			return fmt.Errorf("join: %w", err)
		}
		n.log.Info("join: retrying", "attempt", attempt, "err", err)
		wait := backoff/2 + time.Duration(mrand.Int64N(int64(backoff/2)+1))
		select {
		case <-ctx.Done():
			return fmt.Errorf("join: %w (last answer: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// awaitApplied waits until Raft on this node has applied index.
func (n *Node) awaitApplied(ctx context.Context, index uint64) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for n.raft.AppliedIndex() < index {
		select {
		case <-ctx.Done():
			return fmt.Errorf("join: waiting to apply index %d: %w", index, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// raftLogStoreWrap, when set (by a test, before Start), wraps the Raft
// log store, raft-wal: the Stop regression test holds Raft's leader loop
// in a log write.
var raftLogStoreWrap func(raft.LogStore) raft.LogStore

// compactedLog is raft-wal with its head truncation made visible to
// reads: raft-wal keeps answering GetLog below its first index until the
// segment holding those entries is deleted (it only ever deletes whole
// segments, 64 MiB), so a peer far behind was sent entries a snapshot
// had compacted instead of the snapshot (Raft sends the snapshot only
// when the leader's log no longer has the entry). Reads below the first
// index are ErrLogNotFound, as Raft expects of a compacted log.
type compactedLog struct{ *wal.WAL }

func (l compactedLog) GetLog(index uint64, out *raft.Log) error {
	if first, err := l.WAL.FirstIndex(); err == nil && index < first {
		return raft.ErrLogNotFound
	}
	return l.WAL.GetLog(index, out)
}
