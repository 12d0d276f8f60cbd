package evalstore

import (
	"encoding/binary"
	"errors"
	"github.com/fadcedab/adk/store/evalrecord"
	"sort"

	"github.com/dgraph-io/badger/v4"
)

// Assignment asks to dispatch the next task of a running job to a worker.
// Index must be the job's next undispatched index: tasks are dispatched
// in index order, and an index already dispatched is refused, so a retried
// command never dispatches a task twice.
type Assignment struct {
	JobID  string `msgpack:"job"`
	Index  int    `msgpack:"idx"`
	Worker string `msgpack:"worker"`
	// Epoch is the worker incarnation the task is addressed to (the epoch
	// of its heartbeats when it was dispatched; 0: unknown). A restarted
	// worker has a new epoch: it never runs its predecessor's tasks, and
	// the leader fails them as lost as soon as it hears the new epoch.
	Epoch int64 `msgpack:"epoch,omitempty"`
}

// Assign records assignments; it returns, per assignment, whether it was
// accepted (job still running, index next in order).
func (tx *Tx) Assign(as []Assignment, now int64) ([]bool, error) {
	jobs := map[string]*evalrecord.Job{}
	ok := make([]bool, len(as))
	for i, a := range as {
		j := jobs[a.JobID]
		if j == nil {
			var err error
			if j, err = tx.JobByID(a.JobID); err != nil {
				if err == evalrecord.ErrNotFound {
					continue
				}
				return nil, err
			}
			jobs[a.JobID] = j
		}
		if j.Phase != evalrecord.PhaseRunning || a.Index != j.Progress.Dispatched || a.Index >= j.Progress.Total || a.Worker == "" {
			continue
		}
		t := evalrecord.Task{JobID: a.JobID, Index: a.Index, Worker: a.Worker, Epoch: a.Epoch, State: evalrecord.TaskAssigned,
			AssignedAt: now, DeadlineAt: now + j.Spec.TaskTTLMS}
		v, err := encode(&t)
		if err != nil {
			return nil, err
		}
		if err := tx.txn.Set(taskKey(a.JobID, a.Index), v); err != nil {
			return nil, err
		}
		if err := tx.txn.Set(assignedKey(a.Worker, a.JobID, a.Index), nil); err != nil {
			return nil, err
		}
		j.Progress.Dispatched++
		ok[i] = true
	}
	for _, j := range sortedJobs(jobs) {
		if err := tx.putJob(j); err != nil {
			return nil, err
		}
	}
	return ok, nil
}

// Outcome ends one task. It is accepted only while the task is still
// assigned to Worker (fencing): a duplicate, a late result or an outcome
// for a task already lost or cancelled changes nothing.
type Outcome struct {
	JobID  string `msgpack:"job"`
	Index  int    `msgpack:"idx"`
	Worker string `msgpack:"worker"`
	State  string `msgpack:"state"` // TaskDone, TaskFailed or TaskCancelled
	Tag    string `msgpack:"tag,omitempty"`
	Sample []byte `msgpack:"sample,omitempty"`
	Error  bool   `msgpack:"error,omitempty"` // sample status error
}

// Finish applies outcomes; it returns which were accepted.
func (tx *Tx) Finish(outs []Outcome, now int64) ([]bool, error) {
	jobs := map[string]*evalrecord.Job{}
	recs := map[string]*jobRecords{}
	ok := make([]bool, len(outs))
	for i, o := range outs {
		t, err := tx.Task(o.JobID, o.Index)
		if err == evalrecord.ErrNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		if t.State != evalrecord.TaskAssigned || t.Worker != o.Worker {
			continue
		}
		switch o.State {
		case evalrecord.TaskDone, evalrecord.TaskFailed, evalrecord.TaskCancelled:
		default:
			continue
		}
		j := jobs[o.JobID]
		if j == nil {
			if j, err = tx.JobByID(o.JobID); err != nil {
				return nil, err
			}
			jobs[o.JobID] = j
		}
		t.State, t.Tag, t.Sample, t.Error, t.FinishedAt = o.State, o.Tag, o.Sample, o.Error || o.State != evalrecord.TaskDone, now
		v, err := encodeSized(t, len(t.Sample)+len(t.JobID)+len(t.Worker)+len(t.Tag)+128)
		if err != nil {
			return nil, err
		}
		if err := tx.checkRecord(len(v)); err != nil {
			// The outcome is in the log and the result is its records: a
			// record the store cannot hold is a result it cannot persist,
			// the contract's fail-closed stop (as a result document over
			// the quota is), not an answer the leader would retry forever.
			return nil, &StorageError{Err: err}
		}
		if err := tx.txn.Set(taskKey(o.JobID, o.Index), v); err != nil {
			return nil, err
		}
		if err := tx.txn.Delete(assignedKey(t.Worker, o.JobID, o.Index)); err != nil {
			return nil, err
		}
		r := recs[o.JobID]
		if r == nil {
			h, err := recordHasher(j)
			if err != nil {
				return nil, err
			}
			r = &jobRecords{h: h}
			recs[o.JobID] = r
		}
		if err := tx.appendRecord(j, r, t); err != nil {
			return nil, err
		}
		j.Progress.Done++
		if t.Error {
			j.Progress.Errors++
		}
		ok[i] = true
	}
	for id, r := range recs {
		if err := sealRecords(jobs[id], r); err != nil {
			return nil, err
		}
	}
	for _, j := range sortedJobs(jobs) {
		if err := tx.putJob(j); err != nil {
			return nil, err
		}
	}
	return ok, nil
}

// Task returns one task record.
func (tx *Tx) Task(jobID string, idx int) (*evalrecord.Task, error) {
	var t evalrecord.Task
	ok, err := getRecord(tx.txn, taskKey(jobID, idx), &t)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, evalrecord.ErrNotFound
	}
	return &t, nil
}

// Tasks returns every task record of a job in index order.
func (tx *Tx) Tasks(jobID string) ([]evalrecord.Task, error) {
	var out []evalrecord.Task
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: taskPrefix(jobID), PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if k := it.Item().Key(); binary.BigEndian.Uint32(k[len(k)-4:])&recordBit != 0 {
			break // the record index (records.go) follows the tasks
		}
		var t evalrecord.Task
		if err := it.Item().Value(func(b []byte) error { return decodeInto(b, &t) }); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// InFlight returns every assigned task grouped by worker: the leader's
// view for capacity, reconciliation, deadlines and lost workers.
func (tx *Tx) InFlight() (map[string][]Assignment, error) {
	out := map[string][]Assignment{}
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pAssigned}})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()[1:]
		w, rest, ok := splitPart(k)
		if !ok {
			return nil, newErr(evalrecord.CodeInvalidStoreRecord, "assigned key")
		}
		job, rest, ok := splitPart(rest)
		if !ok || len(rest) != 4 {
			return nil, newErr(evalrecord.CodeInvalidStoreRecord, "assigned key")
		}
		out[w] = append(out[w], Assignment{JobID: job, Index: int(binary.BigEndian.Uint32(rest)), Worker: w})
	}
	return out, nil
}

// dropAssignments cancels the still-assigned tasks of a job that just
// became terminal, so their late results are fenced out. It finds them
// through the in-flight keys (a handful) instead of decoding every task
// record of the job (each with its sample: at 10,000 tasks that read was
// most of the cost of completing a job, on every node).
func (tx *Tx) dropAssignments(jobID string) error {
	type ref struct {
		worker string
		idx    int
	}
	var refs []ref
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pAssigned}})
	for it.Rewind(); it.Valid(); it.Next() {
		w, rest, ok := splitPart(it.Item().Key()[1:])
		if !ok {
			it.Close()
			return newErr(evalrecord.CodeInvalidStoreRecord, "assigned key")
		}
		job, rest, ok := splitPart(rest)
		if !ok || len(rest) != 4 {
			it.Close()
			return newErr(evalrecord.CodeInvalidStoreRecord, "assigned key")
		}
		if job == jobID {
			refs = append(refs, ref{worker: w, idx: int(binary.BigEndian.Uint32(rest))})
		}
	}
	it.Close()
	for _, r := range refs {
		t, err := tx.Task(jobID, r.idx)
		if err == evalrecord.ErrNotFound {
			continue
		}
		if err != nil {
			return err
		}
		if t.State != evalrecord.TaskAssigned || t.Worker != r.worker {
			continue
		}
		t.State = evalrecord.TaskCancelled
		v, err := encode(t)
		if err != nil {
			return err
		}
		if err := tx.txn.Set(taskKey(jobID, t.Index), v); err != nil {
			return err
		}
		if err := tx.txn.Delete(assignedKey(t.Worker, jobID, t.Index)); err != nil {
			return err
		}
	}
	return nil
}

// Lease returns the coordinator lease (zero if never renewed).
func (tx *Tx) Lease() (evalrecord.Lease, error) {
	var l evalrecord.Lease
	_, err := getRecord(tx.txn, metaKey("lease"), &l)
	return l, err
}

// PutLease records a renewal of the coordinator lease.
func (tx *Tx) PutLease(l evalrecord.Lease) error {
	v, err := encode(&l)
	if err != nil {
		return err
	}
	return tx.txn.Set(metaKey("lease"), v)
}

// Cluster is the identity the log recorded for its cluster (SetCluster),
// "" before one was.
func (tx *Tx) Cluster() (string, error) {
	item, err := tx.txn.Get(metaKey("cluster"))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	v, err := item.ValueCopy(nil)
	return string(v), err
}

// SetCluster records id as the cluster's identity: the last one applied
// holds, on every node that applied the same entries, whatever its store
// held before (a snapshot of an earlier build carries none).
func (tx *Tx) SetCluster(id string) error {
	return tx.txn.Set(metaKey("cluster"), []byte(id))
}

func sortedJobs(m map[string]*evalrecord.Job) []*evalrecord.Job {
	out := make([]*evalrecord.Job, 0, len(m))
	for _, j := range m {
		out = append(out, j)
	}
	sortJobs(out)
	return out
}

func sortJobs(js []*evalrecord.Job) {
	sort.Slice(js, func(a, b int) bool { return js[a].Seq < js[b].Seq })
}
