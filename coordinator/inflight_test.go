package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/hashicorp/raft"
)

// TestInflight_UndecidedAnswersWhatTheFSMApplied checks what a heartbeat
// answer tells a worker it may stop reporting: only tasks whose outcome
// this node's FSM applied, whether or not the in-flight index was valid
// at the time.
func TestInflight_UndecidedAnswersWhatTheFSMApplied(t *testing.T) {
	f, _ := newFSM(t)
	refs := make([]api.TaskRef, 14) // cacheJob's 7 cases × 2 samples
	for i := range refs {
		refs[i] = api.TaskRef{JobID: "eval-a", Index: i}
	}
	var afterFirst []api.TaskRef
	cacheJob(t, f, 7, 2, func() { afterFirst = f.inflight.undecided(refs) })
	// The first finish entry carried tasks 0..6; the index was never read,
	// so it was invalid throughout: the decided set is kept anyway.
	if want := refs[7:]; !slices.Equal(afterFirst, want) {
		t.Fatalf("after the first finish entry: undecided %v, want %v", afterFirst, want)
	}
	if got := f.inflight.undecided(refs); len(got) != 0 {
		t.Fatalf("after every finish entry: undecided %v, want none", got)
	}
	// A task of another job, or assigned but not finished, is undecided.
	other := []api.TaskRef{{JobID: "eval-b", Index: 0}, {JobID: "eval-a", Index: 14}}
	if got := f.inflight.undecided(other); !slices.Equal(got, other) {
		t.Fatalf("unknown tasks: undecided %v, want %v", got, other)
	}
}

// TestInflight_DecidedIsBounded checks the decided set's two generations:
// a node remembers at most 2 × maxDecidedRefs tasks, always the latest
// maxDecidedRefs, and forgets the oldest (answered undecided: the worker
// reports them until its own window ends).
func TestInflight_DecidedIsBounded(t *testing.T) {
	var x inflightIndex
	n := 2*maxDecidedRefs + 10
	outs := make([]evalstore.Outcome, n)
	accepted := make([]bool, n)
	for i := range outs {
		outs[i] = evalstore.Outcome{JobID: fmt.Sprintf("eval-%d", i/1000), Index: i}
		accepted[i] = i != n-3 // a refused outcome decides nothing
	}
	x.finished(outs, accepted)
	if got := len(x.decided) + len(x.decidedOld); got > 2*maxDecidedRefs {
		t.Fatalf("%d tasks remembered, want at most %d", got, 2*maxDecidedRefs)
	}
	ref := func(i int) api.TaskRef { return api.TaskRef{JobID: outs[i].JobID, Index: i} }
	latest := make([]api.TaskRef, 0, maxDecidedRefs)
	for i := n - maxDecidedRefs; i < n; i++ {
		if accepted[i] {
			latest = append(latest, ref(i))
		}
	}
	if got := x.undecided(latest); len(got) != 0 {
		t.Fatalf("%d of the latest %d decided tasks answered undecided", len(got), maxDecidedRefs)
	}
	if got := x.undecided([]api.TaskRef{ref(0), ref(n - 3)}); len(got) != 2 {
		t.Fatalf("the oldest task and a refused one: undecided %v, want both", got)
	}
}

// TestInflight_EndedJobsNameTheirTasks checks what the leader's kill
// notices name (applyResult.kills): an entry ending a job answers the
// job's in-flight tasks by worker and drops them from the index, which
// stays valid and equal to the store, so a second job ending in the same
// batch names its tasks too (before, a job's end invalidated the index,
// and the second end would have found it empty). A recovery names every
// task in flight.
func TestInflight_EndedJobsNameTheirTasks(t *testing.T) {
	f, s := newFSM(t)
	idx := uint64(0)
	apply := func(logs ...*raft.Log) []*applyResult {
		t.Helper()
		var out []*applyResult
		for _, r := range f.ApplyBatch(logs) {
			a := r.(*applyResult)
			if a.Err != nil {
				t.Fatal(a.Err)
			}
			out = append(out, a)
		}
		return out
	}
	next := func(ct cmdType, body any) *raft.Log { idx++; return entry(t, idx, ct, body) }
	body := []byte(`{"schema_version":2}`)
	set := evalrecord.SetRecord{Scope: "app", ID: "s", Version: "1", Digest: canonjson.DigestBytes(body), Body: body}
	adm := evalstore.Admission{MaxConcurrency: 4, MaxQueue: 5, MaxQueueBytes: 1 << 20}
	for _, id := range []string{"eval-a", "eval-b", "eval-c", "eval-d"} {
		apply(next(cmdSubmit, &submitCmd{Set: set, Job: evalrecord.Job{JobID: id, Scope: "app", EvalSetID: "s", EvalSetVersion: "1",
			Spec: evalrecord.JobSpec{Cases: 2, Samples: 2, TaskTTLMS: 1000}}, Adm: adm, Now: 1}))
	}
	if _, err := f.inflight.byWorker(s); err != nil { // the leader's tick reads it: valid from here
		t.Fatal(err)
	}
	var as []evalstore.Assignment
	for _, id := range []string{"eval-a", "eval-b", "eval-c", "eval-d"} {
		for i := range 3 {
			as = append(as, evalstore.Assignment{JobID: id, Index: i, Worker: []string{"w1", "w2"}[i%2]})
		}
	}
	apply(next(cmdAssign, &assignCmd{As: as, Now: 2}))
	// eval-d's task 2 ends; the other two of it stay in flight.
	apply(next(cmdFinish, &finishCmd{Outs: []evalstore.Outcome{{JobID: "eval-d", Index: 2, Worker: "w1", State: evalrecord.TaskDone}}, Now: 3}))

	end := func(id string, to evalrecord.Phase, reason string) *raft.Log {
		return next(cmdTransition, &transitionCmd{Scope: "app", JobID: id, Expected: []evalrecord.Phase{evalrecord.PhaseRunning}, To: to,
			Patch: evalstore.Patch{FinishedAt: 4, Reason: reason}, Adm: adm, Now: 4})
	}
	got := apply(end("eval-a", evalrecord.PhaseCancelled, evalrecord.ReasonUserCancelled),
		end("eval-b", evalrecord.PhaseTimedOut, evalrecord.ReasonDeadlineExceeded))
	for i, id := range []string{"eval-a", "eval-b"} {
		want := map[string][]api.TaskRef{"w1": {{JobID: id, Index: 0}, {JobID: id, Index: 2}}, "w2": {{JobID: id, Index: 1}}}
		if k := sortedKills(got[i].kills); !equalKills(k, want) {
			t.Fatalf("%s ended: kills %v, want %v", id, k, want)
		}
	}
	inflight, err := f.inflight.byWorker(s)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := f.inflight.count(); !ok || n != 5 {
		t.Fatalf("index after two ends: %d tasks (valid %v), want eval-c's 3 and eval-d's 2", n, ok)
	}
	var rebuilt inflightIndex
	fromStore, err := rebuilt.byWorker(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromStore["w1"]) != len(inflight["w1"]) || len(fromStore["w2"]) != len(inflight["w2"]) {
		t.Fatalf("index %v differs from the store %v", inflight, fromStore)
	}
	r := apply(next(cmdRecover, &recoverCmd{Reason: evalrecord.ReasonServiceRestarted, Now: 5}))[0]
	want := map[string][]api.TaskRef{"w1": {{JobID: "eval-c", Index: 0}, {JobID: "eval-c", Index: 2}, {JobID: "eval-d", Index: 0}},
		"w2": {{JobID: "eval-c", Index: 1}, {JobID: "eval-d", Index: 1}}}
	if k := sortedKills(r.kills); !equalKills(k, want) {
		t.Fatalf("recovery: kills %v, want %v", k, want)
	}
}

// sortedKills sorts each worker's refs by job and index.
func sortedKills(k map[string][]api.TaskRef) map[string][]api.TaskRef {
	for _, refs := range k {
		slices.SortFunc(refs, func(a, b api.TaskRef) int {
			if a.JobID != b.JobID {
				return strings.Compare(a.JobID, b.JobID)
			}
			return a.Index - b.Index
		})
	}
	return k
}

func equalKills(a, b map[string][]api.TaskRef) bool {
	if len(a) != len(b) {
		return false
	}
	for w, refs := range a {
		if !slices.Equal(refs, b[w]) {
			return false
		}
	}
	return true
}
