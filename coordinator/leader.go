package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// monitorLeadership runs the leader loop while this node leads (nomad
// monitorLeadership). LeaderCh may coalesce transitions, so a true after
// a true restarts the loop.
func (n *Node) monitorLeadership() {
	var (
		stop func()
		wg   sync.WaitGroup
	)
	stopLeader := func() {
		if stop != nil {
			stop()
			wg.Wait()
			stop = nil
		}
	}
	defer stopLeader()
	for {
		select {
		case <-n.ctx.Done():
			return
		case isLeader := <-n.raft.LeaderCh():
			stopLeader()
			if !isLeader {
				continue
			}
			ctx, cancel := context.WithCancel(n.ctx)
			stop = cancel
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.leaderLoop(ctx)
			}()
		}
	}
}

// leaderLoop: Barrier, decide failover or full restart from the
// coordinator lease, then renew the lease, consume results and schedule
// until leadership ends.
func (n *Node) leaderLoop(ctx context.Context) {
	t := n.cfg.Timing
	if err := n.raft.Barrier(10 * time.Second).Error(); err != nil {
		n.log.Warn("leader barrier", "err", err)
		return
	}
	if err := n.establish(ctx); err != nil {
		n.log.Warn("leader establish", "err", err)
		return
	}
	gainedAt := time.Now()
	// The owned jobs before the first answer: without them a held task of
	// an owned job waits (api.Task.OwnerTTLMS).
	if v, err := n.readView(); err == nil {
		n.setOwned(v.active)
	}
	defer n.setOwned(nil)
	n.limits.lead(time.Now())
	defer n.limits.lead(time.Time{})
	n.leading.Store(true)
	defer n.leading.Store(false)

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.consumeResults(ctx)
	}()
	adv, err := n.nc.Subscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+bus.TasksStream+".*", func(m *nats.Msg) {
		var a struct {
			StreamSeq uint64 `json:"stream_seq"`
		}
		if json.Unmarshal(m.Data, &a) == nil && a.StreamSeq > 0 {
			n.deleteTaskMsg(a.StreamSeq)
		}
	})
	if err == nil {
		defer adv.Unsubscribe()
	}

	// Task publishes are pipelined: the loop does not wait for their
	// acks; this goroutine does, and logs the failures (a recorded task
	// that never reached the stream is failed by reconciliation).
	d := newDispatched()
	acks := make(chan []pendingPub, 64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.watchPublishAcks(ctx, d, acks)
	}()
	defer close(acks)

	tick := time.NewTicker(t.Tick)
	defer tick.Stop()
	lastLease := time.Now()
	var offNATSSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-n.kick:
		}
		// Without NATS this leader hears no heartbeats, results or
		// owners: take no liveness decision.
		if n.handOffWithoutNATS(&offNATSSince) {
			continue
		}
		if !offNATSSince.IsZero() {
			// Back on NATS: heartbeats missed meanwhile are not losses;
			// grant the failover grace again.
			offNATSSince, gainedAt = time.Time{}, time.Now()
		}
		if time.Since(lastLease) >= t.LeaseInterval {
			lastLease = time.Now()
			if _, err := n.propose(ctx, cmdLease, &leaseCmd{Lease: evalrecord.Lease{LeaderID: n.cfg.ID, At: lastLease.UnixMilli()}}); err != nil {
				n.log.Warn("lease renewal", "err", err)
			}
		}
		if !n.IsLeader() || n.stopped.Load() {
			return
		}
		if err := n.leaderTick(ctx, gainedAt, d, acks); err != nil && ctx.Err() == nil {
			n.log.Warn("leader tick", "err", err)
		}
	}
}

// deleteTaskMsg removes a task message whose only delivery was never
// acked (MaxDeliver=1 leaves it in the work queue; nats-server#5564). The
// task itself is failed by reconciliation: it was dispatched, so it is
// never dispatched again.
func (n *Node) deleteTaskMsg(seq uint64) {
	ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	defer cancel()
	if s, err := n.js.Stream(ctx, bus.TasksStream); err == nil {
		_ = s.DeleteMsg(ctx, seq)
	}
}

func (n *Node) establish(ctx context.Context) error {
	var lease evalrecord.Lease
	var counts evalstore.Counts
	if err := n.store.View(func(tx *evalstore.Tx) (err error) {
		if lease, err = tx.Lease(); err != nil {
			return err
		}
		counts, err = tx.Counts()
		return err
	}); err != nil {
		return err
	}
	now := time.Now()
	// No lease at all: no leader ever established, so nothing was ever
	// dispatched (dispatch starts after this point).
	stale := lease.At != 0 && now.Sub(time.UnixMilli(lease.At)) > n.cfg.Timing.FenceLease
	if stale && counts.Active+counts.Queued > 0 {
		// No leader renewed the lease for longer than the workers' fence:
		// every worker has killed its tasks, nobody owned the work through
		// the gap. A full restart, not a failover (DESIGN.md). The
		// in-flight index is read first so that the recovery's kill
		// notices name their tasks: a worker that fences no more refuses
		// the ones still in JetStream when it fetches again.
		if _, err := n.fsm.inflight.byWorker(n.store); err != nil {
			return err
		}
		res, err := n.propose(ctx, cmdRecover, &recoverCmd{Reason: evalrecord.ReasonServiceRestarted, Now: now.UnixMilli()})
		if err != nil {
			return err
		}
		n.log.Info("full restart: failed active jobs", "jobs", res.Recovered,
			"lease_age", now.Sub(time.UnixMilli(lease.At)).Round(time.Millisecond), "fence_lease", n.cfg.Timing.FenceLease)
	}
	first := &leaseCmd{Lease: evalrecord.Lease{LeaderID: n.cfg.ID, At: now.UnixMilli()}}
	if n.fsm.Cluster() == "" && !n.cfg.earlierBuild {
		// The log has no cluster identity (a new cluster, or one whose
		// leaders so far were of earlier builds): draw one. The barrier
		// above applied every entry before this term, so an identity
		// recorded earlier is known here; if two drawn by successive
		// leaders both reach the log, the last applied holds.
		first.Cluster = newClusterID()
	}
	if _, err := n.propose(ctx, cmdLease, first); err != nil {
		return err
	}
	// A leader elected while it has no NATS connection cannot set up the
	// streams, and nothing else would end its leadership: it hands it on
	// as a serving leader does (seen: a partitioned leader stuck here, the
	// cluster without a serving leader for as long as the partition).
	var offNATSSince time.Time
	for {
		if !n.handOffWithoutNATS(&offNATSSince) {
			offNATSSince = time.Time{}
			err := n.ensureTopology(ctx)
			if err == nil {
				return nil
			}
			n.log.Warn("ensure topology", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// handOffWithoutNATS reports whether the node's NATS connection is down.
// Raft keeps a leader without NATS leader, so once it has been down for
// WorkerTTL/2 (since *since, which it sets; the caller clears it once
// connected) the node transfers leadership to a peer that may reach
// NATS, and again every WorkerTTL/2 while still down.
func (n *Node) handOffWithoutNATS(since *time.Time) bool {
	if n.nc.IsConnected() {
		return false
	}
	if since.IsZero() {
		*since = time.Now()
	}
	if time.Since(*since) >= n.cfg.Timing.WorkerTTL/2 {
		n.log.Warn("no NATS connection: transferring leadership")
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer", "err", err)
		}
		*since = time.Now()
	}
	return true
}

func (n *Node) ensureTopology(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := bus.EnsureTaskStreams(ctx, n.js, n.cfg.Streams); err != nil {
		return err
	}
	for _, w := range n.cfg.Workers {
		if err := bus.EnsureWorkerConsumer(ctx, n.js, w, 1024, n.cfg.Timing.TaskAckWait); err != nil {
			return err
		}
	}
	if n.cfg.Signals != nil {
		// Traces only: the eval service does not wait on them.
		if _, err := bus.EnsureSignalStream(ctx, n.js, *n.cfg.Signals); err != nil {
			n.log.Warn("ensure signal stream", "stream", bus.SignalStreamName, "err", err)
		}
	}
	return nil
}

// leaderView is one consistent read of what the scheduler needs.
type leaderView struct {
	active   []*evalrecord.Job
	inflight map[string][]*evalrecord.Task
}

func (n *Node) readView() (*leaderView, error) {
	v := &leaderView{}
	err := n.store.View(func(tx *evalstore.Tx) (err error) {
		v.active, err = tx.ActiveJobs()
		return err
	})
	if err != nil {
		return nil, err
	}
	v.inflight, err = n.fsm.inflight.byWorker(n.store)
	return v, err
}

func (n *Node) leaderTick(ctx context.Context, gainedAt time.Time, d *dispatched, acks chan<- []pendingPub) error {
	now := time.Now()
	v, err := n.readView()
	if err != nil {
		return err
	}
	n.setOwned(v.active)
	if err := n.failLostTasks(ctx, v, now, gainedAt, d); err != nil {
		return err
	}
	if err := n.checkJobs(ctx, v, now, gainedAt); err != nil {
		return err
	}
	return n.dispatch(ctx, v, now, d, acks)
}

// failLostTasks fails, through Raft, the in-flight tasks of workers that
// missed their lease, tasks past their deadline, and tasks their worker
// was handed (they left its queue) but no heartbeat reports DispatchGrace
// later. None is ever dispatched again; the queued messages of failed
// tasks are deleted so they never reach the worker.
func (n *Node) failLostTasks(ctx context.Context, v *leaderView, now, gainedAt time.Time, d *dispatched) error {
	t := n.cfg.Timing
	var outs []evalstore.Outcome
	var lostWorkers []string
	var drop []uint64
	workers := make([]string, 0, len(v.inflight))
	for w := range v.inflight {
		workers = append(workers, w)
	}
	sort.Strings(workers)
	live := map[string]bool{}
	for _, w := range workers {
		tasks := v.inflight[w]
		seen, ok := n.live.worker(w)
		if now.Sub(gainedAt) > t.WorkerTTL && (!ok || now.Sub(seen.at) > t.WorkerTTL) {
			lostWorkers = append(lostWorkers, w)
			n.log.Info("worker silent: its tasks failed as worker_lost", "worker", w, "tasks", len(tasks), "heard", ok)
			for _, tk := range tasks {
				outs = append(outs, evalstore.Outcome{JobID: tk.JobID, Index: tk.Index, Worker: w,
					State: evalrecord.TaskFailed, Tag: evalengine.TagWorkerLost})
			}
			continue
		}
		live[w] = true
		var suspects, timedOut []api.TaskRef
		replaced := 0
		for _, tk := range tasks {
			ref := api.TaskRef{JobID: tk.JobID, Index: tk.Index}
			switch {
			case ok && tk.Epoch != 0 && seen.hb.Epoch != 0 && tk.Epoch != seen.hb.Epoch:
				// A new incarnation heartbeats under this id: the one the
				// task was for is gone (the new one drops its messages).
				// Failing them now frees the capacity they hold at once,
				// instead of after the dispatch grace.
				outs = append(outs, evalstore.Outcome{JobID: tk.JobID, Index: tk.Index, Worker: w,
					State: evalrecord.TaskFailed, Tag: evalengine.TagWorkerLost})
				replaced++
			case now.UnixMilli() > tk.DeadlineAt:
				outs = append(outs, evalstore.Outcome{JobID: tk.JobID, Index: tk.Index, Worker: w,
					State: evalrecord.TaskFailed, Tag: evalengine.TagTimeout})
				timedOut = append(timedOut, ref)
			case ok && seen.at.After(gainedAt) && seen.at.Sub(time.UnixMilli(tk.AssignedAt)) > t.DispatchGrace:
				suspects = append(suspects, ref) // unless reported, below
			}
		}
		if len(suspects) > 0 {
			// Built only when some task is old enough to matter: on most
			// ticks none is, and a heartbeat lists thousands of tasks.
			reported := make(map[api.TaskRef]bool, len(seen.hb.Running)+len(seen.hb.Recent))
			for _, r := range seen.hb.Running {
				reported[r] = true
			}
			for _, r := range seen.hb.Recent {
				reported[r] = true
			}
			keep := suspects[:0]
			for _, ref := range suspects {
				if !reported[ref] && !d.isPublishing(ref) {
					keep = append(keep, ref)
				}
			}
			suspects = keep
		}
		if replaced > 0 {
			n.log.Info("worker restarted: its predecessor's tasks failed as worker_lost", "worker", w, "tasks", replaced)
		}
		if len(suspects)+len(timedOut) == 0 {
			continue
		}
		// Unreported long after dispatch: lost only if it left the queue
		// and still no heartbeat has it a grace later. Unknown queue: no
		// conclusion this tick.
		scan, sok := n.queued(ctx, d, w, now, t.DispatchGrace/4)
		if !sok {
			continue
		}
		var unreported []api.TaskRef
		for _, ref := range suspects {
			if _, q := scan.queued[ref]; q {
				delete(d.handedAt, ref)
				continue
			}
			h, handed := d.handedAt[ref]
			if !handed {
				d.handedAt[ref] = scan.at
				continue
			}
			if seen.at.Sub(h) > t.DispatchGrace {
				outs = append(outs, evalstore.Outcome{JobID: ref.JobID, Index: ref.Index, Worker: w,
					State: evalrecord.TaskFailed, Tag: evalengine.TagWorkerLost})
				unreported = append(unreported, ref)
			}
		}
		if len(unreported) > 0 {
			// Assigned in Raft, never queued nor reported: typically a
			// leader killed between the assign and its publish.
			n.log.Info("tasks out of the queue and unreported: failed as worker_lost", "worker", w, "tasks", len(unreported), "first", unreported[0].JobID+"/"+strconv.Itoa(unreported[0].Index))
		}
		// Failed tasks still queued (timed out while waiting) are deleted
		// with their message when nothing else in it may run.
		failed := make(map[api.TaskRef]bool, len(timedOut))
		for _, ref := range timedOut {
			failed[ref] = true
		}
		drop = append(drop, scan.droppable(failed)...)
	}
	d.forgetExcept(v.inflight, live)
	if err := n.finishOutcomes(ctx, outs, now); err != nil {
		return err
	}
	n.dropQueued(ctx, drop)
	for _, w := range lostWorkers {
		// The worker's undelivered backlog must never reach it later.
		n.purgeWorker(ctx, w)
	}
	return nil
}

func (n *Node) purgeWorker(ctx context.Context, w string) {
	subj, err := bus.TaskSubject(w)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s, err := n.js.Stream(ctx, bus.TasksStream); err == nil {
		_ = s.Purge(ctx, jetstream.WithPurgeSubject(subj))
	}
}

// maxFinishSampleBytes bounds the sample bytes of one finish entry (one
// sample larger than this goes alone): every outcome's sample under the
// store's 64 KiB value threshold is written into the Badger memtable, and
// one transaction may hold 15% of a memtable (2.4 MiB at the eval store's
// 16 MiB): 512 outcomes of 5 KiB samples would not fit, and the entry
// would be refused on every node. It also keeps entries (and what each
// follower receives at once) near 1 MiB.
const maxFinishSampleBytes = 1 << 20

// finishChunk is how many of outs the next finish entry carries: at most
// max, and no more than maxFinishSampleBytes of samples unless one alone.
func finishChunk(outs []evalstore.Outcome, max int) int {
	k, bytes := 0, 0
	for k < min(len(outs), max) && (k == 0 || bytes+len(outs[k].Sample) <= maxFinishSampleBytes) {
		bytes += len(outs[k].Sample)
		k++
	}
	return k
}

// finishOutcomes proposes outs in finish entries of at most
// MaxTasksPerCommand outcomes and maxFinishSampleBytes of samples.
func (n *Node) finishOutcomes(ctx context.Context, outs []evalstore.Outcome, now time.Time) error {
	for len(outs) > 0 {
		k := finishChunk(outs, n.cfg.Limits.MaxTasksPerCommand)
		res, err := n.propose(ctx, cmdFinish, &finishCmd{Outs: outs[:k], Now: now.UnixMilli()})
		if err != nil {
			return err
		}
		for _, ok := range res.Accepted {
			if !ok {
				n.rejected.Add(1)
			}
		}
		outs = outs[k:]
	}
	return nil
}

// checkJobs finishes jobs whose tasks are all terminal, and times out or
// cancels (owner lost) the others.
func (n *Node) checkJobs(ctx context.Context, v *leaderView, now, gainedAt time.Time) error {
	for _, j := range v.active {
		var tc *transitionCmd
		switch {
		case j.Progress.Done >= j.Progress.Total:
			var err error
			if tc, err = n.completeJob(j, now); err != nil {
				return err
			}
		case j.Spec.JobTTLMS > 0 && now.UnixMilli() > j.StartedAt+j.Spec.JobTTLMS:
			tc = &transitionCmd{To: evalrecord.PhaseTimedOut, Patch: evalstore.Patch{FinishedAt: now.UnixMilli(), Reason: evalrecord.ReasonDeadlineExceeded}}
		case j.Spec.Owner != "" && n.ownerExpired(j, now):
			tc = &transitionCmd{To: evalrecord.PhaseCancelled, Patch: evalstore.Patch{FinishedAt: now.UnixMilli(), Reason: evalrecord.ReasonOwnerLost}}
		case j.Progress.Dispatched < j.Progress.Total && n.agentUnavailable(j, now, gainedAt):
			// Fail closed (CONTRACTS §6): nothing could ever run the rest,
			// so the job ends now, not at its deadline; a worker joining
			// later finds it terminal.
			tc = &transitionCmd{To: evalrecord.PhaseFailed, Patch: evalstore.Patch{FinishedAt: now.UnixMilli(), Reason: api.CodeWorkerNodeUnavailable}}
		default:
			continue
		}
		tc.Scope, tc.JobID, tc.Expected, tc.Adm, tc.Now = j.Scope, j.JobID, []evalrecord.Phase{evalrecord.PhaseRunning}, n.admission(), now.UnixMilli()
		proposed := time.Now()
		if tc.doc != nil {
			n.fsm.offerResult(j.JobID, tc.Patch.ResultDigest, tc.doc)
		}
		_, err := n.propose(ctx, cmdTransition, tc)
		if tc.doc != nil {
			n.fsm.withdrawResult(j.JobID)
		}
		if tc.To == evalrecord.PhaseCompleted && tc.timing != nil {
			t := tc.timing
			commit := time.Since(proposed)
			n.log.Info("job completed", "job", j.JobID, "tasks", j.Progress.Total, "result_bytes", tc.Patch.ResultSize, "records", tc.Patch.ResultRecords, "cached", t.cached,
				"read_ms", ms(t.read), "decode_ms", ms(t.decode), "aggregate_ms", ms(t.aggregate), "encode_ms", ms(t.encode),
				"digest_ms", ms(t.digest), "commit_ms", ms(commit), "store_ms", ms(time.Duration(n.fsm.completionApply.Load())),
				"tail_ms", ms(t.total+commit), "err", err)
		}
		if err != nil && tc.To == evalrecord.PhaseCompleted && !errors.Is(err, evalrecord.ErrStalePhase) && !api.AsError(err).Retryable() {
			// The result cannot be stored (quota, transaction size): the
			// service stops, fail closed (CONTRACTS §6), and the job stays
			// running; failing only the job would lose its result silently.
			n.failStop(api.Errorf(api.CodeResultPersistenceFailed, "job %s: %s", j.JobID, api.AsError(err).Code))
			return nil
		}
		if err != nil && !errors.Is(err, evalrecord.ErrStalePhase) {
			return err
		}
	}
	return nil
}

// agentUnavailable reports whether no live allowlisted worker has offered
// the job's agent for two worker leases: since the job started, this node
// became leader, or the last worker offering it was heard. Two, so a
// worker restarted under its id (a deploy, a crash loop) does not fail
// the jobs only it serves.
func (n *Node) agentUnavailable(j *evalrecord.Job, now, gainedAt time.Time) bool {
	grace := 2 * n.cfg.Timing.WorkerTTL
	since := gainedAt
	if s := time.UnixMilli(j.StartedAt); s.After(since) {
		since = s
	}
	if now.Sub(since) <= grace {
		return false
	}
	for _, w := range n.cfg.Workers {
		seen, ok := n.live.worker(w)
		if ok && now.Sub(seen.at) <= grace && slices.Contains(seen.hb.Agents, j.Spec.Agent) {
			return false
		}
	}
	return true
}

// pushKills tells the workers holding the in-flight tasks of jobs that
// just ended (kills, by worker: applyResult.kills) to kill them now
// (adk.kill.<worker>, core NATS), instead of at their next heartbeat
// answer: an ended job stops calling its provider within a round trip,
// and a task of it still in JetStream is refused when it comes. Only the
// leader sends them (applyLocal). Best effort: the heartbeat answer still
// kills whatever a lost notice missed.
func (n *Node) pushKills(kills map[string][]api.TaskRef) {
	if len(kills) == 0 {
		return
	}
	tasks := 0
	for _, refs := range kills {
		tasks += len(refs)
	}
	n.log.Info("kill notices sent", "workers", len(kills), "tasks", tasks)
	for w, refs := range kills {
		subj, err := bus.KillSubject(w)
		if err != nil {
			continue
		}
		for len(refs) > 0 {
			k := min(len(refs), maxKillRefs)
			part := api.HeartbeatReply{Leader: n.cfg.ID, Kill: refs[:k]}
			if b, err := wire.Encode(api.KindHBReply, &part); err == nil {
				_ = n.nc.Publish(subj, b)
			}
			refs = refs[k:]
		}
	}
}

// maxKillRefs bounds one kill notice (well inside api.SmallLimits).
const maxKillRefs = 2048

// ownerExpired reports whether a job's owner lease lapsed: no renewal
// heard for its TTL while this node listened (ownerLapsed).
func (n *Node) ownerExpired(j *evalrecord.Job, now time.Time) bool {
	last, heard := n.live.owner(j.Spec.Owner)
	return ownerLapsed(time.Duration(j.Spec.OwnerTTLMS)*time.Millisecond, time.UnixMilli(j.CreatedAt),
		n.live.listening(now, n.nc.IsConnected()), last, heard, now)
}

// ownerLapsed is the owner-lost rule: the owner has been silent for ttl
// since the job was created, since its last renewal heard, and since this
// node has listened without a break (listenFrom; zero: not listening, no
// decision). Every coordinator records renewals, so a new leader that was
// listening as a follower counts the silence from before its election:
// it does not grant the dead owner a fresh lease (issue 17: owner death
// next to a failover took up to 7.4 s). A node that just started or
// reconnected to NATS may have missed renewals, and counts from then.
func ownerLapsed(ttl time.Duration, created, listenFrom, last time.Time, heard bool, now time.Time) bool {
	if listenFrom.IsZero() {
		return false
	}
	since := listenFrom
	if created.After(since) {
		since = created
	}
	if heard && last.After(since) {
		since = last
	}
	return now.Sub(since) > ttl
}

// completeJob builds a job's result document (buildResult) from the
// FSM's sample cache, reading from the store only what it lacks, and
// returns the completing transition: the document's digest and size go
// through Raft, the document itself only to this node's FSM
// (offerResult); every other node builds the same bytes.
func (n *Node) completeJob(j *evalrecord.Job, now time.Time) (*transitionCmd, error) {
	finishedAt := now.UnixMilli()
	mark := time.Now()
	if j.Records == int64(j.Progress.Done) && j.Records > 0 && !n.cfg.ResultDocuments {
		// Results as records: every outcome is a record every node holds,
		// under a running hash; the completion carries the hash and the
		// count, and nothing is built (O(1)).
		digest, err := evalstore.RecordsDigest(j)
		if err != nil {
			return nil, err
		}
		tm := &completeTiming{records: true}
		tm.total = time.Since(mark)
		return &transitionCmd{To: evalrecord.PhaseCompleted, Patch: evalstore.Patch{FinishedAt: finishedAt, ResultDigest: digest, ResultRecords: j.Records},
			timing: tm}, nil
	}
	cached := n.fsm.cachedSamples(j.JobID)
	var br builtResult
	if err := n.store.View(func(tx *evalstore.Tx) (err error) {
		br, err = buildResult(tx, j, finishedAt, cached)
		return err
	}); err != nil {
		return nil, err
	}
	if br.failed != "" {
		return &transitionCmd{To: evalrecord.PhaseFailed, Patch: evalstore.Patch{FinishedAt: finishedAt, Reason: br.failed}}, nil
	}
	d := time.Now()
	digest := canonjson.DigestBytes(br.doc)
	br.tm.digest = time.Since(d)
	br.tm.total = time.Since(mark)
	return &transitionCmd{To: evalrecord.PhaseCompleted, Patch: evalstore.Patch{FinishedAt: finishedAt, ResultDigest: digest, ResultSize: int64(len(br.doc))},
		timing: &br.tm, doc: br.doc}, nil
}

// completeTiming is where a job's completion spent its time, logged once
// per job: the tail of every job (its last result to its end).
type completeTiming struct {
	read, decode, aggregate, encode, digest, total time.Duration
	cached                                         bool // every sample came from sampleCache
	records                                        bool // completed as records: nothing built
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// dispatch assigns undispatched tasks of running jobs (admission order) to
// live allowlisted workers with spare capacity, records the assignments in
// Raft, and only then publishes them.
func (n *Node) dispatch(ctx context.Context, v *leaderView, now time.Time, d *dispatched, acks chan<- []pendingPub) error {
	t := n.cfg.Timing
	type slot struct {
		id     string
		epoch  int64
		free   int
		agents []string
	}
	var slots []*slot
	for _, w := range n.cfg.Workers {
		seen, ok := n.live.worker(w)
		if !ok || now.Sub(seen.at) > t.WorkerTTL {
			continue
		}
		// The predecessor's tasks of a restarted worker were failed above
		// (this view predates that): they hold no capacity of the new one.
		held := 0
		for _, tk := range v.inflight[w] {
			if tk.Epoch == 0 || seen.hb.Epoch == 0 || tk.Epoch == seen.hb.Epoch {
				held++
			}
		}
		if free := seen.hb.Capacity - held; free > 0 {
			slots = append(slots, &slot{id: w, epoch: seen.hb.Epoch, free: free, agents: seen.hb.Agents})
		}
	}
	var as []evalstore.Assignment
	maxCmd := n.cfg.Limits.MaxTasksPerCommand
	for _, j := range v.active {
		if j.Spec.Owner != "" && now.Sub(n.ownerAlive(j.Spec.Owner, time.UnixMilli(j.CreatedAt))) > api.OwnerStartWindow(time.Duration(j.Spec.OwnerTTLMS)*time.Millisecond) {
			// Its tasks could not start (api.Task.OwnerTTLMS): they would
			// only hold workers' slots until the owner is heard or lost.
			continue
		}
		for idx := j.Progress.Dispatched; idx < j.Progress.Total && len(as) < maxCmd; idx++ {
			// The worker with the most free slots takes the next task.
			// Only workers that offer the job's agent: any other could
			// only fail the sample (adapter_init_failed).
			best := -1
			for i, s := range slots {
				if s.free > 0 && (best < 0 || s.free > slots[best].free) && slices.Contains(s.agents, j.Spec.Agent) {
					best = i
				}
			}
			if best < 0 {
				break
			}
			slots[best].free--
			as = append(as, evalstore.Assignment{JobID: j.JobID, Index: idx, Worker: slots[best].id, Epoch: slots[best].epoch})
		}
	}
	if len(as) == 0 {
		return nil
	}
	res, err := n.propose(ctx, cmdAssign, &assignCmd{As: as, Now: now.UnixMilli()})
	if err != nil {
		return err
	}
	cases := map[string]*evalrecord.Job{}
	for _, j := range v.active {
		cases[j.JobID] = j
	}
	// A worker's tasks of this dispatch go out in messages of up to
	// api.MaxBatchTasks: one store, one delivery and one ack per message,
	// not per task.
	byWorker := map[string][]api.Task{}
	var order []string
	for i, a := range as {
		if i >= len(res.Accepted) || !res.Accepted[i] {
			continue
		}
		j := cases[a.JobID]
		ci, si := api.TaskIndex(a.Index, j.Spec.Cases)
		if _, ok := byWorker[a.Worker]; !ok {
			order = append(order, a.Worker)
		}
		byWorker[a.Worker] = append(byWorker[a.Worker], api.Task{JobID: a.JobID, Index: a.Index, CaseIndex: ci,
			Sample: si, Worker: a.Worker, DeadlineAt: now.UnixMilli() + j.Spec.TaskTTLMS, Epoch: a.Epoch})
		if j.Spec.Owner != "" {
			byWorker[a.Worker][len(byWorker[a.Worker])-1].OwnerTTLMS = j.Spec.OwnerTTLMS
		}
	}
	var futures []pendingPub
	for _, w := range order {
		subj, _ := bus.TaskSubject(w)
		tasks := byWorker[w]
		for len(tasks) > 0 {
			k := min(len(tasks), api.MaxBatchTasks)
			if p, ok := n.publishTasks(d, subj, tasks[:k]); ok {
				futures = append(futures, p)
			}
			tasks = tasks[k:]
		}
	}
	if len(futures) > 0 {
		select {
		case acks <- futures:
		case <-ctx.Done():
		}
	}
	return nil
}

// pendingPub is a task message whose ack is awaited.
type pendingPub struct {
	refs []api.TaskRef
	f    jetstream.PubAckFuture
}

// publishTasks publishes one message of tasks: a lone task as it always
// was, several as a batch. The message id (the task id, or the first
// task's id and the count) makes a republish a duplicate JetStream drops.
func (n *Node) publishTasks(d *dispatched, subj string, tasks []api.Task) (pendingPub, bool) {
	var b []byte
	var err error
	id := tasks[0].ID()
	if len(tasks) == 1 {
		b, err = wire.Encode(api.KindTask, &tasks[0])
	} else {
		b, err = wire.Encode(api.KindTasks, &api.TaskBatch{Tasks: tasks})
		id += "+" + strconv.Itoa(len(tasks))
	}
	if err != nil {
		return pendingPub{}, false // recorded, never sent: failed as lost
	}
	refs := make([]api.TaskRef, len(tasks))
	for i, t := range tasks {
		refs[i] = api.TaskRef{JobID: t.JobID, Index: t.Index}
		d.startPublish(refs[i])
	}
	f, err := n.js.PublishAsync(subj, b, jetstream.WithMsgID(id))
	if err != nil {
		// Recorded but not sent: reconciliation fails them as lost.
		for _, r := range refs {
			d.endPublish(r)
		}
		n.log.Warn("publish tasks", "first", id, "err", err)
		return pendingPub{}, false
	}
	return pendingPub{refs: refs, f: f}, true
}

// watchPublishAcks waits for the acks of published tasks, batch by batch,
// until acks is closed. Waiting here instead of in dispatch lets the next
// tick record and publish while these are being stored.
func (n *Node) watchPublishAcks(ctx context.Context, d *dispatched, acks <-chan []pendingPub) {
	for batch := range acks {
		for _, p := range batch {
			select {
			case <-p.f.Ok():
			case err := <-p.f.Err():
				n.republishTask(ctx, p.f.Msg(), err)
			case <-time.After(10 * time.Second):
				n.republishTask(ctx, p.f.Msg(), errors.New("ack timed out"))
			case <-ctx.Done():
			}
			for _, r := range p.refs {
				d.endPublish(r)
			}
		}
	}
}

// republishTask retries a task publish that failed or was not acked (a
// NATS server restart, a reconnect). The retry carries the same
// Nats-Msg-Id, so a first publish that was stored after all is
// deduplicated: the task still reaches the worker at most once.
func (n *Node) republishTask(ctx context.Context, m *nats.Msg, err error) {
	for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = n.js.PublishMsg(pctx, m)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	// Recorded but never stored: reconciliation fails it as lost.
	n.log.Warn("publish task", "subject", m.Subject, "err", err)
}

// consumeResults pulls sample results and applies them through Raft in
// batches, fenced by assignment in the FSM. Acks follow the apply, so a
// crash in between redelivers to the next leader, where the fence makes
// the duplicate a no-op.
func (n *Node) consumeResults(ctx context.Context) {
	var cons jetstream.Consumer
	for cons == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := n.js.CreateOrUpdateConsumer(cctx, bus.ResultsStream, jetstream.ConsumerConfig{
			Durable: bus.ResultsConsumer, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: n.cfg.Timing.ResultAckWait, MaxAckPending: 8192, MaxDeliver: -1,
		})
		cancel()
		if err == nil {
			cons = c
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	// Up to resultAppliers batches are applied at once (outcomes are
	// fenced one by one in the FSM, so their order would not matter); with
	// one, results arriving while a batch is in Raft wait in the stream and
	// join the next, so each Raft entry carries as many as possible.
	slots := make(chan struct{}, resultAppliers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		first, err := cons.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			<-slots
			continue
		}
		var msgs []jetstream.Msg
		var outs []evalstore.Outcome
		for m := range first.Messages() {
			msgs, outs = append(msgs, m), n.appendOutcomes(outs, m)
		}
		if len(msgs) == 0 {
			<-slots
			continue
		}
		// Linger: what arrives in the next ResultLinger joins this batch,
		// so a Raft entry (a log commit and an append to each follower)
		// carries many messages' results instead of one or two. Not when
		// the batch already has a result for every task in flight: nothing
		// more is coming soon (the last results of a job: its tail), so
		// only what is already there joins.
		var more jetstream.MessageBatch
		if inflight, ok := n.fsm.inflight.count(); ok && len(outs) >= inflight {
			more, err = cons.FetchNoWait(n.cfg.Limits.MaxTasksPerCommand - 1)
		} else {
			more, err = cons.Fetch(n.cfg.Limits.MaxTasksPerCommand-1, jetstream.FetchMaxWait(n.cfg.Timing.ResultLinger))
		}
		if err == nil {
			for m := range more.Messages() {
				msgs, outs = append(msgs, m), n.appendOutcomes(outs, m)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			n.applyResults(ctx, msgs, outs)
		}()
	}
}

// resultAppliers bounds the result batches in Raft at once. Two with a
// 15 ms linger spent about 8% more fleet CPU per task than one with 20 ms
// on the fleet benchmark, at the same throughput.
const resultAppliers = 1

// appendOutcomes appends the outcomes a result message carries
// (decodeResults: only its sender's, of allowlisted workers).
func (n *Node) appendOutcomes(outs []evalstore.Outcome, m jetstream.Msg) []evalstore.Outcome {
	for _, r := range n.decodeResults(m.Subject(), m.Data()) {
		if r.Tag != "" {
			// Killed by its worker (a fence): failed now, with its
			// reason, not left to its deadline.
			outs = append(outs, evalstore.Outcome{JobID: r.JobID, Index: r.Index, Worker: r.Worker,
				State: evalrecord.TaskFailed, Tag: r.Tag})
			continue
		}
		outs = append(outs, evalstore.Outcome{JobID: r.JobID, Index: r.Index, Worker: r.Worker,
			State: evalrecord.TaskDone, Sample: r.Sample, Error: r.Error})
	}
	return outs
}

// applyResults proposes the outcomes of msgs (appendOutcomes) and acks
// the messages once they are applied.
func (n *Node) applyResults(ctx context.Context, msgs []jetstream.Msg, outs []evalstore.Outcome) {
	if err := n.finishOutcomes(ctx, outs, time.Now()); err != nil {
		return // not acked: redelivered after AckWait
	}
	for _, m := range msgs {
		_ = m.Ack()
	}
	n.kickLeader()
}

// decodeResults reads a result message, one result or a batch, keeping
// the results of allowlisted workers that the subject names as their
// sender (NATS permissions bind that token to the worker's credentials)
// and counting the rest as rejected.
func (n *Node) decodeResults(subj string, data []byte) []api.Result {
	sender := bus.ResultSender(subj)
	env, err := wire.Peek(data, api.ResultLimits)
	if err != nil {
		n.rejected.Add(1)
		return nil
	}
	var rs []api.Result
	switch env.Kind {
	case api.KindResult:
		var r api.Result
		if wire.Decode(data, api.ResultLimits, api.KindResult, &r) == nil {
			rs = []api.Result{r}
		}
	case api.KindResults:
		var b api.ResultBatch
		if wire.Decode(data, api.ResultLimits, api.KindResults, &b) == nil && len(b.Results) <= api.MaxBatchResults {
			rs = b.Results
		}
	}
	if rs == nil {
		n.rejected.Add(1)
		return nil
	}
	out := rs[:0]
	for _, r := range rs {
		if !n.allow[r.Worker] || r.Worker != sender || r.Tag != "" && r.Tag != evalengine.TagWorkerLost {
			n.rejected.Add(1)
			continue
		}
		out = append(out, r)
	}
	return out
}
