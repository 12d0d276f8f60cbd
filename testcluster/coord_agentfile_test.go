package testcluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/evalengine/agentadapter"
	"github.com/fadcedab/adk/testcluster"
)

// TestClusterEval_AgentFileJobLikeLocalRun: workers configured with the
// travel example's AGENT.json run a job that names it, and the result is
// the local `adk eval run` result apart from timings.
func TestClusterEval_AgentFileJobLikeLocalRun(t *testing.T) {
	const agentFile = "../examples/travel/AGENT.json"
	set := readFile(t, "../examples/travel/evalset.json")
	criteria := readFile(t, "../examples/travel/criteria.json")
	opts := evalengine.DefaultOptions()
	opts.Samples = 2

	c := testcluster.StartEval(t, testcluster.EvalOptions{Workers: []string{"w0", "w1"},
		AgentFiles: map[string]string{"travel": agentFile}})
	cl := c.Client()
	j, err := cl.Submit(context.Background(), scope, api.SubmitRequest{Set: set, Criteria: criteria, Agent: "travel", Options: mustJSON(t, opts)})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitJob(cl, scope, j.JobID, 20*time.Second, "completed")
	got, err := cl.Result(context.Background(), scope, j.JobID)
	if err != nil {
		t.Fatal(err)
	}

	p, err := evalengine.Prepare(set, criteria, mustJSON(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := agent.LoadConfig(agentFile)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := agentadapter.New(cfg, agentadapter.Options{CaptureEvents: p.Options.CaptureEvents})
	if err != nil {
		t.Fatal(err)
	}
	res, err := evalengine.Run(context.Background(), p.Set, evalengine.RunConfig{Adapter: ad, Metrics: p.Metrics, Options: p.Options})
	if err != nil {
		t.Fatal(err)
	}
	g, w := stripTimings(t, got), stripTimings(t, mustJSON(t, res))
	if string(mustJSON(t, g)) != string(mustJSON(t, w)) {
		t.Fatalf("distributed result differs from the local run:\n got %s\nwant %s", mustJSON(t, g), mustJSON(t, w))
	}
	if len(res.Cases) == 0 {
		t.Fatal("empty result")
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
