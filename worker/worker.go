package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/fadcedab/adk/agent/model/ratelimit"
	"github.com/fadcedab/adk/observability"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config configures a worker.
type Config struct {
	// ID is the worker id: its task subject token and NATS user.
	ID string
	// NATS is a connection made with the worker's credentials and inbox
	// prefix bus.WorkerInboxPrefix(ID); the worker does not close it.
	NATS *nats.Conn
	// Capacity is the number of samples run at once (default 4).
	Capacity int
	// Prefetch is how many tasks beyond Capacity the worker accepts and
	// holds (acked, reported in heartbeats, killable) until a run slot
	// frees, hiding the round trip between a sample's end and the next
	// task's arrival: the leader counts a task until its result is applied
	// through Raft, so its window, Capacity+Prefetch, must cover that trip
	// too (default 2×Capacity, at most 2×Capacity: a task's deadline allows
	// for two samples' wait; negative means none).
	Prefetch int
	// Agents are the adapters this worker trusts, by the name jobs use.
	Agents map[string]evalengine.Adapter
	// AgentFiles maps more trusted agent names to AGENT.json paths, parsed
	// once at Start into the default adapter (evalengine/agentadapter).
	// Jobs name an agent; the files are the worker's own configuration.
	AgentFiles map[string]string
	// HeartbeatInterval (default 1 s) and FenceAfter (default 5 s, the
	// coordinators' FenceLease).
	HeartbeatInterval time.Duration
	FenceAfter        time.Duration
	// RecentWindow keeps finished task ids in heartbeats while their
	// results may still be in flight (default 30 s), or until the leader
	// answers them decided (api.HeartbeatReply.RecentChecked).
	RecentWindow time.Duration
	// ResultWindow is how long a job's first result waits for others to
	// share its message (default 10 ms); a batch holding every task the
	// worker holds of the job leaves at once.
	ResultWindow time.Duration
	Logger       *slog.Logger
	// Signals, when set, traces every task: its spans and envelopes are
	// published into ADK_SIGNALS under the principal that owns the job
	// (its scope, from the coordinator's job spec). Export, when set,
	// also receives every signal (an OTLP backend from the environment).
	Signals *bus.PublisherPool
	Export  observability.AsyncSink
}

// Worker runs tasks. Start it with Start; Stop kills its tasks and waits.
type Worker struct {
	cfg Config
	log *slog.Logger
	js  jetstream.JetStream

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // loops, runners, holders and overflow holds
	slots  chan struct{}  // accepted tasks: Capacity+Prefetch
	runq   chan *runReq   // held tasks to the Capacity runners (the run slots)
	holdq  chan holdJob   // accepted messages and tasks to idle holders

	agents map[string]trustedAgent
	// agentNames are the agents' names, sorted, announced in heartbeats.
	agentNames []string
	// limits holds the provider rate limiters, one per endpoint, shared
	// by every agent calling it.
	limits *ratelimit.Registry

	// fenceMu makes a fence check (fenceIfSilent: its reads, the fence
	// and the kills) and an answer's lastLeader and unfence (onAnswer)
	// happen one after the other: an answer is applied wholly before the
	// check reads, or after its kills. Taken before mu (killAll), never
	// while holding it.
	fenceMu    sync.Mutex
	fenced     atomic.Bool
	lastLeader atomic.Int64 // unix nanos of the last leader answer (of the start, before the first)
	// unansweredLogged: the worker said no leader answered it in its
	// first FenceAfter.
	unansweredLogged atomic.Bool

	// epoch names this incarnation (api.Heartbeat.Epoch): tasks addressed
	// to another are dropped unrun.
	epoch int64
	// answeredSent is when the last heartbeat the leader answered was
	// sent (unix nanos), workerTTL the lease that answer announced: a
	// held task starts only while that answer is fresh (startable).
	answeredSent atomic.Int64
	workerTTL    atomic.Int64
	killSub      *nats.Subscription
	// hbAnswers matches the leader's answers to the heartbeats sent, on
	// answerSub, however late they come.
	hbAnswers heartbeatAnswers
	answerSub *nats.Subscription

	mu       sync.Mutex // guards running, heldJobs, recent, specs, seen, answered, owners
	running  map[api.TaskRef]*heldTask
	heldJobs map[string]int // len(running) by job: a result batch holding them all leaves at once
	recent   map[api.TaskRef]time.Time
	specs    map[string]*jobSpec
	seen     taskSet       // every task this process accepted or was told to kill: run at most once
	answered chan struct{} // closed and replaced at each leader answer
	hbKick   chan struct{} // a held task waits for an answer: heartbeat now
	// owners holds, per job with an owner, when the leader last knew the
	// owner alive by this worker's clock (unix nanos; the answer's send
	// time minus its api.OwnerSeen.AgoMS): a task of the job starts only
	// within api.OwnerStartWindow of it.
	owners map[string]int64

	ownerWaits atomic.Int64 // held tasks waiting for their owner to be heard

	dropped atomic.Int64 // tasks refused: another epoch, seen before, or killed before they came

	results *resultBatcher

	executed  atomic.Int64
	suspended atomic.Bool // SuspendHeartbeats

	// tracer traces tasks (nil: untraced); signals routes its signals to
	// their job's principal.
	tracer  *observability.Tracer
	signals *jobSignals
}

// heldTask is a task the worker holds (running or waiting for a run
// slot): kill kills it; fenced says the worker killed it itself (a
// fence), so it reports the task failed (worker_lost) at once.
type heldTask struct {
	cancel context.CancelFunc // the task's context's
	fenced atomic.Bool

	mu     sync.Mutex
	killed bool
	// slot is the run slot the task's sample runs in (enter), which a
	// kill cancels: the sample's context derives from the slot's, not
	// from the task's.
	slot *evalengine.SampleSlot
}

// kill ends the task's context and the sample it runs, if any.
func (h *heldTask) kill() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.killed = true
	h.cancel()
	if h.slot != nil {
		h.slot.Cancel()
	}
}

// enter makes slot the one h's sample runs in, unless h was killed; leave
// undoes it. A kill between the two cancels the slot.
func (h *heldTask) enter(slot *evalengine.SampleSlot) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.killed {
		return false
	}
	h.slot = slot
	return true
}

func (h *heldTask) leave() {
	h.mu.Lock()
	h.slot = nil
	h.mu.Unlock()
}

type jobSpec struct {
	p      *evalengine.Prepared
	runner *evalengine.SampleRunner
	agent  string
	// ready is closed once p, runner and err are set: the first task of a
	// job fetches the spec, its concurrent siblings wait for that fetch.
	ready chan struct{}
	err   error
}

// MaxPrefetchFactor bounds Prefetch to this many times Capacity: a task
// may wait that many samples for a run slot, and its deadline (the
// coordinator's task TTL) allows for it.
const MaxPrefetchFactor = 2

// Start validates the config and starts the heartbeat and fetch loops.
func Start(cfg Config) (*Worker, error) {
	if err := bus.ValidToken(cfg.ID); err != nil {
		return nil, fmt.Errorf("worker id: %w", err)
	}
	if cfg.NATS == nil {
		return nil, errors.New("worker: NATS is required")
	}
	if cfg.Capacity <= 0 {
		cfg.Capacity = 4
	}
	switch {
	case cfg.Prefetch == 0 || cfg.Prefetch > MaxPrefetchFactor*cfg.Capacity:
		cfg.Prefetch = MaxPrefetchFactor * cfg.Capacity
	case cfg.Prefetch < 0:
		cfg.Prefetch = 0
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = time.Second
	}
	if cfg.FenceAfter <= 0 {
		cfg.FenceAfter = 5 * time.Second
	}
	if cfg.RecentWindow <= 0 {
		cfg.RecentWindow = 30 * time.Second
	}
	if cfg.ResultWindow <= 0 {
		cfg.ResultWindow = resultWindow
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tracer *observability.Tracer
	var signals *jobSignals
	if cfg.Signals != nil || cfg.Export != nil {
		signals = &jobSignals{pool: cfg.Signals, export: cfg.Export}
		// Publishing only: the tracer writes each signal's record
		// straight into the publisher's buffer. An OTLP export needs the
		// Signal values.
		tc := observability.Config{Records: signals}
		if cfg.Export != nil {
			tc = observability.Config{Async: signals}
		}
		t, err := observability.New(tc)
		if err != nil {
			return nil, err
		}
		tracer = t
	}
	// One limiter registry per worker (a worker is a process of the
	// fleet): its limits run at the leader's grants.
	limits := ratelimit.NewRegistry()
	limits.Manage()
	agents, err := trustedAgents(cfg, tracer, limits)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.NATS)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, log: log.With("worker", cfg.ID), js: js, slots: make(chan struct{}, cfg.Capacity+cfg.Prefetch), agents: agents, agentNames: agentNames(agents), limits: limits,
		running: map[api.TaskRef]*heldTask{}, heldJobs: map[string]int{}, recent: map[api.TaskRef]time.Time{}, specs: map[string]*jobSpec{}, owners: map[string]int64{},
		answered: make(chan struct{}), hbKick: make(chan struct{}, 1), epoch: newEpoch(), tracer: tracer, signals: signals}
	// A limiter's demand after an idle spell, or a share it gave back,
	// is the leader's to hear now, not at the next tick: shares follow
	// demand within a round trip.
	limits.SetNotify(w.kickHeartbeat)
	w.results = newResultBatcher(w)
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.lastLeader.Store(time.Now().UnixNano())
	killSubj, _ := bus.KillSubject(cfg.ID)
	// Kill notices: a job that ended stops its tasks here within a round
	// trip, not at the next heartbeat answer.
	if w.killSub, err = cfg.NATS.Subscribe(killSubj, w.onKill); err != nil {
		w.cancel()
		return nil, fmt.Errorf("worker: subscribe %s: %w", killSubj, err)
	}
	w.hbAnswers = heartbeatAnswers{inbox: cfg.NATS.NewInbox(), out: map[uint64]sentHeartbeat{}}
	if w.answerSub, err = cfg.NATS.Subscribe(w.hbAnswers.inbox+".*", w.onAnswer); err != nil {
		_ = w.killSub.Unsubscribe()
		w.cancel()
		return nil, fmt.Errorf("worker: subscribe to heartbeat answers: %w", err)
	}
	w.runq = make(chan *runReq)
	for range cfg.Capacity {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.runner() }()
	}
	w.holdq = make(chan holdJob)
	for range cfg.Capacity + cfg.Prefetch {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.holder() }()
	}
	w.wg.Add(1)
	go func() { defer w.wg.Done(); w.heartbeatLoop() }()
	// Several fetchers overlap the fetch and ack round trips; each still
	// pulls a batch of one, and the slots bound the tasks in flight.
	for range min(cfg.Capacity, maxFetchers) {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.fetchLoop() }()
	}
	return w, nil
}

// Stop kills running tasks, stops the loops and waits for them.
func (w *Worker) Stop() {
	_ = w.killSub.Unsubscribe()
	_ = w.answerSub.Unsubscribe()
	w.cancel()
	w.killAll(false)
	w.wg.Wait()
}

// LastAnswer returns when the last heartbeat the leader answered was sent
// (zero before the first answer).
func (w *Worker) LastAnswer() time.Time {
	if sent := w.answeredSent.Load(); sent != 0 {
		return time.Unix(0, sent)
	}
	return time.Time{}
}

// Dropped counts task deliveries refused unrun: addressed to another
// incarnation, a task this process already accepted (a message the
// NATS server redelivered after forgetting its ack in a crash), or one a
// kill named before its message came (kill).
func (w *Worker) Dropped() int64 { return w.dropped.Load() }

// lastEpoch makes epochs strictly increase within a process (tests start
// several incarnations of one id in one process).
var lastEpoch atomic.Int64

// newEpoch returns an epoch no earlier incarnation used: the start time
// in nanoseconds, past any epoch of this process.
func newEpoch() int64 {
	for {
		prev, now := lastEpoch.Load(), time.Now().UnixNano()
		if now <= prev {
			now = prev + 1
		}
		if lastEpoch.CompareAndSwap(prev, now) {
			return now
		}
	}
}

// SuspendHeartbeats stops (true) or resumes (false) sending heartbeats,
// as a stopped process (SIGSTOP) or a lost route looks to the leader;
// fault tests use it in-process. Tasks keep running, and the worker still
// fences itself after FenceAfter without an answer (one no leader has
// answered yet only stops fetching: fenceIfSilent).
func (w *Worker) SuspendHeartbeats(on bool) { w.suspended.Store(on) }

func (w *Worker) onKill(m *nats.Msg) {
	var rep api.HeartbeatReply
	if wire.Decode(m.Data, api.SmallLimits, api.KindHBReply, &rep) == nil {
		w.kill(rep.Kill)
	}
}

// startable reports whether a held task may start now: the leader
// answered a heartbeat sent less than half its worker lease ago (and of
// FenceAfter), so it has not failed this worker's tasks as lost, and that
// answer's kills are applied.
func (w *Worker) startable() bool {
	sent, ttl := w.answeredSent.Load(), w.workerTTL.Load()
	if sent == 0 {
		return false
	}
	window := w.cfg.FenceAfter
	if ttl > 0 && time.Duration(ttl) < window {
		window = time.Duration(ttl)
	}
	return time.Since(time.Unix(0, sent)) < window/2
}

// ownerHeard reports whether a task's owner (if its job has one) was
// known alive within api.OwnerStartWindow: the leader's last answer that
// covered the job said so. Owner death then stops new work 1.25 leases
// after the last renewal the leader heard, even while no leader can
// cancel the job (a failover, a NATS outage) or a new leader has not yet.
func (w *Worker) ownerHeard(task api.Task) bool {
	if task.OwnerTTLMS <= 0 {
		return true
	}
	w.mu.Lock()
	alive, ok := w.owners[task.JobID]
	w.mu.Unlock()
	window := api.OwnerStartWindow(time.Duration(task.OwnerTTLMS) * time.Millisecond)
	return ok && time.Since(time.Unix(0, alive)) < window
}

// OwnerWaits returns how many held tasks wait because their job's owner
// was not heard within api.OwnerStartWindow.
func (w *Worker) OwnerWaits() int { return int(w.ownerWaits.Load()) }

// waitStartable waits until a task may start (startable, and its owner
// heard) and reports false if ctx ended first (killed, deadline,
// stopping).
func (w *Worker) waitStartable(ctx context.Context, task api.Task) bool {
	waitingOwner := false
	defer func() {
		if waitingOwner {
			w.ownerWaits.Add(-1)
		}
	}()
	for {
		w.mu.Lock()
		ch := w.answered
		w.mu.Unlock()
		if ctx.Err() != nil {
			return false
		}
		fresh := w.startable()
		if fresh && w.ownerHeard(task) {
			return true
		}
		if fresh && !waitingOwner {
			waitingOwner = true
			w.ownerWaits.Add(1)
		} else if !fresh && waitingOwner {
			waitingOwner = false
			w.ownerWaits.Add(-1)
		}
		w.kickHeartbeat() // ask now, not at the next tick
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// ID returns the worker id.
func (w *Worker) ID() string { return w.cfg.ID }

// Fenced reports whether the worker has fenced itself (no leader), or no
// leader has answered it in the FenceAfter since it started: either way
// it fetches nothing.
func (w *Worker) Fenced() bool {
	return w.fenced.Load() || w.answeredSent.Load() == 0 && time.Since(time.Unix(0, w.lastLeader.Load())) > w.cfg.FenceAfter
}

// Running returns the number of tasks in flight.
func (w *Worker) Running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

// Executed counts tasks this worker started.
func (w *Worker) Executed() int64 { return w.executed.Load() }

// killAll kills every held task; fenced marks them killed by a fence, so
// each is reported failed (worker_lost) at once.
func (w *Worker) killAll(fenced bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.running {
		if fenced {
			h.fenced.Store(true)
		}
		h.kill()
	}
}

// kickHeartbeat asks for a heartbeat now (coalesced, spaced minAskGap
// apart) rather than at the next tick.
func (w *Worker) kickHeartbeat() {
	select {
	case w.hbKick <- struct{}{}:
	default:
	}
}

// minAskGap spaces the heartbeats held tasks ask for (hbKick): a task
// whose owner the leader has not heard lately keeps asking until the
// owner is heard or the job ends.
const minAskGap = 100 * time.Millisecond

func (w *Worker) heartbeatLoop() {
	subj, _ := bus.HeartbeatSubject(w.cfg.ID)
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	var seq uint64
	for {
		seq++
		sent := time.Now()
		w.heartbeat(subj, seq)
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		case <-w.hbKick:
			if d := minAskGap - time.Since(sent); d > 0 {
				gap := time.NewTimer(d)
				select {
				case <-w.ctx.Done():
					gap.Stop()
					return
				case <-gap.C:
				}
			}
		}
	}
}

func (w *Worker) heartbeat(subj string, seq uint64) {
	now := time.Now()
	if w.suspended.Load() {
		w.fenceIfSilent()
		return
	}
	hb := api.Heartbeat{Worker: w.cfg.ID, Capacity: w.cfg.Capacity + w.cfg.Prefetch, Seq: seq, Epoch: w.epoch, Agents: w.agentNames, Limits: w.limitReports()}
	w.mu.Lock()
	for ref := range w.running {
		hb.Running = append(hb.Running, ref)
	}
	type recentRef struct {
		ref api.TaskRef
		at  time.Time
	}
	recent := make([]recentRef, 0, len(w.recent))
	for ref, at := range w.recent {
		if now.Sub(at) > w.cfg.RecentWindow {
			delete(w.recent, ref)
			continue
		}
		recent = append(recent, recentRef{ref, at})
	}
	w.mu.Unlock()
	if len(recent) > api.MaxRecentRefs {
		// Newest first: the oldest results are the likeliest applied.
		sort.Slice(recent, func(i, j int) bool { return recent[i].at.After(recent[j].at) })
		recent = recent[:api.MaxRecentRefs]
	}
	for _, r := range recent {
		hb.Recent = append(hb.Recent, r.ref)
	}
	b, err := wire.Encode(api.KindHeartbeat, &hb)
	if err == nil {
		done := w.hbAnswers.sent(seq, now, hb.Recent, w.cfg.FenceAfter)
		reply := w.hbAnswers.inbox + "." + strconv.FormatUint(seq, 10)
		if err := w.cfg.NATS.PublishRequest(subj, reply, b); err == nil {
			// Wait at most a couple of seconds for this answer before
			// the next heartbeat: with no leader answering, the next
			// attempt must not wait a whole (possibly long) interval.
			// A later answer still counts when it comes (onAnswer).
			wait := time.NewTimer(min(w.cfg.HeartbeatInterval, 2*time.Second))
			defer wait.Stop()
			select {
			case <-done:
				return
			case <-wait.C:
			case <-w.ctx.Done():
				return
			}
		}
	}
	w.fenceIfSilent()
}

// onAnswer applies a leader's answer to one of this worker's heartbeats,
// whenever it comes. The leader answered after the heartbeat was sent,
// so it counts as heard at the send time: a leader that answers every
// heartbeat later than HeartbeatInterval (loaded, or far away) keeps the
// worker unfenced, as long as it answers within FenceAfter. An answer
// older than the newest one applied is dropped (superseded).
func (w *Worker) onAnswer(m *nats.Msg) {
	var rep api.HeartbeatReply
	if wire.Decode(m.Data, api.SmallLimits, api.KindHBReply, &rep) != nil {
		return // not an answer (a no-responders status)
	}
	seq, err := strconv.ParseUint(strings.TrimPrefix(m.Subject, w.hbAnswers.inbox+"."), 10, 64)
	if err != nil {
		return
	}
	hb, ok := w.hbAnswers.answered(seq)
	if !ok {
		return
	}
	defer close(hb.done)
	// lastLeader before answeredSent (below): fenceIfSilent and Fenced
	// read them in the other order. Under fenceMu: a fence check running
	// now either sees this answer or has finished its kills, which the
	// unfence then ends.
	w.fenceMu.Lock()
	if at := hb.at.UnixNano(); at > w.lastLeader.Load() {
		w.lastLeader.Store(at)
	}
	unfenced := w.fenced.Swap(false)
	w.fenceMu.Unlock()
	if unfenced {
		w.log.Info("leader back, unfenced", "leader", rep.Leader)
	}
	// Kills first, then the answer counts: a held task waiting
	// for one (waitStartable) sees its kill before it may start.
	w.kill(rep.Kill)
	w.settleRecent(hb.recent, &rep)
	w.noteOwners(rep.Owners, hb.at)
	w.workerTTL.Store(int64(time.Duration(rep.WorkerTTLMS) * time.Millisecond))
	w.applyGrants(rep.Grants, hb.at, time.Duration(rep.WorkerTTLMS)*time.Millisecond)
	if sent := hb.at.UnixNano(); sent > w.answeredSent.Load() {
		w.answeredSent.Store(sent)
	}
	w.mu.Lock()
	close(w.answered)
	w.answered = make(chan struct{})
	w.mu.Unlock()
}

// heartbeatAnswers tracks the heartbeats awaiting an answer. Each is sent
// with its own reply subject, <inbox>.<seq>, on one subscription of the
// worker's, so an answer that comes after the heartbeat's wait is still
// matched to it. Heartbeats older than FenceAfter are forgotten (an answer
// to them could not keep the worker unfenced), so at most about
// FenceAfter/HeartbeatInterval are tracked.
type heartbeatAnswers struct {
	inbox string
	mu    sync.Mutex
	out   map[uint64]sentHeartbeat
	// newest is the seq of the newest answered heartbeat.
	newest uint64
}

type sentHeartbeat struct {
	at     time.Time
	recent []api.TaskRef // the heartbeat's Recent, which its answer settles
	done   chan struct{} // closed once the answer is applied
}

// sent records heartbeat seq, sent at at, and forgets those sent more
// than keep ago; the channel closes when its answer is applied.
func (a *heartbeatAnswers) sent(seq uint64, at time.Time, recent []api.TaskRef, keep time.Duration) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	for s, hb := range a.out {
		if at.Sub(hb.at) > keep {
			delete(a.out, s)
		}
	}
	done := make(chan struct{})
	a.out[seq] = sentHeartbeat{at: at, recent: recent, done: done}
	return done
}

// answered takes heartbeat seq off the list; false if it is unknown (its
// answer came already, or it was forgotten) or older than the newest
// answered one.
func (a *heartbeatAnswers) answered(seq uint64) (sentHeartbeat, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	hb, ok := a.out[seq]
	if !ok || seq < a.newest {
		return sentHeartbeat{}, false
	}
	delete(a.out, seq)
	a.newest = seq
	return hb, true
}

// settleRecent stops reporting the tasks of sent (the heartbeat's
// Recent) that the leader answered as decided: their outcomes are
// applied in Raft, so no leader can take them for lost. An answer that
// did not check them (a leader of an earlier build) settles nothing:
// they stay reported for RecentWindow.
func (w *Worker) settleRecent(sent []api.TaskRef, rep *api.HeartbeatReply) {
	if !rep.RecentChecked || len(sent) == 0 {
		return
	}
	pending := make(map[api.TaskRef]bool, len(rep.RecentPending))
	for _, r := range rep.RecentPending {
		pending[r] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range sent {
		if !pending[r] {
			delete(w.recent, r)
		}
	}
}

// noteOwners records an answer's owner sightings (sent: when the
// heartbeat was sent, so the estimate errs early), keeping the latest per
// job, and forgets the jobs this worker no longer holds.
func (w *Worker) noteOwners(seen []api.OwnerSeen, sent time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range seen {
		if at := sent.Add(-time.Duration(o.AgoMS) * time.Millisecond).UnixNano(); at > w.owners[o.JobID] {
			w.owners[o.JobID] = at
		}
	}
	if len(w.owners) == 0 {
		return
	}
	held := make(map[string]bool, len(w.owners))
	for ref := range w.running {
		held[ref.JobID] = true
	}
	for job := range w.owners {
		if !held[job] {
			delete(w.owners, job)
		}
	}
}

// fenceIfSilent fences the worker when no leader answered for FenceAfter.
// A worker no leader has answered yet has nothing to fence: none of its
// tasks has started (startable), and the first answer's kills land before
// any does. It only stops fetching (Fenced) until that answer. Killing
// its held tasks failed, as worker_lost, the tasks a leader dispatched
// in its first moments of serving while the worker's heartbeat sent just
// before (which no leader answers) still waited: adk serve on a loaded
// machine, whose coordinator began serving over 4 s after its worker
// started.
//
// answeredSent is read before lastLeader: onAnswer stores them in the
// other order, so an answer seen here has its time in lastLeader. Read
// the other way round, a first answer that landed between the two reads
// looked answered and stale, and its held tasks were killed.
//
// The check holds fenceMu from its reads to its kills, as onAnswer does
// around its lastLeader and unfence: an answer that came during the check
// is either seen (no fence) or applied after the kills (and unfences).
// Without it, an answer landing between a stale read and the fence was
// followed by the fence and the kills, and the worker stayed fenced until
// the next answer.
func (w *Worker) fenceIfSilent() {
	w.fenceMu.Lock()
	answered := w.answeredSent.Load() != 0
	if time.Since(time.Unix(0, w.lastLeader.Load())) <= w.cfg.FenceAfter {
		w.fenceMu.Unlock()
		return
	}
	if !answered {
		w.fenceMu.Unlock()
		if !w.unansweredLogged.Swap(true) {
			w.log.Warn("no leader has answered yet: fetching nothing until one does")
		}
		return
	}
	fence := !w.fenced.Swap(true)
	if fence {
		// Owner death kills remote work: without a leader nobody can take
		// our results, and a full restart will fail these jobs anyway.
		w.killAll(true)
	}
	w.fenceMu.Unlock()
	if fence {
		w.log.Warn("no leader: fencing, killing running tasks")
	}
}

// heldOf is how many tasks of a job the worker holds (running, waiting
// for a run slot, or publishing their result).
func (w *Worker) heldOf(jobID string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.heldJobs[jobID]
}

// kill kills the named tasks the worker holds and marks the others seen,
// so a message of theirs that comes later is refused unrun (accept). A
// kill notice names every in-flight task of the ended job on this
// worker, delivered or not: one still in JetStream when the notice came
// would otherwise start on arrival (an owner-lost job's while its owner
// window is open) and run until the next heartbeat answer killed it.
func (w *Worker) kill(refs []api.TaskRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range refs {
		if h, ok := w.running[r]; ok {
			h.kill()
		} else {
			w.seen.add(r)
		}
	}
}

// maxFetchers bounds concurrent pull requests per worker.
const maxFetchers = 8

func (w *Worker) fetchLoop() {
	var cons jetstream.Consumer
	for cons == nil {
		ctx, cancel := context.WithTimeout(w.ctx, 2*time.Second)
		c, err := w.js.Consumer(ctx, bus.TasksStream, bus.WorkerConsumer(w.cfg.ID))
		cancel()
		if err == nil {
			cons = c
			break
		}
		// The leader creates the consumer once it leads: poll for it,
		// at most a heartbeat apart.
		select {
		case <-w.ctx.Done():
			return
		case <-time.After(min(w.cfg.HeartbeatInterval, 250*time.Millisecond)):
		}
	}
	for {
		select {
		case <-w.ctx.Done():
			return
		case w.slots <- struct{}{}:
		}
		if w.Fenced() {
			<-w.slots
			select {
			case <-w.ctx.Done():
				return
			case <-time.After(w.cfg.HeartbeatInterval):
			}
			continue
		}
		// Wait for one task, then take whatever more is already there for
		// the slots that are free now. Every message goes to a holder as
		// it arrives and is acked there first, so none waits in a buffer
		// long enough to outlive AckWait (nats.go#1929).
		if w.fetch(cons, 1, false) == 0 {
			continue
		}
		n := 0
		for n < maxFetchBatch {
			select {
			case w.slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		if n > 0 {
			w.fetch(cons, n, true)
		}
	}
}

// fetch pulls up to n tasks (n slots are held) and starts them; it
// releases the slots it did not use and returns the number started.
func (w *Worker) fetch(cons jetstream.Consumer, n int, noWait bool) int {
	var batch jetstream.MessageBatch
	var err error
	if noWait {
		batch, err = cons.FetchNoWait(n)
	} else {
		batch, err = cons.Fetch(n, jetstream.FetchMaxWait(time.Second))
	}
	got := 0
	if err == nil {
		for m := range batch.Messages() {
			got++
			w.accept(m)
		}
	}
	w.releaseSlots(n - got)
	return got
}

// maxFetchBatch bounds the messages one pull asks for.
const maxFetchBatch = 16

func (w *Worker) releaseSlots(n int) {
	for range n {
		<-w.slots
	}
}

// accept registers the message's tasks as running (so the next heartbeat
// reports them: the leader counts a task its worker was handed and does
// not report as lost) and hands the message to a holder (handOff), which
// acks it first (at most once: an unacked message is never run) and then
// holds each task until a run slot frees and its result is published;
// the message's slot is released when its last task ends.
//
// A task addressed to another incarnation of this worker id, or one this
// process has accepted before, is dropped unrun: JetStream flushes its
// consumer state periodically, so a server killed -9 can deliver an acked
// message again, to this process or to a successor under the same id. So
// is one a kill named before it came (its job ended): no result, the
// leader decided it with the job.
func (w *Worker) accept(m jetstream.Msg) {
	tasks, err := api.DecodeTasks(m.Data(), w.cfg.ID)
	if err != nil {
		// Not ours to run: dropped from the queue, never run.
		_ = m.Ack()
		<-w.slots
		return
	}
	msg := &heldMsg{m: m, hs: make([]held, 0, len(tasks))}
	w.mu.Lock()
	for _, t := range tasks {
		ref := api.TaskRef{JobID: t.JobID, Index: t.Index}
		if !breakDedupe && (t.Epoch != w.epoch || !w.seen.add(ref)) {
			w.dropped.Add(1)
			continue
		}
		ctx, cancel := context.WithDeadline(w.ctx, time.UnixMilli(t.DeadlineAt))
		h := &heldTask{cancel: cancel}
		msg.hs = append(msg.hs, held{task: t, ref: ref, ctx: ctx, h: h})
		w.running[ref] = h
		w.heldJobs[t.JobID]++
	}
	w.mu.Unlock()
	if len(msg.hs) == 0 {
		_ = m.Ack()
		<-w.slots
		return
	}
	msg.left.Store(int32(len(msg.hs)))
	// A job's first tasks here need its spec (a request to the
	// coordinators): ask for it now, alongside the ack, not after it. It
	// is only read; nothing starts before the ack and the start gates.
	for i, h := range msg.hs {
		if i > 0 && h.task.JobID == msg.hs[i-1].task.JobID {
			continue
		}
		w.mu.Lock()
		_, known := w.specs[h.task.JobID]
		w.mu.Unlock()
		if !known {
			w.wg.Add(1)
			go func() { defer w.wg.Done(); _, _ = w.spec(w.ctx, h.task.JobID) }()
		}
	}
	w.handOff(holdJob{msg: msg, i: ackFirst})
}

// heldMsg is an accepted task message: its tasks, held from accept until
// each ends, and how many have not ended yet (the last releases the
// message's slot).
type heldMsg struct {
	m    jetstream.Msg
	hs   []held
	left atomic.Int32
}

// held is one task of a heldMsg.
type held struct {
	task api.Task
	ref  api.TaskRef
	ctx  context.Context
	h    *heldTask
}

// holdJob is a holder's work: ack the message (i is ackFirst) or hold its
// task i.
type holdJob struct {
	msg *heldMsg
	i   int
}

// ackFirst names a holdJob that acks its message, hands the message's
// other tasks to holders and holds the first itself.
const ackFirst = -1

// holder holds accepted tasks until the worker stops. The holders
// (Capacity+Prefetch of them, as many as the tasks the leader hands this
// worker at once) are long-lived for the reason the runners are: a
// fresh goroutine per task grew its stack through the ack and the result
// publish every task (runtime.newstack was ~2.5% of a worker's CPU).
func (w *Worker) holder() {
	r := &runReq{done: make(chan struct{}, 1)}
	for {
		select {
		case j := <-w.holdq:
			w.hold(j, r)
		case <-w.ctx.Done():
			return
		}
	}
}

// handOff gives j to an idle holder, or to a goroutine of its own when
// every holder is busy (more tasks held than the holders: a leader that
// over-dispatches, or a failover's overlap), so it never waits.
func (w *Worker) handOff(j holdJob) {
	select {
	case w.holdq <- j:
	default:
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.hold(j, &runReq{done: make(chan struct{}, 1)})
		}()
	}
}

// hold does a holdJob; r is the holder's run request, reused task after
// task.
func (w *Worker) hold(j holdJob, r *runReq) {
	msg := j.msg
	if j.i == ackFirst {
		if w.ack(msg.m) != nil {
			for _, h := range msg.hs {
				w.endHeld(msg, h, false)
			}
			return
		}
		for i := 1; i < len(msg.hs); i++ {
			w.handOff(holdJob{msg: msg, i: i})
		}
		j.i = 0
	}
	h := msg.hs[j.i]
	// A runner taking the request is the task's run slot: a runner that
	// finishes a sample takes the next waiting task itself, with no other
	// goroutine to schedule between a model answer and the next sample's
	// start.
	*r = runReq{ctx: h.ctx, task: h.task, h: h.h, done: r.done}
	select {
	case w.runq <- r:
		// The run slot is the sample's; the result's group commit
		// (resultWindow) and publish do not hold it.
		<-r.done
		if r.ok {
			if err := w.results.publish(r.res); err != nil {
				w.log.Warn("publish result", "task", h.task.ID(), "err", err)
			}
		}
	case <-h.ctx.Done():
		// Killed or past its deadline while waiting for a run slot: never
		// started, and the leader owns the outcome.
	}
	*r = runReq{done: r.done} // keep no task or result between tasks
	if h.h.fenced.Load() {
		// Killed by our own fence: the leader learns it now (failed,
		// worker_lost), not at the task's deadline.
		res := api.Result{JobID: h.task.JobID, Index: h.task.Index, Worker: w.cfg.ID, Tag: evalengine.TagWorkerLost}
		if err := w.results.publish(res); err != nil {
			w.log.Warn("report fenced task", "task", h.task.ID(), "err", err)
		}
	}
	w.endHeld(msg, h, true)
}

// endHeld ends a held task: it leaves the running set and, acked and not
// fenced, is listed as finished (a result may be in flight); the
// message's last task to end releases its slot.
func (w *Worker) endHeld(msg *heldMsg, h held, acked bool) {
	h.h.cancel()
	w.mu.Lock()
	delete(w.running, h.ref)
	if w.heldJobs[h.ref.JobID]--; w.heldJobs[h.ref.JobID] <= 0 {
		delete(w.heldJobs, h.ref.JobID)
	}
	if acked && !h.h.fenced.Load() {
		// Not acked: never run and no result coming; unreported, the
		// leader fails it as lost. Fenced: reported failed already.
		w.recent[h.ref] = time.Now()
	}
	w.mu.Unlock()
	if msg.left.Add(-1) == 0 {
		<-w.slots
	}
}

// ack double-acks a task message, retrying across a reconnect: the
// message stays pending for us until AckWait, and is never redelivered
// (MaxDeliver 1), so a task runs only after a confirmed ack.
func (w *Worker) ack(m jetstream.Msg) error {
	var err error
	for attempt := 0; attempt < 3 && w.ctx.Err() == nil; attempt++ {
		ctx, cancel := context.WithTimeout(w.ctx, 2*time.Second)
		err = m.DoubleAck(ctx)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

// runReq is one sample handed to a runner.
type runReq struct {
	ctx  context.Context
	task api.Task
	h    *heldTask
	res  api.Result
	ok   bool
	done chan struct{} // one send when the runner is done with it
}

// runner runs samples until the worker stops. The Capacity runners are
// the worker's run slots: each takes one held task at a time from runq.
// Samples run on these long-lived goroutines, not on a fresh one per
// task: a sample's call chain (engine, agent, tracer, signal encoder) is
// deep, and a fresh goroutine grew its stack from the minimum and copied
// it every task (runtime.newstack was ~43 µs a task in
// BenchmarkClusterEval_10kTasks' CPU profile, more with tracing on). A
// runner keeps its grown stack.
//
// Each runner runs its samples in a slot of its own (evalengine's
// SampleSlot): a sample makes one context, which the agent Runner and
// the model call share, rather than three nested ones. A kill of the
// running task cancels the slot; the runner then makes a new one.
func (w *Worker) runner() {
	slot := evalengine.NewSampleSlot(w.ctx)
	defer func() { slot.Close() }()
	for {
		select {
		case r := <-w.runq:
			// Only with a fresh leader answer: a worker resumed after a
			// stop asks first, and the answer kills the tasks the leader
			// failed meanwhile.
			if w.waitStartable(r.ctx, r.task) {
				r.res, r.ok = w.run(r.ctx, r.task, r.h, slot)
			}
			r.done <- struct{}{}
			if slot.Context().Err() != nil && w.ctx.Err() == nil {
				slot.Close()
				slot = evalengine.NewSampleSlot(w.ctx)
			}
		case <-w.ctx.Done():
			return
		}
	}
}

// run runs one sample and returns its result to publish; ok is false when
// there is none (no job spec, a bad index, or the task was killed: the
// leader owns the outcome). ctx is the task's; the sample runs in slot
// (its context derives from the slot's, with ctx's deadline, and a kill
// of h cancels the slot), or, with no slot or h, or h killed already,
// under ctx.
func (w *Worker) run(ctx context.Context, task api.Task, h *heldTask, slot *evalengine.SampleSlot) (res api.Result, ok bool) {
	w.executed.Add(1)
	spec, err := w.spec(ctx, task.JobID)
	var sample evalengine.SampleResult
	switch {
	case err != nil:
		w.log.Warn("job spec", "job", task.JobID, "err", err)
		return res, false // no result: the leader fails the task when it times out
	case task.CaseIndex < 0 || task.CaseIndex >= len(spec.p.Set.Cases) || task.Sample < 0 || task.Sample >= spec.p.Options.Samples:
		return res, false
	case !w.waitStartable(ctx, task):
		// Asked again after the spec: its fetch may have outlasted the
		// owner (a NATS outage), and no provider call may start then.
		return res, false
	default:
		ta, ok := w.agents[spec.agent]
		if !ok {
			sample = evalengine.ErrorSample(spec.p.Set, task.CaseIndex, task.Sample, evalengine.TagAdapterInitFailed)
			break
		}
		var obs observability.Observer // nil: untraced (a nil *Tracer is not)
		if w.tracer != nil {
			obs = w.tracer
		}
		sample, err = w.runSample(ctx, task, h, slot, spec, ta.adapter(spec.p.Options.CaptureEvents), obs)
		if err != nil {
			sample = evalengine.ErrorSample(spec.p.Set, task.CaseIndex, task.Sample, evalengine.TagAdapterFailed)
		}
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) || w.ctx.Err() != nil {
		return res, false // killed: cancelled, lost or fenced; the leader owns the outcome
	}
	body, err := json.Marshal(sample)
	if err != nil || len(body) > api.MaxResultBytes {
		body, _ = json.Marshal(evalengine.ErrorSample(spec.p.Set, task.CaseIndex, task.Sample, evalengine.TagInvalidAdapterResult))
	}
	return api.Result{JobID: task.JobID, Index: task.Index, Worker: w.cfg.ID, Sample: body,
		Error: sample.Status == evalengine.SampleStatusError}, true
}

// runSample runs task's sample in slot when h enters it (see run), else
// under ctx, the task's context. A spent slot (a kill's; the runner
// replaces it) is never entered: its sample would end cancelled without
// the task's having been.
func (w *Worker) runSample(ctx context.Context, task api.Task, h *heldTask, slot *evalengine.SampleSlot, spec *jobSpec, a evalengine.Adapter, obs observability.Observer) (evalengine.SampleResult, error) {
	parent := ctx
	inSlot := h != nil && slot != nil && slot.Context().Err() == nil && h.enter(slot)
	if inSlot {
		defer h.leave()
		parent = slot.Context()
	}
	if obs != nil {
		parent = observability.ContextWithEval(parent, observability.EvalIDs{JobID: task.JobID, WorkerID: w.cfg.ID})
	}
	if !inSlot {
		return spec.runner.RunObserved(parent, a, obs, task.CaseIndex, task.Sample)
	}
	deadline, _ := ctx.Deadline()
	return spec.runner.RunInSlot(parent, slot, deadline, a, obs, task.CaseIndex, task.Sample)
}

// maxSpecs bounds the job-spec cache.
const maxSpecs = 64

func (w *Worker) spec(ctx context.Context, jobID string) (*jobSpec, error) {
	w.mu.Lock()
	s := w.specs[jobID]
	fetch := s == nil
	if fetch {
		if len(w.specs) >= maxSpecs {
			for k, old := range w.specs {
				if isClosed(old.ready) {
					delete(w.specs, k)
					w.signals.forget(k)
					break
				}
			}
		}
		s = &jobSpec{ready: make(chan struct{})}
		w.specs[jobID] = s
	}
	w.mu.Unlock()
	if fetch {
		// The worker's context, not the task's: a task killed meanwhile
		// must not fail the fetch its siblings wait for.
		var scope string
		s.p, s.runner, s.agent, scope, s.err = w.fetchSpec(w.ctx, jobID)
		if s.err == nil {
			w.signals.own(jobID, scope)
		}
		close(s.ready)
		if s.err != nil {
			// Not cached: the next task of the job asks again.
			w.mu.Lock()
			if w.specs[jobID] == s {
				delete(w.specs, jobID)
			}
			w.mu.Unlock()
		}
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.err != nil {
		return nil, s.err
	}
	return s, nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// fetchSpec asks the coordinators for a job's spec and validates it once.
func (w *Worker) fetchSpec(ctx context.Context, jobID string) (*evalengine.Prepared, *evalengine.SampleRunner, string, string, error) {
	subj, _ := bus.CoordSubject(api.OpJobSpec)
	req, err := wire.Encode(api.KindRequest, &api.Request{Scope: "_", JobID: jobID})
	if err != nil {
		return nil, nil, "", "", err
	}
	var lastErr error
	for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		msg, err := w.cfg.NATS.RequestWithContext(rctx, subj, req)
		cancel()
		if err != nil {
			lastErr = err
			continue
		}
		var rep api.Reply
		if err := wire.Decode(msg.Data, api.ReplyLimits, api.KindReply, &rep); err != nil {
			return nil, nil, "", "", err
		}
		if rep.Err != nil || rep.Spec == nil {
			// A follower may not have applied the job yet.
			lastErr = rep.Err
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if rep.Spec.SetSize > int64(len(rep.Spec.Set)) {
			if rep.Spec.Set, err = w.fetchSetPages(ctx, jobID, rep.Spec); err != nil {
				return nil, nil, "", "", err
			}
		}
		p, err := evalengine.Prepare(rep.Spec.Set, rep.Spec.Criteria, rep.Spec.Options)
		if err != nil {
			return nil, nil, "", "", err
		}
		r, err := evalengine.NewSampleRunner(p.Set, p.Metrics, p.Options)
		if err != nil {
			return nil, nil, "", "", err
		}
		return p, r, rep.Spec.Agent, rep.Spec.Scope, nil
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	return nil, nil, "", "", fmt.Errorf("job spec %s: %w", jobID, lastErr)
}

// fetchSetPages reads the rest of a set larger than one reply (an
// uploaded set), page after page from the offset it has, and checks the
// whole against the revision's digest. Pages may come from different
// coordinators: they all hold the same revision, and the digest says so.
func (w *Worker) fetchSetPages(ctx context.Context, jobID string, first *api.JobSpec) ([]byte, error) {
	if first.SetSize > evalrecord.MaxSetUploadBytes {
		return nil, fmt.Errorf("job spec %s: set of %d bytes, over %d", jobID, first.SetSize, evalrecord.MaxSetUploadBytes)
	}
	subj, _ := bus.CoordSubject(api.OpJobSpec)
	set := make([]byte, 0, first.SetSize)
	set = append(set, first.Set...)
	for int64(len(set)) < first.SetSize {
		req, err := wire.Encode(api.KindRequest, &api.Request{Scope: "_", JobID: jobID, Offset: int64(len(set))})
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := w.cfg.NATS.RequestWithContext(rctx, subj, req)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("job spec %s: set page at %d: %w", jobID, len(set), err)
		}
		var rep api.Reply
		if err := wire.Decode(msg.Data, api.ReplyLimits, api.KindReply, &rep); err != nil {
			return nil, err
		}
		if rep.Err != nil {
			return nil, fmt.Errorf("job spec %s: set page at %d: %w", jobID, len(set), rep.Err)
		}
		if rep.Spec == nil || len(rep.Spec.Set) == 0 || rep.Spec.SetSize != first.SetSize || rep.Spec.SetDigest != first.SetDigest ||
			int64(len(set)+len(rep.Spec.Set)) > first.SetSize {
			return nil, fmt.Errorf("job spec %s: set page at %d does not continue the set", jobID, len(set))
		}
		set = append(set, rep.Spec.Set...)
	}
	if d := canonjson.DigestBytes(set); d != first.SetDigest {
		return nil, fmt.Errorf("job spec %s: set digest %s, the revision's is %s", jobID, d, first.SetDigest)
	}
	return set, nil
}

// agentNames returns the names a worker announces: sorted, at most
// api.MaxHeartbeatAgents.
func agentNames(agents map[string]trustedAgent) []string {
	names := make([]string, 0, len(agents))
	for n := range agents {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > api.MaxHeartbeatAgents {
		names = names[:api.MaxHeartbeatAgents]
	}
	return names
}
