package evalstore_test

import (
	"testing"

	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// TestStore_PruneBigJobOverSeveralCalls: a job with more task keys than
// one Badger transaction holds (10,000 tasks and their 10,000 records,
// against ~13,000 entries at an 8 MiB memtable) is pruned over several
// calls, each answering HasMore with a cursor that comes back to it; it
// stays listed until its last call, and then nothing of it is left.
// Deleting it in one transaction failed with ErrTxnTooBig.
func TestStore_PruneBigJobOverSeveralCalls(t *testing.T) {
	s := open(t, evalstore.Limits{})
	st := set("app", "s", "v1", `{}`)
	const n = 10_000
	j := job("app", "eval-1", st)
	j.Spec.Cases = n
	idx := uint64(1)
	_ = update(t, s, idx, func(tx *evalstore.Tx) error {
		_, err := tx.CreateEvaluation(st, j, adm, 1)
		return err
	})
	for lo := 0; lo < n; lo += 500 {
		var as []evalstore.Assignment
		var outs []evalstore.Outcome
		for i := lo; i < lo+500; i++ {
			as = append(as, evalstore.Assignment{JobID: "eval-1", Index: i, Worker: "w1"})
			outs = append(outs, evalstore.Outcome{JobID: "eval-1", Index: i, Worker: "w1", State: evalrecord.TaskDone, Sample: []byte(`{"ok":true}`)})
		}
		idx++
		if err := update(t, s, idx, func(tx *evalstore.Tx) error { _, err := tx.Assign(as, 5); return err }); err != nil {
			t.Fatal(err)
		}
		idx++
		if err := update(t, s, idx, func(tx *evalstore.Tx) error { _, err := tx.Finish(outs, 6); return err }); err != nil {
			t.Fatal(err)
		}
	}
	idx++
	if err := update(t, s, idx, func(tx *evalstore.Tx) error {
		_, err := tx.Transition("app", "eval-1", nil, evalrecord.PhaseCancelled, evalstore.Patch{FinishedAt: 9, Reason: evalrecord.ReasonOwnerLost}, 9)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cursor, calls := "", 0
	for {
		calls++
		var r *evalrecord.PruneResult
		idx++
		if err := update(t, s, idx, func(tx *evalstore.Tx) (err error) {
			r, err = tx.Prune("app", evalrecord.PruneOptions{Before: 1000, Cursor: cursor})
			return err
		}); err != nil {
			t.Fatalf("prune call %d: %v", calls, err)
		}
		if r.HasMore {
			if r.JobsDeleted != 0 {
				t.Fatalf("call %d deleted the job before its tasks: %+v", calls, r)
			}
			_ = s.View(func(tx *evalstore.Tx) error {
				if _, err := tx.JobByID("eval-1"); err != nil {
					t.Fatalf("call %d: the job is gone before its last call: %v", calls, err)
				}
				return nil
			})
			cursor = r.NextCursor
			continue
		}
		if r.JobsDeleted != 1 || r.SetRevisionsDeleted != 1 {
			t.Fatalf("last call %d: %+v", calls, r)
		}
		break
	}
	if calls < 3 {
		t.Fatalf("pruned in %d calls, want the job spread over several", calls)
	}
	_ = s.View(func(tx *evalstore.Tx) error {
		if _, err := tx.JobByID("eval-1"); evalrecord.Code(err) != evalrecord.CodeNotFound && err != nil {
			t.Fatalf("job after prune: %v", err)
		} else if err == nil {
			t.Fatal("job still there")
		}
		if ts, err := tx.Tasks("eval-1"); err != nil || len(ts) != 0 {
			t.Fatalf("tasks after prune: %d %v", len(ts), err)
		}
		return nil
	})
}
