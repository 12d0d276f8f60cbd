package evalstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

func open(t *testing.T, lim evalstore.Limits) *evalstore.Store {
	t.Helper()
	s, err := evalstore.Open(evalstore.Options{Dir: t.TempDir(), Limits: lim, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func set(scope, id, version, body string) evalrecord.SetRecord {
	b, err := canonjson.Canonicalize([]byte(body))
	if err != nil {
		panic(err)
	}
	return evalrecord.SetRecord{Scope: scope, ID: id, Version: version, Digest: canonjson.DigestBytes(b), Body: b, CreatedAt: 10}
}

func job(scope, id string, s evalrecord.SetRecord) evalrecord.Job {
	return evalrecord.Job{JobID: id, Scope: scope, EvalSetID: s.ID, EvalSetVersion: s.Version,
		Spec: evalrecord.JobSpec{Cases: 2, Samples: 1, TaskTTLMS: 1000}}
}

var adm = evalstore.Admission{MaxConcurrency: 1, MaxQueue: 1, MaxQueueBytes: 1 << 20}

func update(t *testing.T, s *evalstore.Store, idx uint64, fn func(tx *evalstore.Tx) error) error {
	t.Helper()
	_, err := s.Update(idx, fn)
	var se *evalstore.StorageError
	if errors.As(err, &se) {
		t.Fatal(err)
	}
	return err
}

func TestStore_SetRevisionsAreImmutableAndScoped(t *testing.T) {
	s := open(t, evalstore.Limits{MaxSets: 2})
	a := set("app1", "s", "v1", `{"b":1,"a":2}`)
	if err := update(t, s, 1, func(tx *evalstore.Tx) error { _, err := tx.PutSet(a); return err }); err != nil {
		t.Fatal(err)
	}
	t.Run("same digest is idempotent", func(t *testing.T) {
		err := update(t, s, 2, func(tx *evalstore.Tx) error {
			created, err := tx.PutSet(set("app1", "s", "v1", `{"a":2,"b":1}`))
			if created {
				return fmt.Errorf("created again")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("different digest conflicts", func(t *testing.T) {
		err := update(t, s, 3, func(tx *evalstore.Tx) error { _, err := tx.PutSet(set("app1", "s", "v1", `{"a":3}`)); return err })
		if !errors.Is(err, evalrecord.ErrRevisionConflict) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("other scope does not see it", func(t *testing.T) {
		_ = s.View(func(tx *evalstore.Tx) error {
			if _, err := tx.GetSet("app2", "s", "v1"); !errors.Is(err, evalrecord.ErrNotFound) {
				t.Fatalf("got %v", err)
			}
			return nil
		})
	})
	t.Run("capacity", func(t *testing.T) {
		_ = update(t, s, 4, func(tx *evalstore.Tx) error { _, err := tx.PutSet(set("app1", "s", "v2", `{}`)); return err })
		err := update(t, s, 5, func(tx *evalstore.Tx) error { _, err := tx.PutSet(set("app1", "s", "v3", `{}`)); return err })
		if evalrecord.Code(err) != evalrecord.CodeSetCapacity {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("replayed index is skipped", func(t *testing.T) {
		applied, err := s.Update(3, func(tx *evalstore.Tx) error { return fmt.Errorf("must not run") })
		if applied || err != nil {
			t.Fatalf("applied=%v err=%v", applied, err)
		}
		if s.AppliedIndex() != 5 {
			t.Fatalf("applied index %d", s.AppliedIndex())
		}
	})
}

func TestStore_SetPagingCursorIsInjective(t *testing.T) {
	s := open(t, evalstore.Limits{})
	ids := []struct{ id, v string }{{"a", "\x00b"}, {"a\x00", "b"}, {"a", "b"}, {"a\x00b", ""}, {"b", "1"}}
	i := uint64(0)
	for _, x := range ids {
		if x.v == "" {
			continue
		}
		i++
		if err := update(t, s, i, func(tx *evalstore.Tx) error { _, err := tx.PutSet(set("app", x.id, x.v, `{}`)); return err }); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	cursor := ""
	for {
		var p *evalrecord.Page[evalrecord.SetRecord]
		_ = s.View(func(tx *evalstore.Tx) (err error) { p, err = tx.ListSets("app", 1, cursor); return err })
		for _, it := range p.Items {
			seen = append(seen, it.ID+"|"+it.Version)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if len(seen) != 4 {
		t.Fatalf("paged %q", seen)
	}
	_ = s.View(func(tx *evalstore.Tx) error {
		if _, err := tx.ListSets("app", 1001, ""); evalrecord.Code(err) != evalrecord.CodeInvalidPageOptions {
			t.Fatalf("limit: %v", err)
		}
		return nil
	})
}

func TestStore_AtomicCreationAdmissionAndTransitions(t *testing.T) {
	s := open(t, evalstore.Limits{})
	st := set("app", "s", "v1", `{"x":1}`)
	create := func(idx uint64, id string) (*evalrecord.Job, error) {
		var j *evalrecord.Job
		err := update(t, s, idx, func(tx *evalstore.Tx) (err error) {
			j, err = tx.CreateEvaluation(st, job("app", id, st), adm, 100)
			return err
		})
		return j, err
	}
	j1, err := create(1, "eval-1")
	if err != nil || j1.Phase != evalrecord.PhaseRunning || j1.Revision != 1 {
		t.Fatalf("%+v %v", j1, err)
	}
	j2, err := create(2, "eval-2")
	if err != nil || j2.Phase != evalrecord.PhaseQueued {
		t.Fatalf("%+v %v", j2, err)
	}
	if _, err := create(3, "eval-3"); !errors.Is(err, evalrecord.ErrQueueFull) {
		t.Fatalf("queue full: %v", err)
	}
	other := set("app", "other", "v1", `{}`)
	err = update(t, s, 4, func(tx *evalstore.Tx) error {
		_, err := tx.CreateEvaluation(other, job("app", "eval-4", other), adm, 100)
		return err
	})
	if !errors.Is(err, evalrecord.ErrQueueFull) {
		t.Fatal(err)
	}
	_ = s.View(func(tx *evalstore.Tx) error {
		if _, err := tx.GetSet("app", "other", "v1"); !errors.Is(err, evalrecord.ErrNotFound) {
			t.Fatalf("rejected submit left a set: %v", err)
		}
		return nil
	})

	t.Run("compare-and-set", func(t *testing.T) {
		err := update(t, s, 5, func(tx *evalstore.Tx) error {
			_, err := tx.Transition("app", "eval-1", []evalrecord.Phase{evalrecord.PhaseQueued}, evalrecord.PhaseCancelled,
				evalstore.Patch{FinishedAt: 1, Reason: "x"}, 200)
			return err
		})
		if !errors.Is(err, evalrecord.ErrStalePhase) {
			t.Fatalf("got %v", err)
		}
		err = update(t, s, 6, func(tx *evalstore.Tx) error {
			_, err := tx.Transition("app", "eval-1", nil, evalrecord.PhaseCompleted, evalstore.Patch{FinishedAt: 1}, 200)
			return err
		})
		if evalrecord.Code(err) != evalrecord.CodeInvalidResult {
			t.Fatalf("got %v", err)
		}
		var j *evalrecord.Job
		err = update(t, s, 7, func(tx *evalstore.Tx) (err error) {
			j, err = tx.Transition("app", "eval-1", []evalrecord.Phase{evalrecord.PhaseRunning}, evalrecord.PhaseCompleted,
				evalstore.Patch{FinishedAt: 300, Result: []byte(`{"passed":true}`)}, 300)
			return err
		})
		if err != nil || j.Revision != 2 {
			t.Fatalf("%+v %v", j, err)
		}
		err = update(t, s, 8, func(tx *evalstore.Tx) error {
			_, err := tx.Transition("app", "eval-1", nil, evalrecord.PhaseCancelled, evalstore.Patch{FinishedAt: 1, Reason: "x"}, 400)
			return err
		})
		if !errors.Is(err, evalrecord.ErrInvalidTransition) {
			t.Fatalf("from terminal: %v", err)
		}
	})

	t.Run("baselines", func(t *testing.T) {
		if err := update(t, s, 9, func(tx *evalstore.Tx) error { _, err := tx.PutBaseline("app", "main", "eval-2", 500); return err }); !errors.Is(err, evalrecord.ErrJobNotCompleted) {
			t.Fatalf("got %v", err)
		}
		if err := update(t, s, 10, func(tx *evalstore.Tx) error { _, err := tx.PutBaseline("app", "main", "eval-1", 500); return err }); err != nil {
			t.Fatal(err)
		}
		_ = s.View(func(tx *evalstore.Tx) error {
			b, err := tx.GetBaseline("app", "main")
			if err != nil || !bytes.Equal(b.Result, []byte(`{"passed":true}`)) {
				t.Fatalf("%+v %v", b, err)
			}
			if _, err := tx.GetBaseline("other", "main"); !errors.Is(err, evalrecord.ErrNotFound) {
				t.Fatalf("scope leak: %v", err)
			}
			return nil
		})
	})

	t.Run("prune protects baselines and referenced sets", func(t *testing.T) {
		var r *evalrecord.PruneResult
		_ = update(t, s, 11, func(tx *evalstore.Tx) (err error) {
			r, err = tx.Prune("app", evalrecord.PruneOptions{Before: 1000})
			return err
		})
		if r.JobsDeleted != 0 || r.SetRevisionsDeleted != 0 {
			t.Fatalf("%+v", r)
		}
		_ = update(t, s, 12, func(tx *evalstore.Tx) (err error) {
			r, err = tx.Prune("app", evalrecord.PruneOptions{Before: 1000, IncludeBaselines: true})
			return err
		})
		if r.BaselinesDeleted != 1 || r.JobsDeleted != 1 || r.SetRevisionsDeleted != 0 || r.BytesReclaimed == 0 {
			t.Fatalf("%+v", r) // eval-2 (queued) still references the set
		}
	})
	// The same create applied again (a retried proposal whose first apply
	// committed) is the same job, and admits nothing new; another job
	// under an existing id is refused.
	if again, err := create(1000, "eval-2"); err != nil || again.JobID != "eval-2" || again.Seq != j2.Seq {
		t.Fatalf("replayed create: %+v %v", again, err)
	}
	err = update(t, s, 1001, func(tx *evalstore.Tx) error {
		_, err := tx.CreateEvaluation(st, job("app", "eval-2", st), adm, 101)
		return err
	})
	if !errors.Is(err, evalrecord.ErrAlreadyExists) {
		t.Fatalf("same id, other create: %v", err)
	}
}

func TestStore_ByteQuotas(t *testing.T) {
	s := open(t, evalstore.Limits{MaxRecordBytes: 300, MaxScopeBytes: 400, MaxTotalBytes: 100000})
	big := set("app", "s", "v", fmt.Sprintf(`{"x":%q}`, bytes.Repeat([]byte("a"), 400)))
	if err := update(t, s, 1, func(tx *evalstore.Tx) error { _, err := tx.PutSet(big); return err }); evalrecord.Code(err) != evalrecord.CodeRecordBytes {
		t.Fatalf("record: %v", err)
	}
	small := set("app", "s", "v", `{}`)
	if err := update(t, s, 2, func(tx *evalstore.Tx) error { _, err := tx.PutSet(small); return err }); err != nil {
		t.Fatal(err)
	}
	err := update(t, s, 3, func(tx *evalstore.Tx) error {
		_, err := tx.CreateEvaluation(small, job("app", "eval-1", small), adm, 1)
		return err
	})
	if evalrecord.Code(err) != evalrecord.CodeScopeBytes {
		t.Fatalf("scope quota with terminal headroom: %v", err)
	}
}

func TestStore_TasksAreFencedByAssignment(t *testing.T) {
	s := open(t, evalstore.Limits{})
	st := set("app", "s", "v1", `{}`)
	_ = update(t, s, 1, func(tx *evalstore.Tx) error {
		_, err := tx.CreateEvaluation(st, job("app", "eval-1", st), adm, 1)
		return err
	})
	var ok []bool
	_ = update(t, s, 2, func(tx *evalstore.Tx) (err error) {
		ok, err = tx.Assign([]evalstore.Assignment{{JobID: "eval-1", Index: 0, Worker: "w1"}, {JobID: "eval-1", Index: 0, Worker: "w2"}, {JobID: "eval-1", Index: 1, Worker: "w2"}}, 5)
		return err
	})
	if fmt.Sprint(ok) != "[true false true]" {
		t.Fatalf("assign %v", ok)
	}
	_ = update(t, s, 3, func(tx *evalstore.Tx) (err error) {
		ok, err = tx.Finish([]evalstore.Outcome{
			{JobID: "eval-1", Index: 0, Worker: "w2", State: evalrecord.TaskDone},                       // wrong worker
			{JobID: "eval-1", Index: 0, Worker: "w1", State: evalrecord.TaskDone},                       // ok
			{JobID: "eval-1", Index: 0, Worker: "w1", State: evalrecord.TaskDone},                       // duplicate
			{JobID: "eval-1", Index: 1, Worker: "w2", State: evalrecord.TaskFailed, Tag: "worker_lost"}, // ok
			{JobID: "eval-1", Index: 1, Worker: "w2", State: evalrecord.TaskDone, Sample: []byte(`{}`)}, // late
		}, 6)
		return err
	})
	if fmt.Sprint(ok) != "[false true false true false]" {
		t.Fatalf("finish %v", ok)
	}
	_ = s.View(func(tx *evalstore.Tx) error {
		j, _ := tx.JobByID("eval-1")
		if j.Progress.Done != 2 || j.Progress.Errors != 1 {
			t.Fatalf("%+v", j.Progress)
		}
		inflight, _ := tx.InFlight()
		if len(inflight) != 0 {
			t.Fatalf("in flight %v", inflight)
		}
		return nil
	})
}

func TestStore_SnapshotRestoreKeepsAppliedIndex(t *testing.T) {
	a := open(t, evalstore.Limits{})
	st := set("app", "s", "v1", `{"k":"v"}`)
	_ = update(t, a, 7, func(tx *evalstore.Tx) error { _, err := tx.PutSet(st); return err })
	snap := a.Snapshot()
	// A write after the snapshot must not leak into it.
	_ = update(t, a, 8, func(tx *evalstore.Tx) error { _, err := tx.PutSet(set("app", "s", "v2", `{}`)); return err })
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	b := open(t, evalstore.Limits{})
	_ = update(t, b, 99, func(tx *evalstore.Tx) error { _, err := tx.PutSet(set("app", "junk", "1", `{}`)); return err })
	if err := b.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if b.AppliedIndex() != 7 {
		t.Fatalf("applied %d", b.AppliedIndex())
	}
	_ = b.View(func(tx *evalstore.Tx) error {
		if _, err := tx.GetSet("app", "s", "v1"); err != nil {
			t.Fatal(err)
		}
		for _, v := range [][2]string{{"s", "v2"}, {"junk", "1"}} {
			if _, err := tx.GetSet("app", v[0], v[1]); !errors.Is(err, evalrecord.ErrNotFound) {
				t.Fatalf("%v survived: %v", v, err)
			}
		}
		return nil
	})
}

// UpdateBatch gives every op the outcome Update would, in fewer commits:
// a failed op's writes are dropped (the ops before it kept), an op that only
// fails in a shared transaction (too big) succeeds alone, and a replayed
// batch is skipped.
func TestStore_UpdateBatchMatchesUpdate(t *testing.T) {
	s := open(t, evalstore.Limits{})
	boom := errors.New("boom")
	sets := func(from, n int) func(tx *evalstore.Tx) error {
		return func(tx *evalstore.Tx) error {
			for i := from; i < from+n; i++ {
				body := fmt.Sprintf(`{"x":%q}`, bytes.Repeat([]byte{'a'}, 60<<10))
				if _, err := tx.PutSet(set("app", fmt.Sprintf("s%d", i), "v1", body)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	ops := []evalstore.Op{
		{Index: 1, Fn: sets(0, 1)},
		{Index: 2, Fn: func(tx *evalstore.Tx) error {
			if err := tx.PutLease(evalrecord.Lease{LeaderID: "x", At: 1}); err != nil {
				return err
			}
			return boom
		}},
		// 15 × 60 KiB each: together past the transaction limit of an
		// 8 MiB memtable (15%), each alone within it.
		{Index: 3, Fn: sets(1, 15)},
		{Index: 4, Fn: sets(16, 15)},
	}
	other := open(t, evalstore.Limits{})
	if _, err := other.Update(1, func(tx *evalstore.Tx) error {
		if err := ops[2].Fn(tx); err != nil {
			return err
		}
		return ops[3].Fn(tx)
	}); !errors.Is(err, badger.ErrTxnTooBig) {
		t.Fatalf("ops 3 and 4 in one transaction: %v, want ErrTxnTooBig", err)
	}
	applied, errs, err := s.UpdateBatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, boom, nil, nil} {
		if !applied[i] || !errors.Is(errs[i], want) || (want == nil && errs[i] != nil) {
			t.Fatalf("op %d: applied %v err %v, want applied with %v", i, applied[i], errs[i], want)
		}
	}
	if s.AppliedIndex() != 4 {
		t.Fatalf("applied index %d", s.AppliedIndex())
	}
	check := func() {
		t.Helper()
		_ = s.View(func(tx *evalstore.Tx) error {
			if l, err := tx.Lease(); err != nil || l.LeaderID != "" {
				t.Fatalf("the failed op's write survived: %+v %v", l, err)
			}
			for i := range 31 {
				if _, err := tx.GetSet("app", fmt.Sprintf("s%d", i), "v1"); err != nil {
					t.Fatalf("set s%d: %v", i, err)
				}
			}
			return nil
		})
	}
	check()
	// Replayed (a restart): nothing applies again.
	applied, errs, err = s.UpdateBatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ops {
		if applied[i] || errs[i] != nil {
			t.Fatalf("replayed op %d: applied %v err %v", i, applied[i], errs[i])
		}
	}
	check()
}

// A job that ends with tasks in flight cancels exactly those (found by the
// in-flight keys), leaves finished ones and other jobs' alone, and fences
// their late results.
func TestStore_TerminalJobCancelsInFlightTasks(t *testing.T) {
	s := open(t, evalstore.Limits{})
	sr := set("app", "s", "v1", `{"a":1}`)
	two := evalstore.Admission{MaxConcurrency: 2, MaxQueue: 1, MaxQueueBytes: 1 << 20}
	idx := uint64(0)
	do := func(fn func(tx *evalstore.Tx) error) {
		t.Helper()
		idx++
		if err := update(t, s, idx, fn); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"eval-a", "eval-b"} {
		do(func(tx *evalstore.Tx) error {
			_, err := tx.CreateEvaluation(sr, job("app", id, sr), two, 1)
			return err
		})
	}
	do(func(tx *evalstore.Tx) error {
		_, err := tx.Assign([]evalstore.Assignment{{JobID: "eval-a", Index: 0, Worker: "w1"}, {JobID: "eval-a", Index: 1, Worker: "w2"},
			{JobID: "eval-b", Index: 0, Worker: "w1"}}, 2)
		return err
	})
	do(func(tx *evalstore.Tx) error {
		_, err := tx.Finish([]evalstore.Outcome{{JobID: "eval-a", Index: 0, Worker: "w1", State: evalrecord.TaskDone, Sample: []byte(`{}`)}}, 3)
		return err
	})
	do(func(tx *evalstore.Tx) error {
		_, err := tx.Transition("app", "eval-a", []evalrecord.Phase{evalrecord.PhaseRunning}, evalrecord.PhaseCancelled,
			evalstore.Patch{FinishedAt: 4, Reason: evalrecord.ReasonUserCancelled}, 4)
		return err
	})
	_ = s.View(func(tx *evalstore.Tx) error {
		tasks, err := tx.Tasks("eval-a")
		if err != nil || len(tasks) != 2 || tasks[0].State != evalrecord.TaskDone || tasks[1].State != evalrecord.TaskCancelled {
			t.Fatalf("eval-a tasks %+v %v", tasks, err)
		}
		inflight, err := tx.InFlight()
		if err != nil || len(inflight) != 1 || len(inflight["w1"]) != 1 || inflight["w1"][0].JobID != "eval-b" {
			t.Fatalf("in flight %+v %v", inflight, err)
		}
		return nil
	})
	do(func(tx *evalstore.Tx) error {
		ok, err := tx.Finish([]evalstore.Outcome{{JobID: "eval-a", Index: 1, Worker: "w2", State: evalrecord.TaskDone}}, 5)
		if err == nil && ok[0] {
			return errors.New("a late result of a cancelled task was accepted")
		}
		return err
	})
}

// TestStore_ListBaselinesPagesByName: a scope's baselines page by name,
// without their result documents, and never show another scope's.
func TestStore_ListBaselinesPagesByName(t *testing.T) {
	s := open(t, evalstore.Limits{})
	st := set("app", "s", "v1", `{}`)
	_ = update(t, s, 1, func(tx *evalstore.Tx) error {
		if _, err := tx.CreateEvaluation(st, job("app", "eval-1", st), adm, 1); err != nil {
			return err
		}
		if _, err := tx.Transition("app", "eval-1", nil, evalrecord.PhaseCompleted, evalstore.Patch{FinishedAt: 2, Result: []byte(`{"passed":true}`)}, 2); err != nil {
			return err
		}
		for _, name := range []string{"c", "a", "b"} {
			if _, err := tx.PutBaseline("app", name, "eval-1", 3); err != nil {
				return err
			}
		}
		return nil
	})
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		var p *evalrecord.Page[evalrecord.Baseline]
		if err := s.View(func(tx *evalstore.Tx) (err error) { p, err = tx.ListBaselines("app", 2, cursor); return err }); err != nil {
			t.Fatal(err)
		}
		for _, b := range p.Items {
			if b.Result != nil || b.JobID != "eval-1" || b.ResultDigest == "" || b.UpdatedAt != 3 || b.Scope != "app" {
				t.Fatalf("row %+v", b)
			}
			names = append(names, b.Name)
		}
		if p.NextCursor == "" {
			break
		}
		if pages > 3 {
			t.Fatal("paging does not end")
		}
		cursor = p.NextCursor
	}
	if fmt.Sprint(names) != "[a b c]" {
		t.Fatalf("names %q", names)
	}
	_ = s.View(func(tx *evalstore.Tx) error {
		if p, err := tx.ListBaselines("other", 0, ""); err != nil || len(p.Items) != 0 {
			t.Fatalf("other scope: %+v %v", p, err)
		}
		for _, bad := range []struct {
			limit  int
			cursor string
		}{{1001, ""}, {-1, ""}, {1, "zz"}, {1, string(bytes.Repeat([]byte("a"), 514))}} {
			if _, err := tx.ListBaselines("app", bad.limit, bad.cursor); evalrecord.Code(err) != evalrecord.CodeInvalidPageOptions {
				t.Fatalf("%d %q: %v", bad.limit, bad.cursor, err)
			}
		}
		return nil
	})
}
