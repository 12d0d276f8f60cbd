package testcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/testcluster"
)

// TestClusterEval_StatusTakenByADeadCoordinatorIsAskedAgain: the
// coordinators answer the service as one NATS queue group, so a status
// call (held until the job ends, as `adk eval run --cluster` polls) can be
// taken by a coordinator that is then killed -9 before it answers. The
// call must still be answered, by a live coordinator, within the call's
// timeout: before, it waited the whole timeout and failed ("adk: timeout"
// 30 s after a leader's kill, the stall TestClusterEval_RateLimitLeader-
// KilledThroughBinaries found; the job itself had completed). The dead
// coordinator is a member of the queue group on its own connection that
// takes the calls and never answers; its connection closes as a killed
// process's does.
func TestClusterEval_StatusTakenByADeadCoordinatorIsAskedAgain(t *testing.T) {
	gate := make(chan struct{})
	c := testcluster.StartEval(t, testcluster.EvalOptions{NATSNodes: 1, Coordinators: 1, Workers: []string{"w0"},
		Agent: &testcluster.ScriptedAgent{Gate: gate}})
	defer close(gate)
	cl := c.Client() // a call times out after 10 s
	id := submit(t, cl, testcluster.EvalSet("dead-coord", 1), evalengine.DefaultOptions(), "")

	dead := c.ConnectCoord()
	taken := make(chan *nats.Msg, 16)
	subj, err := bus.CoordSubject(api.OpStatus)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.ChanQueueSubscribe(subj, coordinator.ServiceName, taken); err != nil {
		t.Fatal(err)
	}
	if err := dead.Flush(); err != nil {
		t.Fatal(err)
	}
	// Calls one at a time (the job is held running, so each is held 300
	// ms) until the dead member takes one: each has an even chance.
	for attempt := 0; ; attempt++ {
		if attempt == 60 {
			t.Fatal("the dead coordinator took no status call in 60")
		}
		done := make(chan error, 1)
		go func() {
			_, err := cl.StatusWait(context.Background(), scope, id, 300*time.Millisecond)
			done <- err
		}()
		select {
		case err := <-done: // answered by the live coordinator
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			continue
		case <-taken:
		}
		dead.Close() // killed before it answered
		if err := <-done; err != nil {
			t.Fatalf("a status call taken by a coordinator that died: %v, want an answer from a live one", err)
		}
		return
	}
}
