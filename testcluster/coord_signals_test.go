package testcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/testcluster"
)

// Workers under their restricted per-worker NATS users trace every task
// into ADK_SIGNALS under the job's scope, and the job completes.
func TestClusterEvalSignals_WorkersUnderTheirOwnUsersPublishTraces(t *testing.T) {
	// Production timing: what is under test is the signal path, and the
	// test harness's shrunk fence (1.5 s) starves under -race on two
	// loaded cores once three NATS servers also replicate ADK_SIGNALS.
	c := testcluster.StartEval(t, testcluster.EvalOptions{Signals: true, Capacity: 16,
		Timing: coordinator.Timing{RaftHeartbeat: time.Second, RaftLeaderLease: 500 * time.Millisecond,
			Tick: 20 * time.Millisecond, LeaseInterval: time.Second, FenceLease: 5 * time.Second,
			WorkerTTL: 5 * time.Second, DispatchGrace: 10 * time.Second, TaskAckWait: 10 * time.Second,
			ResultAckWait: 5 * time.Second},
		HeartbeatInterval: time.Second})
	cl := c.Client()
	opts := evalengine.DefaultOptions()
	opts.CaptureEvents = false
	opts.Samples = 2
	id := submit(t, cl, testcluster.EvalSet("signals", 50), opts, "")
	c.WaitJob(cl, scope, id, 60*time.Second, "completed")
	nc := c.NATS.ConnectAll(t, bus.WithUserPassword(testcluster.CoordUser, testcluster.CoordPassword))
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, bus.SignalStreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(bus.SignalSubjectPrefix+scope))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		t.Fatalf("no signal batch under %s", scope)
	}
}
