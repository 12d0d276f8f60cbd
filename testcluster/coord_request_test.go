package testcluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/testcluster"
)

// takenByADyingCoordinator makes calls, one at a time, until a member
// of the coordinators' queue group that the test holds takes one (NATS
// picks a subscription of the group at random, and it holds
// dyingSubscriptions of them, so most calls): call(n) makes the n-th,
// and dying, handed the taken message, plays a coordinator that applies
// it and dies before it answers. It returns how long after the take the
// taken call returned, and its error.
func takenByADyingCoordinator(t *testing.T, c *testcluster.EvalCluster, op string, call func(n int) error, dying func(msg *nats.Msg)) (time.Duration, error) {
	t.Helper()
	dead := c.ConnectCoord()
	taken := make(chan *nats.Msg, 16)
	subj, err := bus.CoordSubject(op)
	if err != nil {
		t.Fatal(err)
	}
	var subs []*nats.Subscription
	for range dyingSubscriptions {
		sub, err := dead.ChanQueueSubscribe(subj, coordinator.ServiceName, taken)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	if err := dead.Flush(); err != nil {
		t.Fatal(err)
	}
	for n := 0; ; n++ {
		if n == 60 {
			t.Fatalf("the dying coordinator took no %s call in 60", op)
		}
		done := make(chan error, 1)
		go func() { done <- call(n) }()
		var msg *nats.Msg
		select {
		case err := <-done: // answered by a live coordinator
			if err != nil {
				t.Fatalf("%s %d: %v", op, n, err)
			}
			continue
		case msg = <-taken:
		}
		start := time.Now()
		// Out of the group first, so what it sends on reaches a live one.
		for _, sub := range subs {
			if err := sub.Unsubscribe(); err != nil {
				t.Fatal(err)
			}
		}
		// The server must have the UNSUBs before dying sends the call on:
		// a queue subscription it still routes to would take the resend
		// too, and nobody answers it.
		if err := dead.Flush(); err != nil {
			t.Fatal(err)
		}
		dying(msg)
		dead.Close() // dies before it answers
		err := <-done
		return time.Since(start), err
	}
}

// dyingSubscriptions is how many subscriptions of the coordinators'
// queue group the dying coordinator holds.
const dyingSubscriptions = 8

// applyAndLose sends a taken request on to a live coordinator and drops
// the answer: the request is applied, and its caller never hears.
func applyAndLose(t *testing.T, c *testcluster.EvalCluster, op string, msg *nats.Msg) *api.Reply {
	t.Helper()
	subj, _ := bus.CoordSubject(op)
	nc := c.ConnectCoord()
	defer nc.Close()
	r, err := nc.Request(subj, msg.Data, 10*time.Second)
	if err != nil {
		t.Fatalf("apply the taken %s: %v", op, err)
	}
	var rep api.Reply
	if err := wire.Decode(r.Data, api.ReplyLimits, api.KindReply, &rep); err != nil || rep.Err != nil {
		t.Fatalf("apply the taken %s: %v %v", op, err, rep.Err)
	}
	return &rep
}

func jobsIn(t *testing.T, cl *client.Client, scope string) []evalrecord.Job {
	t.Helper()
	p, err := cl.ListJobs(context.Background(), scope, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	return p.Items
}

// TestClusterEval_SubmitTakenByADyingCoordinatorIsAnsweredOnce: a submit
// taken by a coordinator that applies it (the job is created through
// Raft) and then dies before answering, and a leader killed right after:
// the client sends it again with its request id, a live coordinator
// answers within seconds (before, the call waited its whole timeout and
// failed: "adk: timeout" 30 s into `adk eval run --cluster`), and the
// answer is the job the first attempt created: exactly one job exists.
// Three coordinators, so the retry may go through a follower that
// forwards it to the new leader.
func TestClusterEval_SubmitTakenByADyingCoordinatorIsAnsweredOnce(t *testing.T) {
	gate := make(chan struct{})
	// The production fence lease: a leader gap over the tests' 1.5 s is a
	// full restart by design, which is not what this test is about.
	c := testcluster.StartEval(t, testcluster.EvalOptions{NATSNodes: 1, Workers: []string{"w0"},
		Agent:  &testcluster.ScriptedAgent{Gate: gate},
		Timing: timing(func(t *coordinator.Timing) { t.FenceLease = 5 * time.Second })})
	defer close(gate)
	cl := c.Client() // a call times out after 10 s
	set := testcluster.EvalSet("dying-submit", 1)
	opts := mustJSON(t, evalengine.DefaultOptions())
	var (
		got     *evalrecord.Job
		applied *api.Reply
		last    string
	)
	took, err := takenByADyingCoordinator(t, c, api.OpSubmit, func(n int) error {
		// A scope per call: the count below is of the taken call's jobs.
		last = fmt.Sprintf("app-dying-%d", n)
		j, err := cl.Submit(context.Background(), last, api.SubmitRequest{Set: set, Agent: "scripted", Options: opts})
		got = j
		return err
	}, func(msg *nats.Msg) {
		applied = applyAndLose(t, c, api.OpSubmit, msg)
		// And the leader goes too (an index, polled: an election may be
		// under way, and LeaderIndex is then -1).
		leader := -1
		testutil.WaitFor(t, 10*time.Second, "a leader", func() bool { leader = c.LeaderIndex(); return leader >= 0 })
		c.StopCoordinator(leader)
	})
	if err != nil {
		t.Fatalf("a submit taken by a coordinator that died: %v, want the job from a live one", err)
	}
	// Within the call's 10 s timeout (the error above otherwise): its
	// retry after client.FirstRetry, a new leader's election, the apply.
	t.Logf("answered %v after the take", took)
	if got.JobID != applied.Job.JobID {
		t.Fatalf("the retry answered job %s, the taken submit created %s", got.JobID, applied.Job.JobID)
	}
	if jobs := jobsIn(t, cl, last); len(jobs) != 1 {
		t.Fatalf("%d jobs in %s, want 1", len(jobs), last)
	}
}

// TestClusterEval_SubmitRequestIDs: a submit sent twice with its request
// id makes one job and answers it twice, also when its set came as an
// upload (the second finds the upload taken: the log answers); the same
// id with other content is eval_request_id_conflict; an invalid id is
// refused, naming the field.
func TestClusterEval_SubmitRequestIDs(t *testing.T) {
	c := testcluster.StartEval(t, testcluster.EvalOptions{NATSNodes: 1, Coordinators: 3, Workers: []string{"w0"}})
	cl := c.Client()
	ctx := context.Background()
	opts := mustJSON(t, evalengine.DefaultOptions())
	const id = "0123456789abcdef0123456789abcdef"
	req := api.SubmitRequest{Set: testcluster.EvalSet("request-ids", 2), Agent: "scripted", Options: opts, RequestID: id}

	first, err := cl.Submit(ctx, scope, req)
	if err != nil {
		t.Fatal(err)
	}
	// Each call may reach any coordinator: several tries.
	for i := range 4 {
		again, err := cl.Submit(ctx, scope, req)
		if err != nil || again.JobID != first.JobID {
			t.Fatalf("try %d of the same submit: %v, %v; want job %s", i, again, err, first.JobID)
		}
	}
	other := req
	other.Metadata = []byte(`{"run":"other"}`)
	_, err = cl.Submit(ctx, scope, other)
	if e := api.AsError(err); e.Code != evalrecord.CodeRequestIDConflict || !containsAll(e.Detail, "submit.request_id", first.JobID) {
		t.Fatalf("the id with other content: %v, want %s naming submit.request_id and job %s", err, evalrecord.CodeRequestIDConflict, first.JobID)
	}
	bad := req
	bad.RequestID = "short"
	_, err = cl.Submit(ctx, scope, bad)
	if e := api.AsError(err); e.Code != api.CodeInvalidRequest || !containsAll(e.Detail, "submit.request_id") {
		t.Fatalf("an invalid id: %v, want %s naming submit.request_id", err, api.CodeInvalidRequest)
	}
	if jobs := jobsIn(t, cl, scope); len(jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(jobs))
	}

	t.Run("set upload", func(t *testing.T) {
		up, err := cl.UploadSet(ctx, "app-upload", testcluster.EvalSet("uploaded", 2), nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		req := api.SubmitRequest{SetUpload: up, Agent: "scripted", Options: opts, RequestID: "upload-request-0001"}
		first, err := cl.Submit(ctx, "app-upload", req)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			again, err := cl.Submit(ctx, "app-upload", req)
			if err != nil || again.JobID != first.JobID {
				t.Fatalf("try %d of the same upload's submit: %v, %v; want job %s", i, again, err, first.JobID)
			}
		}
		if jobs := jobsIn(t, cl, "app-upload"); len(jobs) != 1 {
			t.Fatalf("%d jobs, want 1", len(jobs))
		}
	})
}

// TestClusterEval_CancelTakenByADyingCoordinatorAnswersTheJob: a cancel
// taken by a coordinator that applies it and dies before answering is
// sent again; the job is cancelled by then (already_terminal), which the
// client takes for its own cancel's success.
func TestClusterEval_CancelTakenByADyingCoordinatorAnswersTheJob(t *testing.T) {
	gate := make(chan struct{})
	c := testcluster.StartEval(t, testcluster.EvalOptions{NATSNodes: 1, Coordinators: 1, Workers: []string{"w0"},
		Agent: &testcluster.ScriptedAgent{Gate: gate}})
	defer close(gate)
	cl := c.Client()
	var got *evalrecord.Job
	var last string
	opts := mustJSON(t, evalengine.DefaultOptions())
	took, err := takenByADyingCoordinator(t, c, api.OpCancel, func(int) error {
		j, err := cl.Submit(context.Background(), scope, api.SubmitRequest{Set: testcluster.EvalSet("dying-cancel", 1), Agent: "scripted", Options: opts})
		if err != nil {
			return err
		}
		last = j.JobID
		j, err = cl.Cancel(context.Background(), scope, last)
		got = j
		return err
	}, func(msg *nats.Msg) { applyAndLose(t, c, api.OpCancel, msg) })
	if err != nil {
		t.Fatalf("a cancel taken by a coordinator that died: %v, want the cancelled job", err)
	}
	t.Logf("answered %v after the take", took)
	if got == nil || got.JobID != last || got.Phase != evalrecord.PhaseCancelled || got.Reason != evalrecord.ReasonUserCancelled {
		t.Fatalf("answered %+v, want job %s cancelled by the user", got, last)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestClusterEval_NoCoordinatorIsUnavailable: with no coordinator
// subscribed, a call that may be repeated (a read, a submit with its
// request id) answers eval_service_unavailable from the server's no
// responders status at once, not timeout at the end of the call.
func TestClusterEval_NoCoordinatorIsUnavailable(t *testing.T) {
	n := testcluster.StartNATS(t, 1)
	cl := client.New(n.Connect(t, 0), 5*time.Second)
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"capabilities": func() error { _, err := cl.Capabilities(ctx); return err },
		"submit": func() error {
			_, err := cl.Submit(ctx, scope, api.SubmitRequest{Set: testcluster.EvalSet("nobody", 1), Agent: "scripted"})
			return err
		},
	} {
		if err := call(); api.AsError(err).Code != api.CodeServiceUnavailable {
			t.Errorf("%s: %v, want %s", name, err, api.CodeServiceUnavailable)
		}
	}
}
