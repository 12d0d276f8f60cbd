package devapi_test

import (
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/testcluster"
)

// TestClusterDevAPI_GatewayOutlivesAWipedCluster is the operator's
// scenario: `adk api` (the gateway over real HTTP, holding one
// coordinator client) runs while its coordinators are wiped (new data
// directories) and bootstrapped again under the same NATS. Without a
// gateway restart, its next submit is accepted by the new cluster, reads
// of the new job answer at once, the wiped job is 404, and the cluster
// view names the new cluster. Before cluster identities, every one of
// them was 503 coordinator_behind: the gateway's Raft index was the old
// log's (past 200 here) and the new log stands still.
func TestClusterDevAPI_GatewayOutlivesAWipedCluster(t *testing.T) {
	srv := bustest.Start(t, bus.ServerConfig{})
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// One coordinator, bootstrapped in a new data directory, renewing
	// its lease (a Raft entry) every leaseEvery.
	start := func(leaseEvery time.Duration) (*coordinator.Node, func()) {
		cnc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cnc.Close)
		timing := coordinator.Timing{LeaseInterval: leaseEvery, Tick: 10 * time.Millisecond}
		n, err := coordinator.Start(coordinator.Config{ID: "c0", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: true, NATS: cnc,
			Workers: []string{"w0"}, Streams: bus.TaskStreamConfig{Replicas: 1}, MemTableSize: 16 << 20, Timing: timing})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop) // Stop may run twice: the test's and the clean-up's
		testutil.WaitFor(t, 20*time.Second, "the coordinator leads and serves", n.Serving)
		return n, n.Stop
	}
	_, base := newServer(t, devapi.Options{Coord: client.New(nc, 20*time.Second), NATS: nc, Agents: []string{"scripted"}})
	submit := func(name string) evalrecord.Job {
		t.Helper()
		a := do(t, base, "POST", "/dev/v1/evaluation/jobs", tokAlice, submitBody(t, testcluster.EvalSet(name, 2), ""))
		if a.status != 202 {
			t.Fatalf("submit %s: %d %s", name, a.status, a.body)
		}
		return decode[evalrecord.Job](t, a)
	}
	clusterOf := func() string {
		t.Helper()
		a := do(t, base, "GET", devapi.PathCluster, tokAlice, nil)
		v := decode[devapi.ClusterView](t, a)
		if a.status != 200 || v.Coordinator == nil || v.Coordinator.Cluster == "" {
			t.Fatalf("cluster view: %d %s", a.status, a.body)
		}
		return v.Coordinator.Cluster
	}

	old, stopOld := start(10 * time.Millisecond)
	j1 := submit("before")
	testutil.WaitFor(t, 30*time.Second, "the first log past index 200", func() bool { return old.AppliedIndex() > 200 })
	if a := do(t, base, "GET", "/dev/v1/evaluation/jobs/"+j1.JobID, tokAlice, nil); a.status != 200 {
		t.Fatalf("status before the wipe: %d %s", a.status, a.body)
	}
	oldCluster := clusterOf()
	stopOld()

	fresh, _ := start(time.Hour)
	if fresh.AppliedIndex() > 50 {
		t.Fatalf("the new log is at %d", fresh.AppliedIndex())
	}
	began := time.Now()
	j2 := submit("after")
	for range 5 {
		if a := do(t, base, "GET", "/dev/v1/evaluation/jobs/"+j2.JobID, tokAlice, nil); a.status != 200 {
			t.Fatalf("status of the new job: %d %s", a.status, a.body)
		}
	}
	if a := do(t, base, "GET", "/dev/v1/evaluation/jobs/"+j1.JobID, tokAlice, nil); a.status != 404 {
		t.Fatalf("status of the wiped job: %d %s", a.status, a.body)
	}
	if c := clusterOf(); c == oldCluster {
		t.Fatalf("the cluster view still names cluster %s", c)
	}
	// Well under the client's timeout (20 s), after which the previous
	// gateway answered 503.
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the gateway's first answers took %s", d)
	}
}
