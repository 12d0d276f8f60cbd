package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// TestFSM_ClusterIdentityLastAppliedHolds: the last identity a lease
// carries is the cluster's, on every node that applies the log (leases
// without one change nothing); a snapshot carries it to a node that
// installs it; an FSM standing in for an earlier build skips it. The
// entry still reads as the previous build's lease command (its FSM
// decodes leaseCmd's fields and skips unknown ones), and the snapshot
// holds only keys that build restores as they are. A node that installed
// an earlier build's snapshot (no identity) and then applies a second
// one, drawn by a leader that had installed the same, agrees with a node
// that held the first: before, the first applied stayed and the two
// nodes of one log named two clusters, so each answered the other's
// clients without waiting for their index.
func TestFSM_ClusterIdentityLastAppliedHolds(t *testing.T) {
	f, s := newFSM(t)
	lease := func(idx uint64, cluster string) *raft.Log {
		return entry(t, idx, cmdLease, &leaseCmd{Lease: evalrecord.Lease{LeaderID: "c0", At: int64(idx)}, Cluster: cluster})
	}
	for i, c := range []struct{ cluster, want string }{
		{"", ""},
		{"0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"},
		{"fedcba9876543210fedcba9876543210", "fedcba9876543210fedcba9876543210"},
		{"", "fedcba9876543210fedcba9876543210"},
	} {
		if r := f.Apply(lease(uint64(i+1), c.cluster)).(*applyResult); r.Err != nil {
			t.Fatal(r.Err)
		}
		if got := f.Cluster(); got != c.want {
			t.Fatalf("after lease %d (cluster %q): %q, want %q", i+1, c.cluster, got, c.want)
		}
	}
	if got := NewFSM(s, nil).Cluster(); got != f.Cluster() {
		t.Fatalf("a restarted node reads %q", got)
	}

	// The previous build's command: the same entry decodes into it.
	type leaseCmdBefore struct {
		Lease evalrecord.Lease `msgpack:"lease"`
	}
	ct, body, err := decodeCmd(lease(9, "0123456789abcdef0123456789abcdef").Data)
	var before leaseCmdBefore
	if err != nil || ct != cmdLease || msgpack.Unmarshal(body, &before) != nil || before.Lease != (evalrecord.Lease{LeaderID: "c0", At: 9}) {
		t.Fatalf("the previous build reads %+v (%v)", before, err)
	}

	b, bs := restored(t, f)
	if b.Cluster() != f.Cluster() || bs.AppliedIndex() != 4 {
		t.Fatalf("restored: cluster %q at %d", b.Cluster(), bs.AppliedIndex())
	}
	// What the previous build reads of the restored store is unchanged:
	// its lease and applied index; the identity is one more m key.
	if err := bs.View(func(tx *evalstore.Tx) error {
		l, err := tx.Lease()
		if err != nil || l != (evalrecord.Lease{LeaderID: "c0", At: 4}) {
			t.Fatalf("restored lease %+v (%v)", l, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	earlier, _ := newFSM(t)
	earlier.skipCluster = true
	earlier.Apply(lease(1, "0123456789abcdef0123456789abcdef"))
	if got := earlier.Cluster(); got != "" {
		t.Fatalf("an earlier build's FSM recorded %q", got)
	}

	// A mixed cluster: node a applied the first identity; node r
	// installed the earlier build's snapshot (none), led, and drew a
	// second; both apply it.
	a, _ := newFSM(t)
	a.Apply(lease(1, "0123456789abcdef0123456789abcdef"))
	r, _ := restored(t, earlier)
	if got := r.Cluster(); got != "" {
		t.Fatalf("an earlier build's snapshot restored identity %q", got)
	}
	for _, n := range []*FSM{a, r} {
		n.Apply(lease(2, "fedcba9876543210fedcba9876543210"))
	}
	if a.Cluster() != r.Cluster() {
		t.Fatalf("two nodes of one log name clusters %q and %q", a.Cluster(), r.Cluster())
	}
}

// cluster is two coordinators on one NATS server: lead bootstrapped it,
// follow joined it.
type cluster struct {
	lead, follow *Node
	stop         func()
}

// clientOnNewBus starts a NATS server and a client on a connection to
// it (for raw requests too). The client's timeout, 20 s, leaves a loaded
// machine room for the first answers, which take well under 1 s; before
// cluster identities, a submit ended in coordinator_behind at that
// timeout.
func clientOnNewBus(t *testing.T) (*bustest.Server, *nats.Conn, *client.Client) {
	t.Helper()
	srv := bustest.Start(t, bus.ServerConfig{})
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return srv, nc, client.New(nc, 20*time.Second)
}

// startCluster starts a cluster as startPair does, renewing the lease
// every leaseEvery (every renewal is a Raft entry), with a follower of
// an earlier build when earlier. stop stops both nodes (the test's
// clean-up does too).
func startCluster(t *testing.T, srv *bustest.Server, leaseEvery time.Duration, earlier bool) *cluster {
	t.Helper()
	timing := Timing{RaftHeartbeat: 300 * time.Millisecond, RaftLeaderLease: 150 * time.Millisecond, Tick: 10 * time.Millisecond,
		LeaseInterval: leaseEvery, FenceLease: 5 * time.Minute, WorkerTTL: time.Minute,
		DispatchGrace: 2 * time.Second, TaskAckWait: 2 * time.Second, ResultAckWait: 2 * time.Second, ReadWait: 200 * time.Millisecond}
	var stops []func()
	start := func(id string, bootstrap, earlier bool) *Node {
		nc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		n, err := Start(Config{ID: id, DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: bootstrap, NATS: nc,
			Workers: []string{"w0"}, Streams: bus.TaskStreamConfig{Replicas: 1}, MemTableSize: 16 << 20, Timing: timing,
			earlierBuild: earlier})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop) // Stop may run twice: the test's and the clean-up's
		stops = append(stops, n.Stop)
		return n
	}
	c := &cluster{lead: start("c0", true, false)}
	testutil.WaitFor(t, 20*time.Second, "c0 leads and serves", c.lead.Serving)
	c.follow = start("c1", false, earlier)
	if err := c.lead.Join("c1", c.follow.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "c1 caught up", func() bool {
		return c.lead.Serving() && c.follow.AppliedIndex() >= c.lead.AppliedIndex()
	})
	c.stop = func() {
		for _, stop := range stops {
			stop()
		}
	}
	return c
}

// taken is how many op requests n's service took.
func taken(n *Node, op string) int {
	for _, e := range n.svc.svc.Stats().Endpoints {
		if e.Name == op {
			return e.NumRequests
		}
	}
	return 0
}

// TestCluster_AClientOutlivesAWipedCluster: a long-lived client (the
// gateway) holds a Raft index of a cluster whose coordinators are then
// wiped and bootstrapped again: its next submit and reads are answered at
// once by the new cluster, whose log is far behind that index, and its
// reads see its new writes. Before, every request answered
// coordinator_behind until the new log passed the old index (here, never:
// the new log stands still). With a follower of an earlier build, which
// knows no identities and waits for any index, the client gets its
// answers from the leader. A request without an identity (an earlier
// client) still waits for its index.
func TestCluster_AClientOutlivesAWipedCluster(t *testing.T) {
	for _, c := range []struct {
		name    string
		earlier bool
	}{
		{"every node of this build", false},
		{"a follower of an earlier build", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, nc, cl := clientOnNewBus(t)
			ctx := context.Background()

			old := startCluster(t, srv, 10*time.Millisecond, c.earlier)
			j := submit(t, cl)
			testutil.WaitFor(t, 30*time.Second, "the first log past index 200", func() bool { return old.lead.AppliedIndex() > 200 })
			// Reads until the leader (of this build: it names the
			// cluster) answered one; NATS hands each to either node.
			for n := 0; taken(old.lead, api.OpStatus) == 0; n++ {
				if n == 60 {
					t.Fatal("the leader took none of 60 reads")
				}
				if _, err := cl.Status(ctx, behindScope, j.JobID); err != nil {
					t.Fatal(err)
				}
			}
			oldCluster, oldIndex := old.lead.fsm.Cluster(), old.lead.AppliedIndex()
			if oldCluster == "" {
				t.Fatal("the first cluster has no identity")
			}
			old.stop()

			// Wiped: new data directories, bootstrapped again; its
			// leases (and with them its log) stand still.
			fresh := startCluster(t, srv, time.Hour, c.earlier)
			if fresh.lead.fsm.Cluster() == "" || fresh.lead.fsm.Cluster() == oldCluster || fresh.lead.AppliedIndex() > 50 {
				t.Fatalf("the new cluster: identity %q (the first's %q), index %d", fresh.lead.fsm.Cluster(), oldCluster, fresh.lead.AppliedIndex())
			}
			start := time.Now()
			j2 := submit(t, cl)
			for range 10 {
				got, err := cl.Status(ctx, behindScope, j2.JobID)
				if err != nil || got.JobID != j2.JobID {
					t.Fatalf("status of the new job: %v", err)
				}
			}
			if _, err := cl.Status(ctx, behindScope, j.JobID); api.AsError(err).Code != evalrecord.CodeNotFound {
				t.Fatalf("the wiped job's status: %v, want %s", err, evalrecord.CodeNotFound)
			}
			// Well under the client's timeout, after which the previous
			// code's submit ended in coordinator_behind.
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("the client's first answers took %s", d)
			}
			if c.earlier {
				return
			}
			// Raw requests: an earlier client's index (no identity) is
			// still waited for; the first cluster's is not.
			rep := rawCall(t, nc, api.OpStatus, &api.Request{Scope: behindScope, JobID: j2.JobID, MinIndex: oldIndex})
			if rep.Err == nil || rep.Err.Code != api.CodeCoordinatorBehind {
				t.Fatalf("an index without an identity: %v, want %s", rep.Err, api.CodeCoordinatorBehind)
			}
			rep = rawCall(t, nc, api.OpStatus, &api.Request{Scope: behindScope, JobID: j2.JobID, MinIndex: oldIndex, Cluster: oldCluster})
			if rep.Err != nil || rep.Job == nil || rep.Cluster != fresh.lead.fsm.Cluster() || rep.Index == 0 || rep.Index >= oldIndex {
				t.Fatalf("the first cluster's index: %v, cluster %q index %d", rep.Err, rep.Cluster, rep.Index)
			}
			caps, err := cl.Capabilities(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if caps.Cluster != fresh.lead.fsm.Cluster() {
				t.Fatalf("capabilities name cluster %q, want %q", caps.Cluster, fresh.lead.fsm.Cluster())
			}
			rep = rawCall(t, nc, api.OpStatus, &api.Request{Scope: behindScope, JobID: j2.JobID, Cluster: strings.Repeat("x", api.MaxClusterBytes+1)})
			if rep.Err == nil || rep.Err.Code != api.CodeInvalidRequest || !strings.HasPrefix(rep.Err.Detail, "cluster:") {
				t.Fatalf("an identity over its bound: %v", rep.Err)
			}
		})
	}
}

// TestCluster_AClientNeverTakesTheClusterItLeft: after a wipe, a node of
// the old cluster comes back (it was not wiped: restarted from its data
// directory, it finds no leader) and answers beside the new cluster, NATS
// handing each request to any of the three. Every read of the job the
// client submitted to the new cluster finds it. Before, the old node
// dropped the new cluster's index, answered not_found from the old state,
// and the client took that answer and went back to the old cluster.
func TestCluster_AClientNeverTakesTheClusterItLeft(t *testing.T) {
	srv, _, cl := clientOnNewBus(t)
	ctx := context.Background()

	old := startCluster(t, srv, time.Hour, false)
	submit(t, cl)
	cfg := old.follow.cfg
	old.stop()
	fresh := startCluster(t, srv, time.Hour, false)
	j := submit(t, cl)

	cfg.RaftAddr = "127.0.0.1:0"
	back, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.Stop)
	if back.fsm.Cluster() == "" || back.fsm.Cluster() == fresh.lead.fsm.Cluster() {
		t.Fatalf("the old node names cluster %q, the new one %q", back.fsm.Cluster(), fresh.lead.fsm.Cluster())
	}
	for n := 0; n < 20 || taken(back, api.OpStatus) == 0; n++ {
		if n == 100 {
			t.Fatal("the old node took none of 100 reads")
		}
		got, err := cl.Status(ctx, behindScope, j.JobID)
		if err != nil || got.JobID != j.JobID {
			t.Fatalf("read %d of the new cluster's job: %v", n, err)
		}
	}
}
