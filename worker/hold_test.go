package worker

import (
	"context"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
)

// TestEndHeld_LastTaskOfAMessageReleasesItsSlot checks a held task's
// bookkeeping as holders end it: it leaves the running set and its job's
// count at once, is listed as finished only when acked and not fenced,
// and the message's slot is released by its last task, not before.
func TestEndHeld_LastTaskOfAMessageReleasesItsSlot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		acked  bool
		fenced int // index of a task killed by a fence (-1: none)
		recent int
	}{
		{"acked", true, -1, 3},
		{"not acked", false, -1, 0},
		{"acked, one fenced", true, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Worker{slots: make(chan struct{}, 2), running: map[api.TaskRef]*heldTask{}, heldJobs: map[string]int{}, recent: map[api.TaskRef]time.Time{}}
			w.slots <- struct{}{} // another message's
			w.slots <- struct{}{} // this message's
			msg := &heldMsg{}
			for i := range 3 {
				ctx, cancel := context.WithCancel(context.Background())
				h := held{task: api.Task{JobID: "j1", Index: i}, ref: api.TaskRef{JobID: "j1", Index: i}, ctx: ctx, h: &heldTask{cancel: cancel}}
				if i == tc.fenced {
					h.h.fenced.Store(true)
				}
				msg.hs = append(msg.hs, h)
				w.running[h.ref] = h.h
				w.heldJobs["j1"]++
			}
			w.running[api.TaskRef{JobID: "j2"}] = &heldTask{cancel: func() {}}
			w.heldJobs["j2"] = 1
			msg.left.Store(int32(len(msg.hs)))
			for i, h := range msg.hs {
				w.endHeld(msg, h, tc.acked)
				if h.ctx.Err() == nil {
					t.Fatalf("task %d ended with its context live", i)
				}
				if _, ok := w.running[h.ref]; ok {
					t.Fatalf("task %d still running after it ended", i)
				}
				if want := 2 - i; w.heldJobs["j1"] != want {
					t.Fatalf("after task %d: %d tasks of j1 held, want %d", i, w.heldJobs["j1"], want)
				}
				wantSlots := 2
				if i == len(msg.hs)-1 {
					wantSlots = 1
				}
				if len(w.slots) != wantSlots {
					t.Fatalf("after task %d of 3: %d slots taken, want %d", i, len(w.slots), wantSlots)
				}
			}
			if _, ok := w.heldJobs["j1"]; ok || w.heldJobs["j2"] != 1 || len(w.running) != 1 {
				t.Fatalf("held jobs %v, running %d: want only j2's task", w.heldJobs, len(w.running))
			}
			if len(w.recent) != tc.recent {
				t.Fatalf("%d tasks listed as finished, want %d", len(w.recent), tc.recent)
			}
		})
	}
}

// TestHandOff_NeverWaitsForAHolder checks that a task handed off while
// every holder is busy (here: none) is still held, on a goroutine of its
// own the worker waits for, and ends as a holder would end it.
func TestHandOff_NeverWaitsForAHolder(t *testing.T) {
	w := &Worker{slots: make(chan struct{}, 1), running: map[api.TaskRef]*heldTask{}, heldJobs: map[string]int{}, recent: map[api.TaskRef]time.Time{},
		holdq: make(chan holdJob), runq: make(chan *runReq)}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	defer w.cancel()
	w.slots <- struct{}{}
	ctx, cancel := context.WithCancel(w.ctx)
	h := held{task: api.Task{JobID: "j1"}, ref: api.TaskRef{JobID: "j1"}, ctx: ctx, h: &heldTask{cancel: cancel}}
	w.running[h.ref] = h.h
	w.heldJobs["j1"] = 1
	msg := &heldMsg{hs: []held{h}}
	msg.left.Store(1)
	cancel() // killed while waiting for a run slot
	w.handOff(holdJob{msg: msg, i: 0})
	w.wg.Wait()
	if len(w.running) != 0 || len(w.heldJobs) != 0 || len(w.slots) != 0 {
		t.Fatalf("after the handed-off task ended: running %d, held jobs %v, slots taken %d; want none", len(w.running), w.heldJobs, len(w.slots))
	}
}
