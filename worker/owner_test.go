package worker

import (
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
)

func TestOwnerHeard_WindowFromTheLeadersSighting(t *testing.T) {
	w := &Worker{owners: map[string]int64{}, running: map[api.TaskRef]*heldTask{}}
	owned := api.Task{JobID: "j1", Index: 0, OwnerTTLMS: 1000}
	w.running[api.TaskRef{JobID: "j1"}] = &heldTask{}
	if !w.ownerHeard(api.Task{JobID: "j9"}) {
		t.Fatal("a task without an owner waits for one")
	}
	if w.ownerHeard(owned) {
		t.Fatal("an owned task started before any answer covered its job")
	}
	sent := time.Now()
	w.noteOwners([]api.OwnerSeen{{JobID: "j1", AgoMS: 200}}, sent)
	if !w.ownerHeard(owned) {
		t.Fatal("owner heard 200 ms before the answer: the task may start")
	}
	// An answer seen out of order with an older sighting changes nothing;
	// one past the window (1.25 × 1 s) closes it only when newer.
	w.noteOwners([]api.OwnerSeen{{JobID: "j1", AgoMS: 5000}}, sent)
	if !w.ownerHeard(owned) {
		t.Fatal("an older sighting replaced a newer one")
	}
	w.mu.Lock()
	w.owners["j1"] = sent.Add(-1300 * time.Millisecond).UnixNano()
	w.mu.Unlock()
	if w.ownerHeard(owned) {
		t.Fatal("owner last heard 1.3 s ago, lease 1 s: the task started")
	}
	// Jobs the worker no longer holds are forgotten at the next answer.
	delete(w.running, api.TaskRef{JobID: "j1"})
	w.noteOwners(nil, time.Now())
	if len(w.owners) != 0 {
		t.Fatalf("owners kept for jobs not held: %v", w.owners)
	}
}
