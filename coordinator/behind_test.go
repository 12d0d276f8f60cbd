package coordinator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
)

// pair is two coordinators on one NATS server, each on its own
// connection: lead bootstrapped the cluster and leads, follow joined it.
type pair struct {
	srv          *bustest.Server
	lead, follow *Node
}

const behindScope = "team-a"

// startPair starts a pair whose nodes answer coordinator_behind after
// readWait (Timing.ReadWait), and waits until the leader serves and the
// follower applied everything the leader did.
func startPair(t *testing.T, readWait time.Duration) *pair {
	t.Helper()
	p := &pair{srv: bustest.Start(t, bus.ServerConfig{})}
	timing := Timing{RaftHeartbeat: 300 * time.Millisecond, RaftLeaderLease: 150 * time.Millisecond, Tick: 20 * time.Millisecond,
		LeaseInterval: 200 * time.Millisecond, FenceLease: 5 * time.Second, WorkerTTL: time.Minute,
		DispatchGrace: 2 * time.Second, TaskAckWait: 2 * time.Second, ResultAckWait: 2 * time.Second, ReadWait: readWait}
	start := func(id string, bootstrap bool) *Node {
		nc := p.connect(t)
		n, err := Start(Config{ID: id, DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: bootstrap, NATS: nc,
			Workers: []string{"w0"}, Streams: bus.TaskStreamConfig{Replicas: 1}, MemTableSize: 16 << 20, Timing: timing})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		return n
	}
	p.lead = start("c0", true)
	testutil.WaitFor(t, 20*time.Second, "c0 leads and serves", p.lead.Serving)
	p.follow = start("c1", false)
	if err := p.lead.Join("c1", p.follow.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "c1 caught up", func() bool {
		return p.lead.Serving() && p.follow.AppliedIndex() >= p.lead.AppliedIndex()
	})
	return p
}

func (p *pair) connect(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := p.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// holdFollower stops the follower's FSM from applying (Raft goes on
// storing and acknowledging entries: the leader commits without it)
// until the returned release, which the test's clean-up also calls.
func (p *pair) holdFollower(t *testing.T) (release func()) {
	p.follow.fsm.applying.Lock()
	var once sync.Once
	release = func() { once.Do(p.follow.fsm.applying.Unlock) }
	t.Cleanup(release)
	return release
}

// submit creates a job through the client (the client then holds the
// submit's index) and returns it.
func submit(t *testing.T, cl *client.Client) *evalrecord.Job {
	t.Helper()
	set := []byte(`{"schema_version":2,"id":"behind","version":"1","cases":[{"id":"c0","turns":[{"id":"t","input":"q","expected_response":"a"}]}]}`)
	j, err := cl.Submit(context.Background(), behindScope, api.SubmitRequest{Set: set, Agent: "scripted"})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// rawCall sends one request over NATS, without the client's retries.
func rawCall(t *testing.T, nc *nats.Conn, op string, req *api.Request) *api.Reply {
	t.Helper()
	subj, err := bus.CoordSubject(op)
	if err != nil {
		t.Fatal(err)
	}
	b, err := wire.Encode(api.KindRequest, req)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request(subj, b, 20*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	var rep api.Reply
	if err := wire.Decode(msg.Data, api.ReplyLimits, api.KindReply, &rep); err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return &rep
}

// TestCluster_ReadBeyondAppliedAnswersCoordinatorBehind: a request whose
// MinIndex no coordinator has applied within its bound (here far past the
// log) is answered coordinator_behind naming the index wanted and the
// index applied, on every path that waits for it (reads, cancel's read,
// a submit with a request id or a set upload), never the state as it is;
// nothing is proposed (the job is not cancelled, no job is created); and
// the client, after asking again until its timeout, gives up with that
// typed error. Before, each answered what the node had after 2 s.
func TestCluster_ReadBeyondAppliedAnswersCoordinatorBehind(t *testing.T) {
	p := startPair(t, 200*time.Millisecond)
	nc := p.connect(t)
	j := submit(t, client.New(nc, 10*time.Second))
	far := p.lead.AppliedIndex() + 1_000_000
	sub := func(s api.SubmitRequest) *api.SubmitRequest {
		s.Agent, s.RequestID = "scripted", "0123456789abcdef0123456789abcdef"
		return &s
	}
	for _, c := range []struct {
		op  string
		req api.Request
	}{
		{api.OpStatus, api.Request{JobID: j.JobID}},
		{api.OpStatus, api.Request{JobID: j.JobID, WaitMS: 100}},
		{api.OpResult, api.Request{JobID: j.JobID}},
		{api.OpResultCases, api.Request{JobID: j.JobID, Limit: 1}},
		{api.OpListJobs, api.Request{}},
		{api.OpCancel, api.Request{JobID: j.JobID}},
		{api.OpSubmit, api.Request{Submit: sub(api.SubmitRequest{Set: []byte(`{}`)})}},
		{api.OpSubmit, api.Request{Submit: sub(api.SubmitRequest{SetUpload: "00112233445566778899aabbccddeeff"})}},
	} {
		t.Run(c.op, func(t *testing.T) {
			req := c.req
			req.Scope, req.MinIndex = behindScope, far
			rep := rawCall(t, nc, c.op, &req)
			if rep.Err == nil || rep.Err.Code != api.CodeCoordinatorBehind || !rep.Err.Retryable() ||
				!strings.Contains(rep.Err.Detail, fmt.Sprintf("wants %d", far)) || !strings.Contains(rep.Err.Detail, "has applied raft index") {
				t.Fatalf("answered %v (a job: %t), want %s naming index %d", rep.Err, rep.Job != nil, api.CodeCoordinatorBehind, far)
			}
		})
	}
	rep := rawCall(t, nc, api.OpListJobs, &api.Request{Scope: behindScope})
	if rep.Err != nil || rep.Jobs == nil || len(rep.Jobs.Items) != 1 || rep.Jobs.Items[0].Reason == evalrecord.ReasonUserCancelled {
		t.Fatalf("after the answers coordinator_behind: %v, want the one job, not cancelled", rep.Err)
	}

	cl := client.New(nc, 1500*time.Millisecond)
	start := time.Now()
	_, err := cl.Call(context.Background(), api.OpStatus, &api.Request{Scope: behindScope, JobID: j.JobID, MinIndex: far})
	if e := api.AsError(err); err == nil || e.Code != api.CodeCoordinatorBehind {
		t.Fatalf("the client answered %v, want %s", err, api.CodeCoordinatorBehind)
	}
	// It asked again: more than one node's bound went by.
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Fatalf("the client gave up after %s, before its timeout", d)
	}
}

// TestCluster_ReadWaitsUntilItsIndexIsApplied: a read reaching a follower
// that has not applied the client's last write waits for it, past the 2 s
// a read used to wait, and answers the write as soon as the follower
// applies it.
func TestCluster_ReadWaitsUntilItsIndexIsApplied(t *testing.T) {
	p := startPair(t, 30*time.Second)
	// Only the follower serves the API (the leader still applies what
	// the follower forwards).
	if err := p.lead.svc.svc.Stop(); err != nil {
		t.Fatal(err)
	}
	release := p.holdFollower(t)
	cl := client.New(p.connect(t), 30*time.Second)
	j := submit(t, cl)
	if p.follow.AppliedIndex() >= p.lead.AppliedIndex() {
		t.Fatalf("the follower applied %d while held, the leader %d", p.follow.AppliedIndex(), p.lead.AppliedIndex())
	}
	waiting := count("coordinator.(*service).awaitApplied(")
	type answer struct {
		j   *evalrecord.Job
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		got, err := cl.Status(context.Background(), behindScope, j.JobID)
		answered <- answer{got, err}
	}()
	testutil.WaitFor(t, 10*time.Second, "the read waiting on the follower", func() bool {
		return count("coordinator.(*service).awaitApplied(") > waiting
	})
	select {
	case a := <-answered:
		t.Fatalf("answered (a job: %t) %v before the follower applied the submit", a.j != nil, a.err)
	case <-time.After(3 * time.Second):
	}
	release()
	select {
	case a := <-answered:
		if a.err != nil || a.j == nil || a.j.JobID != j.JobID {
			t.Fatalf("answered (a job: %t) %v, want job %s", a.j != nil, a.err, j.JobID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no answer after the follower applied the submit")
	}
}

// TestCluster_ClientRetryReachesACaughtUpNode: while a follower applies
// nothing, every read through the client still answers the client's own
// write: the follower answers coordinator_behind within its bound and the
// client asks again until the leader takes it. Before, the follower
// answered not_found after 2 s.
func TestCluster_ClientRetryReachesACaughtUpNode(t *testing.T) {
	p := startPair(t, 200*time.Millisecond)
	p.holdFollower(t)
	cl := client.New(p.connect(t), 30*time.Second)
	j := submit(t, cl)
	taken := func() int {
		for _, e := range p.follow.svc.svc.Stats().Endpoints {
			if e.Name == api.OpStatus {
				return e.NumRequests
			}
		}
		return 0
	}
	// NATS hands each request to either node at random: read until the
	// held follower took a few.
	for n := 0; taken() < 3; n++ {
		if n == 60 {
			t.Fatalf("the follower took %d of 60 reads", taken())
		}
		got, err := cl.Status(context.Background(), behindScope, j.JobID)
		if err != nil || got == nil || got.JobID != j.JobID {
			t.Fatalf("read %d: (a job: %t) %v, want job %s", n, got != nil, err, j.JobID)
		}
	}
}
