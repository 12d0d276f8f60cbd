package worker

import (
	"testing"

	"github.com/fadcedab/adk/coordinator/api"
)

func TestTaskSetRunsEachTaskOnce(t *testing.T) {
	var s taskSet
	a := api.TaskRef{JobID: "j1", Index: 70}
	if !s.add(a) || s.add(a) {
		t.Fatal("a task must be new once, then seen")
	}
	if !s.add(api.TaskRef{JobID: "j1", Index: 0}) || !s.add(api.TaskRef{JobID: "j2", Index: 70}) {
		t.Fatal("other tasks are new")
	}
	for _, bad := range []int{-1, maxSeenIndex} {
		if s.add(api.TaskRef{JobID: "j1", Index: bad}) {
			t.Fatalf("index %d accepted", bad)
		}
	}
	// The oldest jobs are forgotten past maxSeenJobs; the rest stay.
	for i := range maxSeenJobs {
		s.add(api.TaskRef{JobID: "x" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), Index: 1})
	}
	if len(s.jobs) != maxSeenJobs || len(s.order) != maxSeenJobs {
		t.Fatalf("%d jobs remembered, want %d", len(s.jobs), maxSeenJobs)
	}
}

// TestKillMarksUnheldTasksSeen: a kill naming a task the worker does not
// hold yet (its message still in JetStream) makes its later delivery a
// task seen before, refused unrun; a held one is killed.
func TestKillMarksUnheldTasksSeen(t *testing.T) {
	held, late := api.TaskRef{JobID: "j1", Index: 1}, api.TaskRef{JobID: "j1", Index: 2}
	h := &heldTask{cancel: func() {}}
	w := &Worker{running: map[api.TaskRef]*heldTask{held: h}}
	w.seen.add(held)
	w.kill([]api.TaskRef{held, late})
	if !h.killed {
		t.Fatal("the held task was not killed")
	}
	if w.seen.add(late) {
		t.Fatal("a task killed before it came would be accepted when it comes")
	}
	if !w.seen.add(api.TaskRef{JobID: "j1", Index: 3}) {
		t.Fatal("a task no kill named is refused")
	}
}
