package coordinator

import (
	"fmt"
	"slices"
	"testing"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/store/evalstore"
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
