package testcluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/testcluster"
)

// TestClusterEval_NATSServerRestartLosesNoWork: a NATS server is killed
// and restarted mid-job; every client reconnects to the others, the job
// completes with every task accounted for and none executed twice.
func TestClusterEval_NATSServerRestartNoDuplicateWork(t *testing.T) {
	c := testcluster.StartEval(t, testcluster.EvalOptions{Agent: &testcluster.ScriptedAgent{TurnDelay: 40 * time.Millisecond},
		Timing: steadyRaft()})
	cl := c.Client()
	opts := evalengine.DefaultOptions()
	opts.Samples = 2
	id := submit(t, cl, testcluster.EvalSet("nats-restart", 30), opts, "")
	waitDone(t, cl, id, 8, progressBudget)
	c.NATS.Kill(0)
	c.NATS.Restart(0)
	c.WaitJob(cl, scope, id, 30*time.Second, "completed")
	j, err := cl.Status(context.Background(), scope, id)
	if err != nil || j.Progress.Done != 60 {
		t.Fatalf("job %+v err %v", j, err)
	}
	checkAtMostOnce(t, c.Agent)
	res, err := cl.Result(context.Background(), scope, id)
	if err != nil {
		t.Fatal(err)
	}
	checkNoExecutedWorkLost(t, c.Agent, res)
}

// checkNoExecutedWorkLost reports samples that ran but whose job records
// an error. Under at-most-once a task whose delivery a fault delayed is
// failed (worker_lost) rather than re-run; when the delayed message still
// reaches the worker it runs once and its result is fenced out. That is
// wasted work, not a duplicate: logged, not failed (see the report of
// issue 8: purging those messages is left to do).
func checkNoExecutedWorkLost(t *testing.T, a *testcluster.ScriptedAgent, doc []byte) {
	t.Helper()
	var r evalengine.Result
	if err := json.Unmarshal(doc, &r); err != nil {
		t.Fatal(err)
	}
	ran := a.Executions()
	failed, wasted := 0, 0
	for _, c := range r.Cases {
		for _, s := range c.Samples {
			if s.Error == "" {
				continue
			}
			failed++
			if ran[s.SampleID] > 0 {
				wasted++
			}
		}
	}
	if failed > 0 {
		t.Logf("%d samples failed across the fault, %d of them ran and their result was fenced out", failed, wasted)
	}
}

// TestClusterEval_LeaderPartitionedFromNATSStepsDown: the leader loses
// its NATS connection (Raft still works, so it would stay leader); it
// steps down, another coordinator takes over, and the job completes with
// every task executed at most once.
func TestClusterEval_LeaderPartitionedFromNATSStepsDown(t *testing.T) {
	// steadyRaft and the production fence lease (5 s), not the tests'
	// 300 ms Raft timeouts and 1.5 s lease: the hand-off is a Raft
	// leadership transfer, which does not wait for an election timeout,
	// but under -race at load 10-17 the short timeouts made leaders churn
	// before the partition (workers fenced 3-19 times a run) and a gap
	// over 1.5 s failed the job evaluation_service_restarted (1 of 20
	// runs), a full restart by design and not what this test is about.
	c := testcluster.StartEval(t, testcluster.EvalOptions{Agent: &testcluster.ScriptedAgent{TurnDelay: 40 * time.Millisecond},
		Timing: timing(func(t *coordinator.Timing) {
			t.RaftHeartbeat, t.RaftLeaderLease, t.FenceLease = time.Second, 500*time.Millisecond, 5*time.Second
		})})
	cl := c.Client()
	opts := evalengine.DefaultOptions()
	opts.Samples = 2
	id := submit(t, cl, testcluster.EvalSet("partition", 30), opts, "")
	waitDone(t, cl, id, 8, progressBudget)
	old := -1
	testutil.WaitFor(t, 10*time.Second, "a leader", func() bool { old = c.LeaderIndex(); return old >= 0 })
	c.CoordConn(old).Close()
	testutil.WaitFor(t, 15*time.Second, "another leader", func() bool { i := c.LeaderIndex(); return i >= 0 && i != old })
	c.WaitJob(cl, scope, id, 30*time.Second, "completed")
	j, err := cl.Status(context.Background(), scope, id)
	if err != nil || j.Progress.Done != 60 {
		t.Fatalf("job %+v err %v", j, err)
	}
	checkAtMostOnce(t, c.Agent)
	if n := len(c.Agent.Executions()); n > 60 {
		t.Fatalf("%d distinct samples executed", n)
	}
}

// TestClusterEval_LeaderElectedWithoutNATSHandsOn: a coordinator that
// wins an election while it has no NATS connection cannot set up the task
// streams, yet Raft keeps it leader. It must hand leadership on, as a
// serving leader without NATS does, until a peer that reaches NATS serves.
// (Seen under load in LeaderPartitionedFromNATSStepsDown: the partition
// came while the leader was setting up, and no other leader came.)
func TestClusterEval_LeaderElectedWithoutNATSHandsOn(t *testing.T) {
	c := testcluster.StartEval(t, testcluster.EvalOptions{Workers: []string{"w0"}, Timing: steadyRaft()})
	l := -1
	testutil.WaitFor(t, 10*time.Second, "a leader", func() bool { l = c.LeaderIndex(); return l >= 0 })
	// Both followers lose NATS; the leader stops, so one of them wins the
	// next election without NATS.
	for i := range 3 {
		if i != l {
			c.CoordConn(i).Close()
		}
	}
	c.StopCoordinator(l)
	testutil.WaitFor(t, 15*time.Second, "a leader without NATS", func() bool { i := c.LeaderIndex(); return i >= 0 && i != l })
	c.StartCoordinator(l, false)
	testutil.WaitFor(t, 30*time.Second, "the coordinator with NATS to serve", func() bool {
		n := c.Coordinator(l)
		return n != nil && n.Serving()
	})
}
