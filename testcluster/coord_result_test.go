package testcluster_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/fadcedab/adk/testcluster"
)

// TestClusterEval_ResultBuiltOnEveryNode checks that a completed job's
// result, which the Raft log carries only as a digest, is the same bytes
// under the same digest on every coordinator: the leader (its own build),
// a follower that applied the whole job from the log, and a follower that
// was down for it and caught up by installing a snapshot taken mid-job
// (it builds the document from outcomes half restored, half replayed).
func TestClusterEval_ResultBuiltOnEveryNode(t *testing.T) {
	c := testcluster.StartEval(t, testcluster.EvalOptions{Workers: []string{"w0", "w1"}, Capacity: 2,
		Agent: &testcluster.ScriptedAgent{TurnDelay: 30 * time.Millisecond}, TrailingLogs: 2})
	leader := -1
	testutil.WaitFor(t, 10*time.Second, "a leader", func() bool { leader = c.LeaderIndex(); return leader >= 0 })
	late := (leader + 1) % 3 // down for the job, back by snapshot
	c.StopCoordinator(late)
	lateDir := filepath.Join(c.CoordDir(late), "raft", "snapshots")

	opts := evalengine.DefaultOptions()
	opts.Samples = 2
	cl := c.Client()
	id := submit(t, cl, testcluster.EvalSet("everywhere", 20), opts, "")
	testutil.WaitFor(t, 20*time.Second, "a third of the tasks done", func() bool {
		j, err := cl.Status(context.Background(), scope, id)
		return err == nil && j.Progress.Done >= 12
	})
	// Snapshot mid-job on every running node (whoever leads now sends
	// its own), so the log the late node missed is compacted away.
	for i := range 3 {
		if n := c.Coordinator(i); n != nil {
			if err := n.Snapshot(); err != nil {
				t.Fatalf("snapshot %d: %v", i, err)
			}
		}
	}
	c.WaitJob(cl, scope, id, 30*time.Second, "completed")
	if ents, _ := os.ReadDir(lateDir); len(ents) != 0 {
		t.Fatalf("the late node had snapshots before it restarted: %v", ents)
	}
	c.StartCoordinator(late, false)
	want, err := cl.Result(context.Background(), scope, id)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(want)
	digest := hex.EncodeToString(sum[:])
	for i := range 3 {
		n := c.Coordinator(i)
		var got []byte
		testutil.WaitFor(t, 20*time.Second, "coordinator "+n.ID()+" holds the result", func() bool {
			got = nil
			_ = n.Store().View(func(tx *evalstore.Tx) error {
				j, err := tx.JobByID(id)
				if err != nil || j.Phase != "completed" {
					return err
				}
				if j.ResultDigest != digest {
					t.Fatalf("coordinator %s: digest %s, want %s", n.ID(), j.ResultDigest, digest)
				}
				got, err = tx.Result(id)
				return err
			})
			return got != nil
		})
		if !bytes.Equal(got, want) {
			t.Fatalf("coordinator %s holds %d bytes that differ from the served %d", n.ID(), len(got), len(want))
		}
	}
	if ents, _ := os.ReadDir(lateDir); len(ents) == 0 {
		out, _ := exec.Command("find", c.CoordDir(late)).CombinedOutput()
		t.Fatalf("the late node caught up without installing a snapshot:\n%s", out)
	}
	checkAtMostOnce(t, c.Agent)
}
