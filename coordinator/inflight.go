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
// restore, a job ending), and every decision taken from it still goes
// through Raft, where the FSM fences outcomes by assignment.
//
// Deltas are applied after the store commit, under mu; a rebuild reads
// the store under mu. A delta that lands after a rebuild that already saw
// its commit is applied twice, so deltas are idempotent (set, delete).
type inflightIndex struct {
	mu    sync.Mutex
	valid bool
	tasks map[api.TaskRef]inflightTask
}

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

// finished drops accepted outcomes.
func (x *inflightIndex) finished(outs []evalstore.Outcome, accepted []bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.valid {
		return
	}
	for i, o := range outs {
		if i < len(accepted) && accepted[i] {
			delete(x.tasks, api.TaskRef{JobID: o.JobID, Index: o.Index})
		}
	}
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
