package testcluster_test

// Kill notices (coordinator/DESIGN.md "Kill notices"): whatever ends a
// running job (a user's cancel, owner lost, timed out, failed), the
// leader tells the workers holding its tasks at once, so they stop within
// a round trip instead of at their next heartbeat answer, and a task of
// the job still in JetStream is refused when it comes.

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/testcluster"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterLogs is a logger for a test cluster's coordinators and workers
// whose lines the test prints if it fails.
func clusterLogs(t *testing.T) *slog.Logger {
	var logs testutil.Buffer
	// Registered before the cluster's own clean-ups, so it runs after
	// them: the logs of the stop are in too.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", logs.String())
		}
	})
	return slog.New(slog.NewTextHandler(&logs, nil))
}

// noAnswerCluster starts a test cluster with one NATS node and one worker, w0,
// of capacity 1 (so 3 tasks held: 1 running, 2 prefetched), whose turns
// wait for gate; the worker heartbeats once a minute (the tasks that wait
// for an answer ask for one sooner), and worker lease, fence and dispatch
// grace are a minute: once its heartbeats are suspended nothing but a
// kill notice can stop its tasks. The Raft timeouts are production's
// (steadyRaft): the test is not about elections, and a leader change
// under load stalled its dispatch past the test's waits (1 run in 30 at
// load 10). A failing test prints the cluster's logs and state.
func noAnswerCluster(t *testing.T, gate chan struct{}) *testcluster.EvalCluster {
	tm := steadyRaft()
	tm.WorkerTTL, tm.FenceLease, tm.DispatchGrace = time.Minute, time.Minute, time.Minute
	c := testcluster.StartEval(t, testcluster.EvalOptions{NATSNodes: 1, Workers: []string{"w0"}, Capacity: 1,
		Agent: &testcluster.ScriptedAgent{Gate: gate}, Timing: tm,
		HeartbeatInterval: time.Minute, FenceAfter: time.Minute, Logger: clusterLogs(t)})
	t.Cleanup(func() { // before the cluster stops
		if w := c.Worker(0); t.Failed() && w != nil {
			n, last := c.Agent.Calls()
			t.Logf("w0: held %d, dropped %d, waiting for an owner %d, fenced %v, last answered heartbeat sent %v; model calls %d, the last at %v; leader c%d",
				w.Running(), w.Dropped(), w.OwnerWaits(), w.Fenced(), w.LastAnswer().Format(time.StampMilli), n, last.Format(time.StampMilli), c.LeaderIndex())
		}
	})
	return c
}

// TestClusterEval_UserCancelStopsRunningTaskWithoutHeartbeat: a user's
// cancel stops the sample running on a worker, and the tasks it holds,
// through the leader's kill notice. The worker's heartbeats are
// suspended before the cancel (and it sends one a minute), and the test
// checks that no heartbeat answer was applied from then on, so only the
// notice can explain the kill. Before, only an ending the leader's tick
// decided (owner lost, timed out, failed) sent notices: a user's cancel
// stopped the tasks at the worker's next heartbeat answer (up to 1 s in
// production; never, here).
func TestClusterEval_UserCancelStopsRunningTaskWithoutHeartbeat(t *testing.T) {
	c := noAnswerCluster(t, make(chan struct{}))
	cl := c.Client()
	opts := evalengine.DefaultOptions()
	opts.CaseTimeoutMS = 60_000
	id := submit(t, cl, testcluster.EvalSet("cancel-running", 20), opts, "")
	w := c.Worker(0)
	testutil.WaitFor(t, 20*time.Second, "w0 holds 3 tasks, 1 running", func() bool {
		n, _ := c.Agent.Calls()
		return n == 1 && w.Running() == 3
	})
	w.SuspendHeartbeats(true)
	answered := w.LastAnswer()
	cancelled := time.Now()
	j, err := cl.Cancel(context.Background(), scope, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Phase != evalrecord.PhaseCancelled || j.Reason != evalrecord.ReasonUserCancelled {
		t.Fatalf("cancel answered %s (%q)", j.Phase, j.Reason)
	}
	testutil.WaitFor(t, 10*time.Second, "w0's tasks killed", func() bool { return w.Running() == 0 })
	t.Logf("w0 held nothing %v after the cancel was sent", time.Since(cancelled).Round(time.Millisecond))
	if got := w.LastAnswer(); !got.Equal(answered) {
		t.Fatalf("a heartbeat answer was applied after the cancel (sent %v, the last before %v): it, not the notice, may have killed the tasks", got, answered)
	}
	if n, _ := c.Agent.Calls(); n != 1 {
		t.Fatalf("%d model calls, want the 1 running when the job was cancelled", n)
	}
	checkAtMostOnce(t, c.Agent)
}

// TestClusterEval_UserCancelTaskDeliveredLateNeverStarts: a task the
// leader published just before a user's cancel, still in JetStream when
// the kill notice comes, is refused when it arrives, not started. Before,
// a user's cancel sent no notice, and the task started on arrival and ran
// until the worker's next heartbeat answer.
func TestClusterEval_UserCancelTaskDeliveredLateNeverStarts(t *testing.T) {
	lateTaskNeverStarts(t, "cancel-late", false)
}

// lateTaskNeverStarts runs a 20-case job on noAnswerCluster's w0 until it
// holds 3 tasks and a 4th published to it waits in JetStream (w0's
// consumer paused), suspends w0's heartbeats, ends the job (owned: its
// owner's lease stops, owner_lost; else a user's cancel), and checks that
// the kill notice killed the held tasks and that the 4th, delivered once
// the consumer resumes, is refused unrun.
func lateTaskNeverStarts(t *testing.T, name string, owned bool) {
	gate := make(chan struct{})
	c := noAnswerCluster(t, gate)
	cl := c.Client()
	req := api.SubmitRequest{Set: testcluster.EvalSet(name, 20), Agent: "scripted"}
	var lease interface{ Stop() }
	if owned {
		l, err := cl.KeepOwner("cli-"+name, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		// A 6 s lease: the owner window (7.5 s) is still open 1.5 s after
		// the cancel (6 s), longer than the late task takes to arrive (up
		// to a fetch's 1 s wait after the resume), so only the kill notice
		// can stop it.
		lease, req.Owner, req.OwnerTTLMS = l, "cli-"+name, 6000
	}
	opts := evalengine.DefaultOptions()
	opts.CaseTimeoutMS = 60_000
	req.Options = mustJSON(t, opts)
	j, err := cl.Submit(context.Background(), scope, req)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Worker(0)
	testutil.WaitFor(t, 20*time.Second, "w0 holds 3 tasks, 1 running", func() bool {
		n, _ := c.Agent.Calls()
		return n == 1 && w.Running() == 3
	})
	js, err := jetstream.New(c.ConnectCoord())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	consumer := bus.WorkerConsumer("w0")
	if _, err := js.PauseConsumer(ctx, bus.TasksStream, consumer, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// One sample ends: the leader dispatches the next task to w0, which
	// stays in the stream.
	gate <- struct{}{}
	var pending uint64
	var dispatched int
	defer func() {
		if t.Failed() {
			t.Logf("w0's consumer: %d pending; job: %d tasks dispatched", pending, dispatched)
		}
	}()
	testutil.WaitFor(t, 20*time.Second, "a 4th task published to w0, undelivered", func() bool {
		cons, err := js.Consumer(ctx, bus.TasksStream, consumer)
		if err != nil {
			return false
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			return false
		}
		n, _ := c.Agent.Calls()
		pending, dispatched = ci.NumPending, progress(t, c, j.JobID).Dispatched
		return pending == 1 && n == 2 && dispatched == 4
	})
	w.SuspendHeartbeats(true)
	reason := evalrecord.ReasonUserCancelled
	if owned {
		reason = evalrecord.ReasonOwnerLost
		lease.Stop()
	} else if _, err := cl.Cancel(ctx, scope, j.JobID); err != nil {
		t.Fatal(err)
	}
	c.WaitJob(cl, scope, j.JobID, 20*time.Second, "cancelled")
	if got, _ := cl.Status(ctx, scope, j.JobID); got == nil || got.Reason != reason {
		t.Fatalf("job cancelled %+v, want reason %q", got, reason)
	}
	// No heartbeat answers: only the kill notice can have stopped them.
	testutil.WaitFor(t, 10*time.Second, "w0's held tasks killed", func() bool { return w.Running() == 0 })
	calls, _ := c.Agent.Calls()
	if _, err := js.ResumeConsumer(ctx, bus.TasksStream, consumer); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the late task refused, started or waiting for its owner", func() bool {
		n, _ := c.Agent.Calls()
		return w.Dropped() > 0 || n > calls || w.OwnerWaits() > 0
	})
	if n, _ := c.Agent.Calls(); n > calls {
		t.Fatalf("%d model calls started by a task delivered after its job's kill notice", n-calls)
	}
	if w.Dropped() != 1 {
		t.Fatalf("late task not refused on delivery: dropped %d, held %d, waiting for its owner %d", w.Dropped(), w.Running(), w.OwnerWaits())
	}
	checkAtMostOnce(t, c.Agent)
}
