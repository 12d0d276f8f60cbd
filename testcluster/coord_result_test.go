package testcluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/fadcedab/adk/testcluster"
)

// TestClusterEval_ResultBuiltOnEveryNode checks that a completed job's
// result, which the Raft log carries only as the running hash of its
// records, reads back page by page as the same JSON Lines stream under the
// same digest from every coordinator: the leader, a follower that applied
// the whole job from the log, and a follower that was down for it and
// caught up by installing a snapshot taken mid-job (its records half
// restored, half replayed). The stream is the local jsonl form of the
// document a client reads (built on read).
func TestClusterEval_ResultBuiltOnEveryNode(t *testing.T) {
	logs := &testutil.Buffer{}
	c := testcluster.StartEval(t, testcluster.EvalOptions{Workers: []string{"w0", "w1"}, Capacity: 8,
		Agent: &testcluster.ScriptedAgent{TurnDelay: 5 * time.Millisecond}, TrailingLogs: 2, Timing: steadyRaft(),
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() { logClusterOnFailure(t, c, 3, logs) })
	leader := -1
	testutil.WaitFor(t, 10*time.Second, "a leader", func() bool { leader = c.LeaderIndex(); return leader >= 0 })
	late := (leader + 1) % 3 // down for the job, back by snapshot
	c.StopCoordinator(late)
	lateDir := filepath.Join(c.CoordDir(late), "raft", "snapshots")

	opts := evalengine.DefaultOptions()
	opts.Samples = 2
	cl := c.Client()
	id := submit(t, cl, testcluster.EvalSet("everywhere", 100), opts, "")
	// A job failed by a full restart (a leader change longer than the
	// fence lease) fails here at once, naming its reason: before, the
	// wait ran out its 30 s and said only that no third was done.
	waitDone(t, cl, id, 60, 30*time.Second)
	// Snapshot mid-job on every running node (whoever leads now sends
	// its own), so the log the late node missed is compacted away.
	for i := range 3 {
		if n := c.Coordinator(i); n != nil {
			if err := n.Snapshot(); err != nil {
				t.Fatalf("snapshot %d: %v", i, err)
			}
		}
	}
	if ph := c.WaitJob(cl, scope, id, 60*time.Second, "completed", "failed", "cancelled"); ph != "completed" {
		j, err := cl.Status(context.Background(), scope, id)
		t.Fatalf("job %s ended %s, not completed: %+v (status error %v)", id, ph, j, err)
	}
	if ents, _ := os.ReadDir(lateDir); len(ents) != 0 {
		t.Fatalf("the late node had snapshots before it restarted: %v", ents)
	}
	// The served stream, read before the late node is back: a read goes
	// to any coordinator. (One still installing the snapshot used to
	// answer what it had applied once the read's 2 s wait for the
	// client's index ended: result_not_ready, seen under load. It now
	// answers coordinator_behind and the client asks again.) Its own
	// answer is checked below, once it has applied the job.
	var want bytes.Buffer
	lines, err := cl.ResultStream(context.Background(), scope, id, &want, 8<<10)
	if err != nil {
		t.Fatal(err)
	}
	if wantLines := int64(1 + 200 + 100 + 1); lines != wantLines {
		t.Fatalf("%d lines, want %d", lines, wantLines)
	}
	c.StartCoordinator(late, false)
	// The stream's sample lines by task index (sample-major: sample s of
	// case c is task c + 100 s).
	sampleLines := map[int][]byte{}
	for _, l := range bytes.SplitAfter(want.Bytes(), []byte{'\n'})[1 : 1+200] {
		var sl struct {
			CaseIndex int `json:"case_index"`
			Sample    struct {
				SampleIndex int `json:"sample_index"`
			} `json:"sample"`
		}
		if err := json.Unmarshal(l, &sl); err != nil {
			t.Fatal(err)
		}
		sampleLines[sl.CaseIndex+100*sl.Sample.SampleIndex] = l
	}
	if len(sampleLines) != 200 {
		t.Fatalf("%d tasks in the stream's sample lines", len(sampleLines))
	}
	var digest string
	for i := range 3 {
		n := c.Coordinator(i)
		testutil.WaitFor(t, 20*time.Second, "coordinator "+n.ID()+" completed the job", func() bool {
			var done bool
			_ = n.Store().View(func(tx *evalstore.Tx) error {
				j, err := tx.JobByID(id)
				if err != nil || j.Phase != "completed" {
					return err
				}
				if j.ResultFormat != evalrecord.ResultRecords || j.Records != 200 {
					t.Fatalf("coordinator %s: format %q with %d records", n.ID(), j.ResultFormat, j.Records)
				}
				if digest == "" {
					digest = j.ResultDigest
				}
				if j.ResultDigest != digest {
					t.Fatalf("coordinator %s: digest %s, want %s", n.ID(), j.ResultDigest, digest)
				}
				done = true
				return nil
			})
			return done
		})
		var got bytes.Buffer
		if err := n.WriteResultStream(scope, id, &got, 8<<10); err != nil {
			t.Fatalf("coordinator %s: %v", n.ID(), err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("coordinator %s serves %d bytes that differ from the served %d", n.ID(), got.Len(), want.Len())
		}
		// A case's samples read by task index (result_samples, what a
		// case page reads) are the stream's lines of those tasks, from
		// this node's own store too.
		for _, tasks := range [][]int{{0, 100}, {199, 99}, {57}, {42, 142, 43, 143}} {
			got.Reset()
			if err := n.WriteResultSamples(scope, id, tasks, &got, 600); err != nil {
				t.Fatalf("coordinator %s: samples of tasks %v: %v", n.ID(), tasks, err)
			}
			var lines [][]byte
			for _, idx := range tasks {
				lines = append(lines, sampleLines[idx])
			}
			if w := bytes.Join(lines, nil); !bytes.Equal(got.Bytes(), w) {
				t.Fatalf("coordinator %s: samples of tasks %v are %.300s, want the stream's %.300s", n.ID(), tasks, got.Bytes(), w)
			}
		}
	}
	// The stream is the document's jsonl form: decoded, it is the
	// document a client reads, byte for byte.
	doc, err := cl.Result(context.Background(), scope, id)
	if err != nil {
		t.Fatal(err)
	}
	st, err := evalengine.ReadStream(bytes.NewReader(want.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := evalengine.StreamToResult(st)
	if err != nil {
		t.Fatal(err)
	}
	fromStream, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromStream, doc) {
		t.Fatalf("the stream decodes to %d bytes that differ from the %d-byte document", len(fromStream), len(doc))
	}
	if ents, _ := os.ReadDir(lateDir); len(ents) == 0 {
		out, _ := exec.Command("find", c.CoordDir(late)).CombinedOutput()
		t.Fatalf("the late node caught up without installing a snapshot:\n%s", out)
	}
	checkAtMostOnce(t, c.Agent)
}

// logClusterOnFailure logs, once t has failed, what a stalled cluster
// test needs to be diagnosed: each worker's counters, the Raft view of
// each of the first coords coordinators and the processes' logs
// (EvalOptions.Logger into logs). Register it with t.Cleanup after
// StartEval, so it runs while the cluster is still up.
func logClusterOnFailure(t *testing.T, c *testcluster.EvalCluster, coords int, logs *testutil.Buffer) {
	if !t.Failed() {
		return
	}
	for i := range c.Workers() {
		if w := c.Worker(i); w != nil {
			t.Logf("worker %s: running %d, executed %d, dropped %d, fenced %v, owner waits %d, last answer %s",
				w.ID(), w.Running(), w.Executed(), w.Dropped(), w.Fenced(), w.OwnerWaits(), w.LastAnswer().Format(time.RFC3339Nano))
		}
	}
	for i := range coords {
		if n := c.Coordinator(i); n != nil {
			commit, applied := n.RaftIndexes()
			t.Logf("coordinator %s: leader %v, serving %v, leader seen %q, commit %d, applied %d",
				n.ID(), n.IsLeader(), n.Serving(), n.Leader(), commit, applied)
		} else {
			t.Logf("coordinator %d: stopped", i)
		}
	}
	t.Logf("logs:\n%s", logs.String())
}
