package coordinator

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/hashicorp/raft"
	"github.com/vmihailenco/msgpack/v5"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func newFSM(t testing.TB) (*FSM, *evalstore.Store) {
	t.Helper()
	s, err := evalstore.Open(evalstore.Options{Dir: t.TempDir(), MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return NewFSM(s, nil), s
}

func entry(t testing.TB, idx uint64, ct cmdType, body any) *raft.Log {
	t.Helper()
	b, err := encodeCmd(ct, body)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: idx, Type: raft.LogCommand, Data: b}
}

func submitEntry(t *testing.T, idx uint64, jobID string) *raft.Log {
	body := []byte(`{"schema_version":2}`)
	set := evalrecord.SetRecord{Scope: "app", ID: "s", Version: "1", Digest: canonjson.DigestBytes(body), Body: body}
	return entry(t, idx, cmdSubmit, &submitCmd{Set: set, Job: evalrecord.Job{JobID: jobID, Scope: "app", EvalSetID: "s", EvalSetVersion: "1",
		Spec: evalrecord.JobSpec{Cases: 1, Samples: 2, TaskTTLMS: 100}}, Adm: evalstore.Admission{MaxConcurrency: 1, MaxQueue: 5, MaxQueueBytes: 1 << 20}, Now: 1})
}

func TestFSM_ReplayNeverDoubleApplies(t *testing.T) {
	f, s := newFSM(t)
	log := []*raft.Log{
		submitEntry(t, 1, "eval-a"),
		entry(t, 2, cmdAssign, &assignCmd{As: []evalstore.Assignment{{JobID: "eval-a", Index: 0, Worker: "w1"}}, Now: 2}),
		entry(t, 3, cmdFinish, &finishCmd{Outs: []evalstore.Outcome{{JobID: "eval-a", Index: 0, Worker: "w1", State: evalrecord.TaskDone}}, Now: 3}),
	}
	for _, l := range log {
		if r := f.Apply(l).(*applyResult); r.Err != nil {
			t.Fatalf("index %d: %v", l.Index, r.Err)
		}
	}
	// Replay the whole log, as raft does after a restart.
	for _, l := range log {
		f.Apply(l)
	}
	_ = s.View(func(tx *evalstore.Tx) error {
		j, err := tx.JobByID("eval-a")
		if err != nil || j.Progress.Dispatched != 1 || j.Progress.Done != 1 {
			t.Fatalf("%+v %v", j, err)
		}
		return nil
	})
}

func TestFSM_SnapshotInstallThenReplay(t *testing.T) {
	a, _ := newFSM(t)
	a.Apply(submitEntry(t, 1, "eval-a"))
	b, bs := restored(t, a)
	// Entry 1 is in the snapshot: replaying it must be a no-op; entry 2 applies.
	b.Apply(submitEntry(t, 1, "eval-a"))
	if r := b.Apply(submitEntry(t, 2, "eval-b")).(*applyResult); r.Err != nil || r.Job.Phase != evalrecord.PhaseQueued {
		t.Fatalf("%+v", r)
	}
	if bs.AppliedIndex() != 2 {
		t.Fatalf("applied %d", bs.AppliedIndex())
	}
}

func TestFSM_RecoverFailsActiveJobs(t *testing.T) {
	f, _ := newFSM(t)
	f.Apply(submitEntry(t, 1, "eval-a"))
	f.Apply(submitEntry(t, 2, "eval-b"))
	r := f.Apply(entry(t, 3, cmdRecover, &recoverCmd{Reason: evalrecord.ReasonServiceRestarted, Now: 9})).(*applyResult)
	if r.Err != nil || r.Recovered != 2 {
		t.Fatalf("%+v", r)
	}
}

type memSink struct{ bytes.Buffer }

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { return nil }
func (m *memSink) Close() error  { return nil }

// restored is a new node's FSM and store, restored from a snapshot of
// from, as a follower installing it.
func restored(t *testing.T, from *FSM) (*FSM, *evalstore.Store) {
	t.Helper()
	snap, err := from.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	f, s := newFSM(t)
	if err := f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	return f, s
}

func TestCommand_LargeBodiesAreCompressed(t *testing.T) {
	sample := []byte(`{"case_id":"c1","sample_index":0,"status":"passed","turns":[{"turn_id":"t","input":"q","actual":"echo: q","passed":true}],"criteria":[{"metric_id":"response","score":1,"threshold":1,"passed":true}]}`)
	var outs []evalstore.Outcome
	for i := range 1000 {
		outs = append(outs, evalstore.Outcome{JobID: "eval-a", Index: i, Worker: "w0", State: evalrecord.TaskDone, Sample: sample})
	}
	big := &finishCmd{Outs: outs, Now: 7}
	plain, err := msgpack.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	data, err := encodeCmd(cmdFinish, big)
	if err != nil {
		t.Fatal(err)
	}
	if data[0]&cmdCompressed == 0 || len(data) > len(plain)/4 {
		t.Fatalf("a %d-byte finish was stored in %d bytes (flag %#x)", len(plain), len(data), data[0])
	}
	ct, body, err := decodeCmd(data)
	if err != nil || ct != cmdFinish || !bytes.Equal(body, plain) {
		t.Fatalf("round trip: %v %v equal=%v", ct, err, bytes.Equal(body, plain))
	}
	// Small commands, and every entry written before compression, stay plain.
	small, _ := encodeCmd(cmdLease, &leaseCmd{})
	if ct, _, err := decodeCmd(small); err != nil || ct != cmdLease || small[0]&cmdCompressed != 0 {
		t.Fatalf("small command: %v %v", ct, err)
	}
	// A corrupt compressed entry is an error, not a panic or a huge allocation.
	bad := append([]byte{byte(cmdFinish) | cmdCompressed}, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3)
	if _, _, err := decodeCmd(bad); err == nil {
		t.Fatal("corrupt compressed command decoded")
	}
}

// ApplyBatch reaches the state Apply reaches entry by entry, with the same
// answers, a failing entry (a stale transition) in the middle included, and
// a replayed batch changes nothing.
func TestFSM_ApplyBatchEqualsApply(t *testing.T) {
	log := []*raft.Log{
		submitEntry(t, 1, "eval-a"),
		entry(t, 2, cmdAssign, &assignCmd{As: []evalstore.Assignment{{JobID: "eval-a", Index: 0, Worker: "w1"}, {JobID: "eval-a", Index: 1, Worker: "w2"}}, Now: 2}),
		{Index: 3, Type: raft.LogConfiguration},
		entry(t, 4, cmdTransition, &transitionCmd{Scope: "app", JobID: "eval-a", Expected: []evalrecord.Phase{evalrecord.PhaseQueued},
			To: evalrecord.PhaseCancelled, Now: 4}),
		entry(t, 5, cmdFinish, &finishCmd{Outs: []evalstore.Outcome{{JobID: "eval-a", Index: 0, Worker: "w1", State: evalrecord.TaskDone, Sample: []byte(`{}`)},
			{JobID: "eval-a", Index: 1, Worker: "w9", State: evalrecord.TaskDone}}, Now: 5}),
		entry(t, 6, cmdLease, &leaseCmd{Lease: evalrecord.Lease{LeaderID: "c1", At: 6}}),
	}
	one, oneStore := newFSM(t)
	var want []*applyResult
	for _, l := range log {
		r, _ := one.Apply(l).(*applyResult)
		want = append(want, r)
	}
	if want[3] == nil || want[3].Err == nil || want[4].Err != nil || len(want[4].Accepted) != 2 || !want[4].Accepted[0] || want[4].Accepted[1] {
		t.Fatalf("the log does not exercise what it should: %+v %+v", want[3], want[4])
	}
	batch, batchStore := newFSM(t)
	if _, err := batch.inflight.byWorker(batchStore); err != nil { // valid: deltas apply
		t.Fatal(err)
	}
	got := batch.ApplyBatch(log)
	for i := range log {
		g, _ := got[i].(*applyResult)
		if (g == nil) != (want[i] == nil) || g != nil && (len(g.Accepted) != len(want[i].Accepted) || (g.Err == nil) != (want[i].Err == nil)) {
			t.Fatalf("entry %d: batch %+v, one by one %+v", log[i].Index, g, want[i])
		}
		if g != nil && g.Err != nil && g.Err.Code != want[i].Err.Code {
			t.Fatalf("entry %d: batch error %v, one by one %v", log[i].Index, g.Err, want[i].Err)
		}
	}
	dump := func(s *evalstore.Store) []byte {
		sn := s.Snapshot()
		defer sn.Release()
		var b bytes.Buffer
		if _, err := sn.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	before := dump(batchStore)
	if !bytes.Equal(before, dump(oneStore)) {
		t.Fatal("ApplyBatch and Apply left different stores")
	}
	batch.ApplyBatch(log)
	if !bytes.Equal(before, dump(batchStore)) || batchStore.AppliedIndex() != 6 {
		t.Fatal("a replayed batch changed the store")
	}
	inflight, err := batch.inflight.byWorker(batchStore)
	if err != nil || len(inflight["w1"]) != 0 || len(inflight["w2"]) != 1 {
		t.Fatalf("in-flight index after the batch: %v %v", inflight, err)
	}
}

// A storage failure inside an apply stops the service fail closed: no
// panic, the typed contract error to the node once, the same answer for
// every later entry (nothing more is applied) and no snapshot that would
// cover entries never applied.
func TestFSM_StorageFailureStopsTheServiceWithoutPanic(t *testing.T) {
	f, s := newFSM(t)
	var stops []error
	f.onFail = func(err error) { stops = append(stops, err) }
	if r := f.Apply(submitEntry(t, 1, "eval-a")).(*applyResult); r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := s.Close(); err != nil { // Badger now fails every write
		t.Fatal(err)
	}
	fin := entry(t, 2, cmdFinish, &finishCmd{Outs: []evalstore.Outcome{{JobID: "eval-a", Index: 0, Worker: "w1", State: evalrecord.TaskDone}}, Now: 3})
	r := f.Apply(fin).(*applyResult)
	if r.Err == nil || r.Err.Code != api.CodeResultPersistenceFailed {
		t.Fatalf("answer %v, want %s", r.Err, api.CodeResultPersistenceFailed)
	}
	later := f.ApplyBatch([]*raft.Log{submitEntry(t, 3, "eval-b"), submitEntry(t, 4, "eval-c")})
	for i, o := range later {
		if e := o.(*applyResult).Err; e == nil || e.Code != api.CodeResultPersistenceFailed {
			t.Fatalf("later entry %d: %v", i, e)
		}
	}
	if len(stops) != 1 {
		t.Fatalf("service stopped %d times, want once: %v", len(stops), stops)
	}
	var ae *api.Error
	if !errors.As(stops[0], &ae) || ae.Code != api.CodeResultPersistenceFailed {
		t.Fatalf("stop error %v", stops[0])
	}
	if _, err := f.Snapshot(); err == nil {
		t.Fatal("snapshot after a storage failure")
	}
}

// A storage failure while recording a cancellation is the contract's
// cancel-persistence stop, in a batch as alone.
func TestFSM_StorageFailureCodeFollowsTheEntry(t *testing.T) {
	f, s := newFSM(t)
	var stops []error
	f.onFail = func(err error) { stops = append(stops, err) }
	f.Apply(submitEntry(t, 1, "eval-a"))
	_ = s.Close()
	out := f.ApplyBatch([]*raft.Log{entry(t, 2, cmdTransition, &transitionCmd{Scope: "app", JobID: "eval-a", To: evalrecord.PhaseCancelled, Now: 2})})
	if e := out[0].(*applyResult).Err; e == nil || e.Code != api.CodeCancelPersistenceFailed {
		t.Fatalf("answer %v, want %s", e, api.CodeCancelPersistenceFailed)
	}
	if len(stops) != 1 {
		t.Fatalf("stops %v", stops)
	}
}
