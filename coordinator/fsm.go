package coordinator

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/hashicorp/raft"
	"github.com/vmihailenco/msgpack/v5"
)

// FSM applies Raft entries to the eval store. Each entry is one store
// transaction that also records the entry's index, so replay after a
// restart and entries at or below a restored snapshot are skipped.
type FSM struct {
	store    *evalstore.Store
	log      *slog.Logger
	inflight inflightIndex
	samples  *sampleCache // decoded samples of running jobs
	// applying is held from a store commit until its after hooks ran, so
	// cachedSamples never sees a job whose last outcomes are committed but
	// not yet cached (it would read them from the store for nothing).
	applying sync.RWMutex
	// prebuilt holds the result documents the leader built and is
	// completing jobs with (offerResult), so its FSM does not build them
	// twice.
	prebuiltMu sync.Mutex
	prebuilt   map[string]prebuilt
	// completionApply is the store time (ns) of the last batch that held
	// a completion.
	completionApply atomic.Int64
	// failed is the storage failure that stopped this FSM (nil while it
	// follows the log); onFail, set before Raft starts, stops the
	// service with it. Only the apply goroutine writes failed.
	failed atomic.Pointer[api.Error]
	onFail func(error)
	// onRecordsCompleted, set before Raft starts, is told each job this
	// FSM completed as records (its result tail is rendered then).
	onRecordsCompleted func(jobID string)
	// ended wakes the status calls waiting for a job's end (WaitMS) after
	// an entry that may have ended jobs (transition, recover) or a
	// snapshot restore.
	ended broadcast
	// applied wakes the requests waiting for this node to apply their
	// MinIndex (service.awaitApplied) after every Apply, ApplyBatch and
	// Restore.
	applied broadcast
	// cluster is the identity the log recorded for its cluster ("" before
	// one was applied): the store's, kept here for every request.
	cluster atomic.Pointer[string]
	// skipCluster makes this FSM apply a lease as an earlier build does,
	// without its cluster identity (tests: Config.earlierBuild).
	skipCluster bool
}

// NewFSM returns an FSM over store.
func NewFSM(store *evalstore.Store, log *slog.Logger) *FSM {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &FSM{store: store, log: log, samples: newSampleCache(DefaultSampleCacheBytes)}
	f.loadCluster()
	return f
}

// Cluster is the identity of the cluster whose log this FSM applies, ""
// while it has applied none (a log written by earlier builds only, or a
// new cluster before its first leader's lease). A cluster wiped and
// bootstrapped again draws a new one, so a client can tell its Raft
// indexes from the old log's (coordinator/DESIGN.md "Read-your-writes").
func (f *FSM) Cluster() string {
	if c := f.cluster.Load(); c != nil {
		return *c
	}
	return ""
}

// loadCluster reads the identity the store holds (at start, after a
// restore).
func (f *FSM) loadCluster() {
	var c string
	if err := f.store.View(func(tx *evalstore.Tx) (err error) {
		c, err = tx.Cluster()
		return err
	}); err != nil {
		f.log.Warn("fsm: read the cluster identity", "err", err)
	}
	f.cluster.Store(&c)
}

// Apply implements raft.FSM. A decode failure panics (this binary cannot
// read the log: nomad does the same). A storage failure stops the service
// fail closed (CONTRACTS §6) instead: the FSM applies nothing more, every
// later entry answers the same typed error, snapshots are refused (a
// snapshot would cover entries never applied), and onFail hands the error
// to the node, whose process exits with it. On restart Raft replays from
// the store's last applied index, so nothing is skipped.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil
	}
	if e := f.failed.Load(); e != nil {
		return &applyResult{Err: e}
	}
	c := f.prepare(l)
	f.applying.Lock()
	defer f.applying.Unlock()
	defer f.applied.notify()
	start := time.Now()
	applied, err := f.store.Update(l.Index, c.fn)
	f.timeCompletion(start, c)
	return f.finish(l.Index, c, applied, err)
}

// ApplyBatch implements raft.BatchingFSM: the batch's commands go through
// one store transaction where they can (evalstore.UpdateBatch), with the
// same outcome, entry by entry, as Apply would give.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	if e := f.failed.Load(); e != nil {
		for i := range out {
			out[i] = &applyResult{Err: e}
		}
		return out
	}
	cmds := make([]*fsmCmd, len(logs))
	ops := make([]evalstore.Op, 0, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand || len(l.Data) == 0 {
			continue
		}
		cmds[i] = f.prepare(l)
		ops = append(ops, evalstore.Op{Index: l.Index, Fn: cmds[i].fn})
	}
	f.applying.Lock()
	defer f.applying.Unlock()
	defer f.applied.notify()
	start := time.Now()
	applied, errs, err := f.store.UpdateBatch(ops)
	f.timeCompletion(start, cmds...)
	k := 0
	for i, c := range cmds {
		if c == nil {
			continue
		}
		if err != nil && !applied[k] && errs[k] == nil {
			// The batch stopped at a storage failure before this entry;
			// it, and every entry after it, answers that failure.
			errs[k] = err
		}
		out[i] = f.finish(logs[i].Index, c, applied[k], errs[k])
		k++
	}
	return out
}

// timeCompletion records how long the store took over a batch holding a
// completion (the leader logs it with the job's timings): the part of a
// job's tail after the Raft commit.
func (f *FSM) timeCompletion(start time.Time, cmds ...*fsmCmd) {
	for _, c := range cmds {
		if c != nil && c.t == cmdTransition && c.to == evalrecord.PhaseCompleted {
			f.completionApply.Store(int64(time.Since(start)))
			return
		}
	}
}

// cachedSamples is sampleCache.outcomes after any apply in progress
// finished.
func (f *FSM) cachedSamples(jobID string) map[int]cachedOutcome {
	f.applying.RLock()
	defer f.applying.RUnlock()
	return f.samples.outcomes(jobID)
}

// finish is the end of one command's apply: a storage failure stops the
// FSM (fail), the in-flight index follows a committed command, a domain
// error becomes the answer.
func (f *FSM) finish(index uint64, c *fsmCmd, applied bool, err error) any {
	var se *evalstore.StorageError
	if errors.As(err, &se) || f.failed.Load() != nil {
		return &applyResult{Err: f.fail(index, c, err)}
	}
	if !applied && err == nil {
		f.log.Debug("fsm: skipped applied entry", "index", index, "cmd", c.t)
	}
	if applied && err == nil && c.after != nil {
		c.after()
	}
	if applied && (c.t == cmdTransition || c.t == cmdRecover) {
		f.ended.notify()
	}
	if err != nil {
		c.res.Err = api.AsError(err)
	}
	return c.res
}

// fail stops the FSM at the first storage failure, index's: it returns
// the typed error every entry from now on answers, and hands it to onFail
// once. The code is the contract's fail-closed stop for what the entry
// was persisting (CONTRACTS §6).
func (f *FSM) fail(index uint64, c *fsmCmd, err error) *api.Error {
	if e := f.failed.Load(); e != nil {
		return e
	}
	code := api.CodeResultPersistenceFailed
	var mismatch *resultMismatchError
	switch {
	case errors.As(err, &mismatch):
		code = api.CodeResultDigestMismatch
	case c.t == cmdRecover:
		code = api.CodeStoreRecoveryFailed
	case c.t == cmdTransition && c.to == evalrecord.PhaseCancelled:
		code = api.CodeCancelPersistenceFailed
	}
	e := api.Errorf(code, "raft index %d (%s): %v", index, c.t, err)
	f.failed.Store(e)
	f.log.Error("fsm: storage failure, stopping the eval service (fail closed)", "index", index, "cmd", c.t, "err", err)
	if f.onFail != nil {
		f.onFail(e)
	}
	return e
}

func decodeBody(t cmdType, b []byte, v any) {
	if err := msgpack.Unmarshal(b, v); err != nil {
		panic(fmt.Sprintf("coordinator fsm: decode %s: %v", t, err))
	}
}

// fsmCmd is one decoded command: fn writes it to the store (it may run
// more than once, see evalstore.UpdateBatch), after updates the in-flight
// index once it committed, res is the answer.
type fsmCmd struct {
	t     cmdType
	to    evalrecord.Phase // a transition's target phase
	res   *applyResult
	fn    func(tx *evalstore.Tx) error
	after func()
}

// prepare decodes a command entry; a decode failure panics.
func (f *FSM) prepare(l *raft.Log) *fsmCmd {
	t, body, err := decodeCmd(l.Data)
	if err != nil {
		panic(fmt.Sprintf("coordinator fsm: index %d: %v", l.Index, err))
	}
	index := l.Index
	res := &applyResult{}
	var fn func(tx *evalstore.Tx) error
	var after func() // updates the in-flight index once committed
	var to evalrecord.Phase
	switch t {
	case cmdSubmit:
		var c submitCmd
		decodeBody(t, body, &c)
		fn = func(tx *evalstore.Tx) (err error) {
			if c.RequestID != "" {
				// Sent again (its coordinator died before answering), or
				// proposed twice: the job the id made, if any.
				j, err := tx.SubmittedJob(c.Job.Scope, c.RequestID, c.RequestDigest, c.Now)
				if err != nil || j != nil {
					res.Job = j
					return err
				}
				if c.Lookup {
					return lookupMiss(&c)
				}
			}
			set := c.Set
			if c.SetUpload != "" {
				if set.Body, err = takeUpload(tx, &c); err != nil {
					return err
				}
			}
			if res.Job, err = tx.CreateEvaluation(set, c.Job, c.Adm, c.Now); err != nil || c.RequestID == "" {
				return err
			}
			return tx.RecordRequest(c.Job.Scope, c.RequestID, c.RequestDigest, res.Job.JobID, c.Now)
		}
	case cmdSetPart:
		var c setPartCmd
		decodeBody(t, body, &c)
		fn = func(tx *evalstore.Tx) error {
			_, err := tx.PutSetPart(c.Scope, &c.Part, c.Now)
			return err
		}
	case cmdAssign:
		var c assignCmd
		decodeBody(t, body, &c)
		ttl := map[string]int64{}
		fn = func(tx *evalstore.Tx) (err error) {
			if res.Accepted, err = tx.Assign(c.As, c.Now); err != nil {
				return err
			}
			for i, a := range c.As {
				if _, seen := ttl[a.JobID]; seen || !res.Accepted[i] {
					continue
				}
				j, err := tx.JobByID(a.JobID)
				if err != nil {
					return err
				}
				ttl[a.JobID] = j.Spec.TaskTTLMS
			}
			return nil
		}
		after = func() { f.inflight.assigned(c.As, res.Accepted, c.Now, ttl) }
	case cmdFinish:
		var c finishCmd
		decodeBody(t, body, &c)
		fn = func(tx *evalstore.Tx) (err error) {
			res.Accepted, err = tx.Finish(c.Outs, c.Now)
			return err
		}
		after = func() {
			f.inflight.finished(c.Outs, res.Accepted)
			f.samples.finished(c.Outs, res.Accepted)
		}
	case cmdTransition:
		var c transitionCmd
		decodeBody(t, body, &c)
		// A completion written since results left the log carries only
		// the document's digest and size: this node builds the document
		// (once: fn may run again, see evalstore.UpdateBatch).
		build := c.To == evalrecord.PhaseCompleted && len(c.Patch.Result) == 0 && c.Patch.ResultDigest != "" && c.Patch.ResultRecords == 0
		records := c.To == evalrecord.PhaseCompleted && c.Patch.ResultRecords > 0
		fn = func(tx *evalstore.Tx) error {
			if records {
				// The third form: the result is the job's records, and
				// this node's running hash must be the log's (O(1)).
				if err := f.checkRecords(tx, &c); err != nil {
					return err
				}
			}
			if build {
				doc, err := f.resultFor(tx, &c)
				if err != nil {
					return err
				}
				c.Patch.Result, build = doc, false
			}
			return f.applyTransition(tx, &c, res)
		}
		to = c.To
		after = func() {
			if res.Job != nil && res.Job.Phase.Terminal() {
				// Its assignments were dropped: so are its tasks in the
				// index, and they are what the leader's kill notices name
				// (none for a completion: every task had its outcome).
				res.kills = f.inflight.endJob(c.JobID)
				f.samples.ended(c.JobID)
			}
			if records && f.onRecordsCompleted != nil && res.Job != nil && res.Job.Phase == evalrecord.PhaseCompleted {
				f.onRecordsCompleted(c.JobID)
			}
		}
	case cmdLease:
		var c leaseCmd
		decodeBody(t, body, &c)
		if f.skipCluster {
			c.Cluster = ""
		}
		fn = func(tx *evalstore.Tx) error {
			if c.Cluster != "" {
				if err := tx.SetCluster(c.Cluster); err != nil {
					return err
				}
			}
			return tx.PutLease(c.Lease)
		}
		if c.Cluster != "" {
			after = func() { f.cluster.Store(&c.Cluster) }
		}
	case cmdRecover:
		var c recoverCmd
		decodeBody(t, body, &c)
		fn = func(tx *evalstore.Tx) error { return f.applyRecover(tx, &c, res) }
		after = func() {
			res.kills = f.inflight.endAll()
			f.samples.reset()
		}
	case cmdBaseline:
		var c baselineCmd
		decodeBody(t, body, &c)
		fn = func(tx *evalstore.Tx) (err error) {
			res.Baseline, err = tx.PutBaselineBuilt(c.Scope, c.Name, c.JobID, c.Now, baselineDoc(tx))
			return err
		}
	case cmdPrune:
		var c pruneCmd
		decodeBody(t, body, &c)
		fn = func(tx *evalstore.Tx) (err error) {
			res.Prune, err = tx.Prune(c.Scope, c.Opts)
			return err
		}
	default:
		panic(fmt.Sprintf("coordinator fsm: unknown command type %d at index %d", t, index))
	}
	return &fsmCmd{t: t, to: to, res: res, fn: fn, after: after}
}

// takeUpload returns the set bytes of a submit that names an upload, and
// deletes the upload. The bytes must be the revision the validating node
// digested. A submit applied again (a retried proposal whose first apply
// committed) finds its job and no upload: CreateEvaluation answers it as
// before, without the bytes it no longer needs.
func takeUpload(tx *evalstore.Tx, c *submitCmd) ([]byte, error) {
	b, err := tx.TakeUpload(c.Set.Scope, c.SetUpload, c.Now)
	if err != nil {
		if _, jerr := tx.JobByID(c.Job.JobID); jerr == nil {
			return nil, nil
		}
		return nil, err
	}
	if d := canonjson.DigestBytes(b); d != c.Set.Digest {
		return nil, api.Errorf(evalrecord.CodeInvalidSetUpload, "digest: the upload's revision digest is %s, the submit named %s", d, c.Set.Digest)
	}
	return b, nil
}

// lookupMiss answers a lookup whose request id names no job: the id
// expired, or (a set upload gone) the upload was never submitted with it.
func lookupMiss(c *submitCmd) error {
	if c.SetUpload != "" {
		return api.Errorf(evalrecord.CodeInvalidSetUpload, "set_upload: no such upload in this scope (expired, or submitted with another request_id)")
	}
	return api.Errorf(evalrecord.CodeNotFound, "submit.request_id: %q names no job (expired)", c.RequestID)
}

// applyTransition moves one job and, when it became terminal, admits
// queued jobs while fewer than Adm.MaxConcurrency run.
func (f *FSM) applyTransition(tx *evalstore.Tx, c *transitionCmd, res *applyResult) error {
	j, err := tx.Transition(c.Scope, c.JobID, c.Expected, c.To, c.Patch, c.Now)
	if err != nil {
		return err
	}
	res.Job = j
	if !j.Phase.Terminal() {
		return nil
	}
	return promoteQueued(tx, c.Adm, c.Now)
}

func promoteQueued(tx *evalstore.Tx, adm evalstore.Admission, now int64) error {
	counts, err := tx.Counts()
	if err != nil {
		return err
	}
	free := adm.MaxConcurrency - counts.Active
	if free <= 0 {
		return nil
	}
	queued, err := tx.QueuedJobs(free)
	if err != nil {
		return err
	}
	for _, q := range queued {
		if _, err := tx.Transition(q.Scope, q.JobID, []evalrecord.Phase{evalrecord.PhaseQueued}, evalrecord.PhaseRunning,
			evalstore.Patch{StartedAt: now}, now); err != nil {
			return err
		}
	}
	return nil
}

// applyRecover fails every queued or running job: a full-cluster restart
// left no one owning their work (CONTRACTS §6 restart recovery).
func (f *FSM) applyRecover(tx *evalstore.Tx, c *recoverCmd, res *applyResult) error {
	var jobs []*evalrecord.Job
	active, err := tx.ActiveJobs()
	if err != nil {
		return err
	}
	jobs = append(jobs, active...)
	queued, err := tx.QueuedJobs(1 << 30)
	if err != nil {
		return err
	}
	jobs = append(jobs, queued...)
	for _, j := range jobs {
		if _, err := tx.Transition(j.Scope, j.JobID, []evalrecord.Phase{j.Phase}, evalrecord.PhaseFailed,
			evalstore.Patch{FinishedAt: c.Now, Reason: c.Reason}, c.Now); err != nil {
			return err
		}
	}
	res.Recovered = len(jobs)
	return tx.RecordRecovered(len(jobs))
}

// Snapshot implements raft.FSM: a Badger read transaction pinned now, on
// the apply goroutine, streamed later by Persist.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if e := f.failed.Load(); e != nil {
		return nil, fmt.Errorf("coordinator fsm: no snapshot after a storage failure: %w", e)
	}
	return &fsmSnapshot{snap: f.store.Snapshot()}, nil
}

// Restore implements raft.FSM: all state is replaced by the snapshot's,
// its applied index included.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	defer f.inflight.invalidate()
	defer f.samples.reset()
	defer f.ended.notify()
	defer f.applied.notify()
	defer f.loadCluster()
	return f.store.Restore(rc)
}

type fsmSnapshot struct{ snap *evalstore.Snapshot }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.snap.WriteTo(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.snap.Release() }
