package coordinator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/hashicorp/raft"
)

// cacheJob runs a job of cases × samples tasks through an FSM: submit,
// assign everything to w1, then finish it in entries of 7 outcomes, every
// fifth task lost (worker_lost) and one done task with a sample that does
// not decode. afterFirst (if not nil) runs after the first finish entry.
func cacheJob(t testing.TB, f *FSM, cases, samples int, afterFirst func()) *evalrecord.Job {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"schema_version":2,"id":"s","version":"1","cases":[`)
	for i := range cases {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"c%03d","turns":[{"id":"t","input":"hello","expected_response":"ok"}]}`, i)
	}
	b.WriteString("]}")
	body := []byte(b.String())
	opts := evalengine.DefaultOptions()
	opts.Samples = samples
	optsDoc, err := evalengine.EncodeOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := evalengine.Prepare(body, nil, optsDoc)
	if err != nil {
		t.Fatal(err)
	}
	total := cases * samples
	set := evalrecord.SetRecord{Scope: "app", ID: "s", Version: "1", Digest: canonjson.DigestBytes(body), Body: body}
	idx := uint64(1)
	apply := func(ct cmdType, body any) *applyResult {
		t.Helper()
		r := f.ApplyBatch([]*raft.Log{entry(t, idx, ct, body)})[0].(*applyResult)
		idx++
		if r.Err != nil {
			t.Fatalf("%s: %v", ct, r.Err)
		}
		return r
	}
	apply(cmdSubmit, &submitCmd{Set: set, Job: evalrecord.Job{JobID: "eval-a", Scope: "app", EvalSetID: "s", EvalSetVersion: "1",
		Spec: evalrecord.JobSpec{Cases: cases, Samples: samples, TaskTTLMS: 1000, Options: optsDoc}},
		Adm: evalstore.Admission{MaxConcurrency: 1, MaxQueue: 5, MaxQueueBytes: 1 << 20}, Now: 1})
	var as []evalstore.Assignment
	for i := range total {
		as = append(as, evalstore.Assignment{JobID: "eval-a", Index: i, Worker: "w1"})
	}
	for k := 0; k < len(as); k += 512 { // MaxTasksPerCommand: a Badger transaction's bound
		apply(cmdAssign, &assignCmd{As: as[k:min(k+512, len(as))], Now: 2})
	}
	var outs []evalstore.Outcome
	for i := range total {
		ci, si := api.TaskIndex(i, cases)
		o := evalstore.Outcome{JobID: "eval-a", Index: i, Worker: "w1", State: evalrecord.TaskDone}
		switch {
		case i%5 == 4:
			o.State, o.Tag = evalrecord.TaskFailed, evalengine.TagWorkerLost
		case i == 1:
			o.Sample = []byte(`{"case_id":`)
		default:
			s := evalengine.ErrorSample(p.Set, ci, si, "")
			s.Status, s.Passed, s.Error, s.DurationMS = evalengine.SampleStatusPassed, true, "", int64(i)
			if o.Sample, err = json.Marshal(s); err != nil {
				t.Fatal(err)
			}
		}
		outs = append(outs, o)
	}
	for k := 0; k < len(outs); k += 7 {
		apply(cmdFinish, &finishCmd{Outs: outs[k:min(k+7, len(outs))], Now: 3})
		if k == 0 && afterFirst != nil {
			afterFirst()
		}
	}
	var j *evalrecord.Job
	if err := f.store.View(func(tx *evalstore.Tx) (err error) {
		j, err = tx.JobByID("eval-a")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if j.Progress.Done != total {
		t.Fatalf("done %d of %d", j.Progress.Done, total)
	}
	return j
}

// TestCompleteJob_CacheMatchesStore checks that a job's result is the same
// bytes whether it is built from the sample cache, from the store, or from
// both: a node that restarted or restored a snapshot mid-job, a cache that
// outgrew its bound, a cache switched off.
func TestCompleteJob_CacheMatchesStore(t *testing.T) {
	now := time.UnixMilli(5000)
	complete := func(t *testing.T, setup func(f *FSM) func()) (*transitionCmd, bool) {
		t.Helper()
		f, s := newFSM(t)
		n := &Node{store: s, fsm: f, cfg: Config{ResultDocuments: true}}
		afterFirst := setup(f)
		j := cacheJob(t, f, 13, 11, afterFirst)
		tc, err := n.completeJob(j, now)
		if err != nil || tc.To != evalrecord.PhaseCompleted {
			t.Fatalf("%+v %v", tc, err)
		}
		if tc.Patch.ResultDigest != canonjson.DigestBytes(tc.doc) || tc.Patch.ResultSize != int64(len(tc.doc)) || tc.Patch.Result != nil {
			t.Fatalf("the entry carries %d result bytes, digest %q size %d for a %d-byte document", len(tc.Patch.Result), tc.Patch.ResultDigest, tc.Patch.ResultSize, len(tc.doc))
		}
		return tc, tc.timing.cached
	}
	want, cached := complete(t, func(f *FSM) func() { f.samples.disable(); return nil }) // the store only
	if cached {
		t.Fatal("a switched-off cache was used")
	}
	if _, err := evalengine.DecodeResult(want.doc); err != nil {
		t.Fatalf("result: %v", err)
	}
	cases := map[string]struct {
		setup  func(f *FSM) func()
		cached bool
	}{
		"cached all along":         {func(f *FSM) func() { return nil }, true},
		"cache on mid-job":         {func(f *FSM) func() { f.samples.disable(); return f.samples.enable }, false},
		"restarted mid-job":        {func(f *FSM) func() { return func() { f.samples.disable(); f.samples.enable() } }, false},
		"over the byte bound":      {func(f *FSM) func() { f.samples.max = 4 << 10; f.samples.enable(); return nil }, false},
		"snapshot restore mid-job": {func(f *FSM) func() { return f.samples.reset }, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, cached := complete(t, c.setup)
			if cached != c.cached {
				t.Fatalf("cached %v, want %v", cached, c.cached)
			}
			if !bytes.Equal(got.doc, want.doc) || got.Patch.ResultDigest != want.Patch.ResultDigest {
				t.Fatalf("the result differs from the store's (%d vs %d bytes)", len(got.doc), len(want.doc))
			}
		})
	}
}

// TestSampleCache_ForgetsEndedJobs checks that a job becoming terminal,
// a recover and switching the cache off leave no bytes behind.
func TestSampleCache_ForgetsEndedJobs(t *testing.T) {
	f, _ := newFSM(t)
	cacheJob(t, f, 3, 2, nil)
	if f.samples.bytes == 0 || len(f.samples.jobs) != 1 {
		t.Fatalf("cached %d bytes of %d jobs", f.samples.bytes, len(f.samples.jobs))
	}
	r := f.ApplyBatch([]*raft.Log{entry(t, 100, cmdTransition, &transitionCmd{Scope: "app", JobID: "eval-a", To: evalrecord.PhaseCancelled,
		Patch: evalstore.Patch{FinishedAt: 9, Reason: evalrecord.ReasonUserCancelled}, Now: 9})})[0].(*applyResult)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if f.samples.bytes != 0 || len(f.samples.jobs) != 0 {
		t.Fatalf("after the job ended: %d bytes of %d jobs", f.samples.bytes, len(f.samples.jobs))
	}
	f.samples.disable()
	if f.samples.outcomes("eval-a") != nil {
		t.Fatal("a disabled cache answered")
	}
}
