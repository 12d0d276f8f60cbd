package testcluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/testcluster"
)

const scope = "app-test"

// stripTimings removes what legitimately differs between two runs.
func stripTimings(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "duration_ms")
			delete(x, "runtime_latency_ms")
			delete(x, "latency_ms")
			for _, v := range x {
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(v)
	return v.(map[string]any)
}

func localRun(t *testing.T, set []byte, opts evalengine.Options) []byte {
	t.Helper()
	p, err := evalengine.Prepare(set, nil, mustJSON(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	res, err := evalengine.Run(context.Background(), p.Set, evalengine.RunConfig{Adapter: &testcluster.ScriptedAgent{}, Metrics: p.Metrics, Options: p.Options})
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(t, res)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func submit(t testing.TB, cl *client.Client, set []byte, opts evalengine.Options, owner string) string {
	t.Helper()
	j, err := cl.Submit(context.Background(), scope, api.SubmitRequest{Set: set, Agent: "scripted", Options: mustJSON(t, opts), Owner: owner, OwnerTTLMS: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return j.JobID
}

func checkAtMostOnce(t *testing.T, a *testcluster.ScriptedAgent) {
	t.Helper()
	for id, n := range a.Executions() {
		if n > 1 {
			t.Errorf("sample %s executed %d times", id, n)
		}
	}
}

func TestClusterEval_JobCompletesLikeLocalRun(t *testing.T) {
	c := testcluster.StartEval(t, testcluster.EvalOptions{})
	opts := evalengine.DefaultOptions()
	opts.Samples = 2
	opts.PassRateThreshold = 0.5
	set := testcluster.EvalSet("like-local", 10)
	cl := c.Client()
	id := submit(t, cl, set, opts, "")
	c.WaitJob(cl, scope, id, 15*time.Second, "completed")
	j, err := cl.Status(context.Background(), scope, id)
	if err != nil || j.Revision != 2 || j.Progress.Done != 20 {
		t.Fatalf("job %+v err %v", j, err)
	}
	got, err := cl.Result(context.Background(), scope, id)
	if err != nil {
		t.Fatal(err)
	}
	want := localRun(t, set, opts)
	g, w := stripTimings(t, got), stripTimings(t, want)
	if string(mustJSON(t, g)) != string(mustJSON(t, w)) {
		t.Fatalf("distributed result differs from the local run:\n got %s\nwant %s", mustJSON(t, g), mustJSON(t, w))
	}
	checkAtMostOnce(t, c.Agent)
}
