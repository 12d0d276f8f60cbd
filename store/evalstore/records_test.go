package evalstore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// TestStore_RecordsFollowApplyOrder checks that accepted outcomes become
// records in apply order (not task order), under a running hash equal to
// hashing them in that order; that a refused outcome is no record; that
// Tasks stops before the record index; and that a records completion
// checks count and hash and stores no document.
func TestStore_RecordsFollowApplyOrder(t *testing.T) {
	s := open(t, evalstore.Limits{})
	st := set("app", "s", "v1", `{}`)
	_ = update(t, s, 1, func(tx *evalstore.Tx) error {
		_, err := tx.CreateEvaluation(st, job("app", "eval-1", st), adm, 1)
		return err
	})
	_ = update(t, s, 2, func(tx *evalstore.Tx) error {
		_, err := tx.Assign([]evalstore.Assignment{{JobID: "eval-1", Index: 0, Worker: "w1"}, {JobID: "eval-1", Index: 1, Worker: "w1"}}, 5)
		return err
	})
	outs := []evalstore.Outcome{
		{JobID: "eval-1", Index: 1, Worker: "w1", State: evalrecord.TaskDone, Sample: []byte(`{"b":1}`)},
		{JobID: "eval-1", Index: 1, Worker: "w1", State: evalrecord.TaskDone, Sample: []byte(`{"dup":1}`)}, // refused
		{JobID: "eval-1", Index: 0, Worker: "w1", State: evalrecord.TaskFailed, Tag: "worker_lost"},
	}
	_ = update(t, s, 3, func(tx *evalstore.Tx) error { _, err := tx.Finish(outs[:2], 6); return err })
	_ = update(t, s, 4, func(tx *evalstore.Tx) error { _, err := tx.Finish(outs[2:], 7); return err })
	h := sha256.New()
	h.Write(evalstore.AppendRecord(nil, 1, evalrecord.TaskDone, "", []byte(`{"b":1}`)))
	h.Write(evalstore.AppendRecord(nil, 0, evalrecord.TaskFailed, "worker_lost", nil))
	want := hex.EncodeToString(h.Sum(nil))
	var j *evalrecord.Job
	_ = s.View(func(tx *evalstore.Tx) (err error) {
		j, err = tx.JobByID("eval-1")
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := evalstore.RecordsDigest(j); j.Records != 2 || d != want || j.RecordBytes != 7 {
			t.Fatalf("%d records (%d bytes), digest %s, want 2, %s", j.Records, j.RecordBytes, d, want)
		}
		var order []int
		if err := tx.Records("eval-1", 0, func(seq int64, t *evalrecord.Task) (bool, error) {
			order = append(order, t.Index)
			return true, nil
		}); err != nil || len(order) != 2 || order[0] != 1 || order[1] != 0 {
			t.Fatalf("records %v %v", order, err)
		}
		if ts, err := tx.Tasks("eval-1"); err != nil || len(ts) != 2 {
			t.Fatalf("tasks %d %v", len(ts), err)
		}
		return nil
	})
	p := evalstore.Patch{FinishedAt: 9, ResultDigest: want, ResultRecords: 3}
	if err := update(t, s, 5, func(tx *evalstore.Tx) error {
		_, err := tx.Transition("app", "eval-1", nil, evalrecord.PhaseCompleted, p, 9)
		return err
	}); evalrecord.Code(err) != evalrecord.CodeInvalidResult {
		t.Fatalf("a wrong count completed: %v", err)
	}
	p.ResultRecords = 2
	if err := update(t, s, 6, func(tx *evalstore.Tx) error {
		_, err := tx.Transition("app", "eval-1", nil, evalrecord.PhaseCompleted, p, 9)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_ = s.View(func(tx *evalstore.Tx) error {
		j, _ := tx.JobByID("eval-1")
		if j.Phase != evalrecord.PhaseCompleted || j.ResultFormat != evalrecord.ResultRecords || j.ResultDigest != want {
			t.Fatalf("%+v", j)
		}
		if _, err := tx.Result("eval-1"); err != evalrecord.ErrNotFound {
			t.Fatalf("a document was stored: %v", err)
		}
		return nil
	})
}
