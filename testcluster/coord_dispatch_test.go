package testcluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/testcluster"
)

// heartbeatAs keeps worker id alive for the leader (capacity cap, nothing
// running) until the returned stop is called: a worker that heartbeats
// but does not fetch.
func heartbeatAs(t *testing.T, nc *nats.Conn, id string, capacity int) (stop func()) {
	subj, err := bus.HeartbeatSubject(id)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for seq := uint64(1); ; seq++ {
			b, _ := wire.Encode(api.KindHeartbeat, &api.Heartbeat{Worker: id, Capacity: capacity, Seq: seq, Epoch: 1, Agents: []string{"scripted"}})
			_, _ = nc.Request(subj, b, 100*time.Millisecond)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// A task that waits in its worker's queue (the worker heartbeats but does
// not fetch: busy, paused, a stalled delivery) is not lost however long it
// waits; a task its worker was handed but never reports is, a grace later.
func TestClusterEval_QueuedTasksWaitHandedUnreportedAreLost(t *testing.T) {
	timing := coordinator.Timing{
		RaftHeartbeat: 300 * time.Millisecond, RaftLeaderLease: 150 * time.Millisecond,
		Tick: 20 * time.Millisecond, LeaseInterval: 200 * time.Millisecond, FenceLease: 1500 * time.Millisecond,
		WorkerTTL: time.Second, DispatchGrace: 400 * time.Millisecond, TaskAckWait: 2 * time.Second,
		ResultAckWait: 2 * time.Second,
	}
	c := testcluster.StartEval(t, testcluster.EvalOptions{Coordinators: 1, Workers: []string{"w0"},
		Capacity: 4, Timing: timing})
	c.StopWorker(0)
	nc := c.ConnectAsWorker(0)
	stop := heartbeatAs(t, nc, "w0", 4)
	cl := c.Client()

	t.Run("queued tasks wait", func(t *testing.T) {
		id := submit(t, cl, testcluster.EvalSet("queued", 4), evalengine.DefaultOptions(), "")
		testutil.WaitFor(t, 10*time.Second, "all dispatched", func() bool { return progress(t, c, id).Dispatched == 4 })
		// Past the grace, the leader keeps looking at the queue and finding
		// the tasks there: scans (every grace/4) spanning three graces, none failed.
		scans := c.Leader().QueueScans()
		testutil.WaitFor(t, 10*time.Second, "queue scanned repeatedly", func() bool {
			return c.Leader().QueueScans() >= scans+12 || progress(t, c, id).Errors > 0
		})
		if p := progress(t, c, id); p.Done != 0 || p.Errors != 0 {
			t.Fatalf("queued tasks failed: %+v", p)
		}
		stop()
		c.StartWorker(0)
		c.WaitJob(cl, scope, id, 15*time.Second, "completed")
		res, err := cl.Result(context.Background(), scope, id)
		if err != nil {
			t.Fatal(err)
		}
		// The tasks were addressed to the heartbeating incarnation; the
		// restarted worker is a new incarnation (epoch), so they end as
		// worker_lost at once and never run there (at most once).
		if errs := sampleErrors(t, res); len(errs) != 1 || errs[evalengine.TagWorkerLost] != 4 {
			t.Fatalf("sample errors after a long queue wait and a new incarnation: %v, want 4 worker_lost", errs)
		}
		checkAtMostOnce(t, c.Agent)
	})

	t.Run("queued past their deadline time out and are deleted", func(t *testing.T) {
		c.StopWorker(0)
		stop = heartbeatAs(t, nc, "w0", 2)
		o := evalengine.DefaultOptions()
		o.CaseTimeoutMS = 100 // task TTL: 3 × 100 ms + the 2 s ack wait
		id := submit(t, cl, testcluster.EvalSet("deadline", 2), o, "")
		c.WaitJob(cl, scope, id, 15*time.Second, "completed")
		res, err := cl.Result(context.Background(), scope, id)
		if err != nil {
			t.Fatal(err)
		}
		if n := sampleErrors(t, res)[evalengine.TagTimeout]; n != 2 {
			t.Fatalf("timeout samples = %d, want 2 (%v)", n, sampleErrors(t, res))
		}
		// Their messages were deleted from w0's queue, which nobody reads.
		js, err := jetstream.New(c.ConnectCoord())
		if err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 5*time.Second, "w0's queue emptied by the leader", func() bool {
			cons, err := js.Consumer(context.Background(), bus.TasksStream, bus.WorkerConsumer("w0"))
			return err == nil && cons.CachedInfo().NumPending == 0
		})
		stop()
	})

	t.Run("handed but unreported tasks are lost", func(t *testing.T) {
		c.StopWorker(0)
		stop = heartbeatAs(t, nc, "w0", 2)
		defer stop()
		id := submit(t, cl, testcluster.EvalSet("handed", 2), evalengine.DefaultOptions(), "")
		testutil.WaitFor(t, 10*time.Second, "all dispatched", func() bool { return progress(t, c, id).Dispatched == 2 })
		// Take the tasks off the queue as w0 would, and never report them.
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		cons, err := js.Consumer(context.Background(), bus.TasksStream, bus.WorkerConsumer("w0"))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		testutil.WaitFor(t, 10*time.Second, "tasks handed over", func() bool {
			b, err := cons.Fetch(2-got, jetstream.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				return false
			}
			for m := range b.Messages() {
				_ = m.Ack()
				ts, err := api.DecodeTasks(m.Data(), "w0")
				if err != nil {
					t.Errorf("task message: %v", err)
				}
				got += len(ts)
			}
			return got == 2
		})
		c.WaitJob(cl, scope, id, 15*time.Second, "completed")
		res, err := cl.Result(context.Background(), scope, id)
		if err != nil {
			t.Fatal(err)
		}
		if n := sampleErrors(t, res)[evalengine.TagWorkerLost]; n != 2 {
			t.Fatalf("worker_lost samples = %d, want 2 (%v)", n, sampleErrors(t, res))
		}
	})
}

// A worker lists a finished task in its heartbeats while the task's
// result is in flight (published, not yet applied), so the leader never
// fails it as lost however long the result takes; once the leader has
// applied it, the answer says so and the worker stops listing it (before,
// every heartbeat listed every task finished in the last 30 s, up to
// api.MaxRecentRefs, and every coordinator decoded them).
func TestClusterEval_HeartbeatsListOnlyResultsInFlight(t *testing.T) {
	const grace = 400 * time.Millisecond
	timing := coordinator.Timing{
		RaftHeartbeat: 300 * time.Millisecond, RaftLeaderLease: 150 * time.Millisecond,
		Tick: 20 * time.Millisecond, LeaseInterval: 200 * time.Millisecond, FenceLease: 1500 * time.Millisecond,
		WorkerTTL: time.Second, DispatchGrace: grace, TaskAckWait: 2 * time.Second,
		ResultAckWait: 2 * time.Second,
	}
	c := testcluster.StartEval(t, testcluster.EvalOptions{Coordinators: 3, Workers: []string{"w0"}, Capacity: 4, Timing: timing})
	cl := c.Client()
	nc := c.ConnectCoord()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	hbs, err := nc.SubscribeSync(bus.HeartbeatSubjectPrefix + "w0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hbs.Unsubscribe() }()
	next := func() api.Heartbeat {
		t.Helper()
		m, err := hbs.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("no heartbeat from w0: %v", err)
		}
		var hb api.Heartbeat
		if err := wire.Decode(m.Data, api.SmallLimits, api.KindHeartbeat, &hb); err != nil {
			t.Fatal(err)
		}
		return hb
	}

	// Results stay in flight: the leader's results consumer is paused
	// (the leader makes it when it starts leading).
	ctx := context.Background()
	testutil.WaitFor(t, 10*time.Second, "results consumer made", func() bool {
		_, err := js.PauseConsumer(ctx, bus.ResultsStream, bus.ResultsConsumer, time.Now().Add(time.Minute))
		return err == nil
	})
	const tasks = 8 // all dispatched at once: 4 slots + 8 prefetched
	id := submit(t, cl, testcluster.EvalSet("in-flight", tasks), evalengine.DefaultOptions(), "")
	w := c.Worker(0)
	testutil.WaitFor(t, 10*time.Second, "every task run and its result published", func() bool {
		return w.Executed() == tasks && w.Running() == 0
	})
	// Heartbeats queued before that still list running tasks.
	first := next()
	for n := 0; len(first.Running) != 0 || len(first.Recent) != tasks; first = next() {
		if n++; n > 100 {
			t.Fatalf("no heartbeat lists the %d finished tasks: %d running, %d recent", tasks, len(first.Running), len(first.Recent))
		}
	}
	// Three dispatch graces of heartbeats: the leader would have failed an
	// unreported task by now; each heartbeat lists all.
	from := time.Now()
	for hb := first; hb.Seq < first.Seq+12 || time.Since(from) < 3*grace; hb = next() {
		if len(hb.Running) != 0 || len(hb.Recent) != tasks {
			t.Fatalf("heartbeat %d: %d running, %d recent; want 0 and %d (results in flight)", hb.Seq, len(hb.Running), len(hb.Recent), tasks)
		}
	}
	if j, err := cl.Status(ctx, scope, id); err != nil || j.Progress.Done != 0 || j.Progress.Errors != 0 {
		t.Fatalf("job while its results are in flight: %+v, %v; want nothing done or failed", j, err)
	}

	if _, err := js.ResumeConsumer(ctx, bus.ResultsStream, bus.ResultsConsumer); err != nil {
		t.Fatal(err)
	}
	c.WaitJob(cl, scope, id, 15*time.Second, "completed")
	res, err := cl.Result(ctx, scope, id)
	if err != nil {
		t.Fatal(err)
	}
	if errs := sampleErrors(t, res); len(errs) != 0 {
		t.Fatalf("sample errors %v, want none (no task lost while its result was in flight)", errs)
	}
	// Applied: within a few answers the heartbeats list none of them
	// (those queued meanwhile are skipped).
	for n, _, _ := hbs.Pending(); n > 0; n, _, _ = hbs.Pending() {
		next()
	}
	hb := next()
	for start := hb.Seq; len(hb.Recent) != 0; hb = next() {
		if hb.Seq > start+10 {
			t.Fatalf("heartbeat %d still lists %d finished tasks a second after their results were applied", hb.Seq, len(hb.Recent))
		}
	}
	checkAtMostOnce(t, c.Agent)
}
