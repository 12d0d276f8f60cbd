package coordinator

import (
	"sync"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// inflightIndex mirrors the store's assigned tasks in memory, so the
// leader's scheduler tick and every heartbeat answer are map lookups
// instead of Badger scans (a scan of the assigned prefix walks the
// tombstones of every finished task). The store stays the truth: the
// index is rebuilt from it whenever it is invalid (start, snapshot
// restore, a recovery), and every decision taken from it still goes
// through Raft, where the FSM fences outcomes by assignment. A job ending
// drops its tasks (endJob), as the store does in the same entry.
//
// Deltas are applied after the store commit, under mu; a rebuild reads
// the store under mu. A delta that lands after a rebuild that already saw
// its commit is applied twice, so deltas are idempotent (set, delete,
// drop a job's tasks).
type inflightIndex struct {
	mu    sync.Mutex
	valid bool
	tasks map[api.TaskRef]inflightTask
	// decided and decidedOld hold the tasks whose outcome this node
	// applied lately (two generations of at most maxDecidedRefs: the
	// older is dropped whole when the newer fills), so a heartbeat answer
	// can tell a worker which of its finished tasks it need not report
	// again (api.HeartbeatReply.RecentChecked). Kept whether or not the
	// index is valid, and never invalidated: a task once decided in Raft
	// stays decided (ids are never reused). Forgetting one only makes its
	// worker report it longer.
	decided, decidedOld map[api.TaskRef]struct{}
}

// maxDecidedRefs bounds a generation of inflightIndex.decided: at
// 10,000 outcomes a second it still remembers each for over 3 s, past
// the next heartbeat answer (1 s); ~1-2 MiB a generation.
const maxDecidedRefs = 1 << 15

type inflightTask struct {
	worker     string
	epoch      int64
	assignedAt int64
	deadlineAt int64
}

func (x *inflightIndex) invalidate() {
	x.mu.Lock()
	x.valid, x.tasks = false, nil
	x.mu.Unlock()
}

// endJob drops the tasks of a job whose end was just committed (the entry
// dropped their assignments in the store) and returns them by worker:
// what the leader's kill notices name (applyLocal). Dropping them, rather
// than invalidating the whole index, keeps it valid for the next job
// ending in the same tick or batch, whose notices need it too. Nothing
// while the index is invalid: the next rebuild reads the store, which no
// longer holds them.
func (x *inflightIndex) endJob(jobID string) map[string][]api.TaskRef {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.valid {
		return nil
	}
	var out map[string][]api.TaskRef
	for ref, t := range x.tasks {
		if ref.JobID != jobID {
			continue
		}
		if out == nil {
			out = map[string][]api.TaskRef{}
		}
		out[t.worker] = append(out[t.worker], ref)
		delete(x.tasks, ref)
	}
	return out
}

// endAll returns every task in flight by worker (a recovery ended every
// job) and invalidates the index; nothing while it is invalid.
func (x *inflightIndex) endAll() map[string][]api.TaskRef {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out map[string][]api.TaskRef
	if x.valid && len(x.tasks) > 0 {
		out = map[string][]api.TaskRef{}
		for ref, t := range x.tasks {
			out[t.worker] = append(out[t.worker], ref)
		}
	}
	x.valid, x.tasks = false, nil
	return out
}

// count returns the number of tasks in flight; false while the index is
// invalid (not rebuilt here: the caller only needs a hint).
func (x *inflightIndex) count() (int, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.tasks), x.valid
}

// assigned records accepted assignments.
func (x *inflightIndex) assigned(as []evalstore.Assignment, accepted []bool, now int64, ttl map[string]int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.valid {
		return
	}
	for i, a := range as {
		if i < len(accepted) && accepted[i] {
			x.tasks[api.TaskRef{JobID: a.JobID, Index: a.Index}] = inflightTask{worker: a.Worker, epoch: a.Epoch, assignedAt: now, deadlineAt: now + ttl[a.JobID]}
		}
	}
}

// finished drops accepted outcomes and remembers them as decided.
func (x *inflightIndex) finished(outs []evalstore.Outcome, accepted []bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	job := "" // the job id of the run of outcomes: one string kept per job, not one per task
	for i, o := range outs {
		if i >= len(accepted) || !accepted[i] {
			continue
		}
		if o.JobID != job {
			job = o.JobID
		}
		ref := api.TaskRef{JobID: job, Index: o.Index}
		x.decideLocked(ref)
		if x.valid {
			delete(x.tasks, ref)
		}
	}
}

func (x *inflightIndex) decideLocked(ref api.TaskRef) {
	if x.decided == nil || len(x.decided) >= maxDecidedRefs {
		x.decidedOld, x.decided = x.decided, make(map[api.TaskRef]struct{}, min(2*len(x.decided)+64, maxDecidedRefs))
	}
	x.decided[ref] = struct{}{}
}

// undecided returns the refs this node has not seen decided lately:
// still in flight, not yet assigned here (a node behind the log), or
// decided too long ago to be remembered. The others' outcomes are
// applied here, so committed: no leader can fail them as lost.
func (x *inflightIndex) undecided(refs []api.TaskRef) []api.TaskRef {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []api.TaskRef
	for _, r := range refs {
		if _, ok := x.decided[r]; ok {
			continue
		}
		if _, ok := x.decidedOld[r]; ok {
			continue
		}
		out = append(out, r)
	}
	return out
}

// ensureLocked rebuilds the index from the store when it is invalid.
func (x *inflightIndex) ensureLocked(store *evalstore.Store) error {
	if x.valid {
		return nil
	}
	tasks := map[api.TaskRef]inflightTask{}
	err := store.View(func(tx *evalstore.Tx) error {
		inflight, err := tx.InFlight()
		if err != nil {
			return err
		}
		for w, as := range inflight {
			for _, a := range as {
				t, err := tx.Task(a.JobID, a.Index)
				if err != nil {
					return err
				}
				tasks[api.TaskRef{JobID: a.JobID, Index: a.Index}] = inflightTask{worker: w, epoch: t.Epoch, assignedAt: t.AssignedAt, deadlineAt: t.DeadlineAt}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	x.tasks, x.valid = tasks, true
	return nil
}

// byWorker returns the assigned tasks grouped by worker.
func (x *inflightIndex) byWorker(store *evalstore.Store) (map[string][]*evalrecord.Task, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.ensureLocked(store); err != nil {
		return nil, err
	}
	out := map[string][]*evalrecord.Task{}
	for ref, t := range x.tasks {
		out[t.worker] = append(out[t.worker], &evalrecord.Task{JobID: ref.JobID, Index: ref.Index, Worker: t.worker, Epoch: t.epoch,
			State: evalrecord.TaskAssigned, AssignedAt: t.assignedAt, DeadlineAt: t.deadlineAt})
	}
	return out, nil
}

// assignedTo reports which worker, and which incarnation of it, a task is
// assigned to ("" when it is not in flight).
func (x *inflightIndex) assignedTo(store *evalstore.Store, ref api.TaskRef) (string, int64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.ensureLocked(store); err != nil {
		return "", 0, err
	}
	t := x.tasks[ref]
	return t.worker, t.epoch, nil
}
