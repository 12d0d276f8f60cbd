package worker

import (
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
)

// TestSettleRecent checks what a heartbeat answer lets the worker stop
// reporting: the sent tasks the leader checked and did not list as
// pending; nothing when the answer did not check them (a leader of an
// earlier build), and never a task finished after the heartbeat was
// built.
func TestSettleRecent(t *testing.T) {
	ref := func(i int) api.TaskRef { return api.TaskRef{JobID: "eval-a", Index: i} }
	sent := []api.TaskRef{ref(0), ref(1), ref(2)}
	for _, tc := range []struct {
		name string
		rep  api.HeartbeatReply
		keep []int
	}{
		{"an earlier leader's answer settles nothing", api.HeartbeatReply{Leader: "c0"}, []int{0, 1, 2, 3}},
		{"checked: all but the pending", api.HeartbeatReply{Leader: "c0", RecentChecked: true, RecentPending: []api.TaskRef{ref(1)}}, []int{1, 3}},
		{"checked, none pending", api.HeartbeatReply{Leader: "c0", RecentChecked: true}, []int{3}},
		{"a pending task not sent is ignored", api.HeartbeatReply{Leader: "c0", RecentChecked: true, RecentPending: []api.TaskRef{ref(9)}}, []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			// Task 3 finished after the heartbeat was built: not sent.
			w := &Worker{recent: map[api.TaskRef]time.Time{ref(0): now, ref(1): now, ref(2): now, ref(3): now}}
			w.settleRecent(sent, &tc.rep)
			if len(w.recent) != len(tc.keep) {
				t.Fatalf("recent %v, want tasks %v", w.recent, tc.keep)
			}
			for _, i := range tc.keep {
				if _, ok := w.recent[ref(i)]; !ok {
					t.Fatalf("task %d dropped; recent %v, want tasks %v", i, w.recent, tc.keep)
				}
			}
		})
	}
}
