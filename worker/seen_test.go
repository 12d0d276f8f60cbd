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
