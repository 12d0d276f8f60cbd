package testcluster_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model/ratelimit"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/testcluster"
)

// slotProvider is an OpenAI-compatible endpoint on 127.0.0.1 that counts
// the calls in flight (the most ever, and every call that found the
// endpoint's concurrency already taken) and answers its first call 429.
type slotProvider struct {
	mu                   sync.Mutex
	inFlight, peak, over int
	calls, throttled     int
	limit                int
	url                  string
}

func startSlotProvider(t *testing.T, limit int, hold time.Duration) *slotProvider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slotProvider{url: "http://" + ln.Addr().String() + "/v1", limit: limit}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		p.mu.Lock()
		p.calls++
		first := p.calls == 1
		p.inFlight++
		p.peak = max(p.peak, p.inFlight)
		if p.inFlight > p.limit {
			p.over++
		}
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.inFlight--
			p.mu.Unlock()
		}()
		if first {
			p.mu.Lock()
			p.throttled++
			p.mu.Unlock()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		// A call lasts long enough that a second fleet's worth of slots
		// would show as calls in flight at once.
		time.Sleep(hold)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return p
}

func (p *slotProvider) stats() (calls, peak, over int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls, p.peak, p.over
}

// TestClusterEval_RateLimitFailover: four workers share concurrent_requests
// 2 (more workers than slots: the slots go round) of one endpoint under a
// 3-node Raft cluster over loopback and embedded NATS with JetStream. The endpoint's first answer is a 429, which cuts the
// fleet's limit; then the leader is stopped mid-job. Throughout, the
// endpoint never sees more than 2 calls at once (the new leader grows no
// share before it knows the old leader's grants); the new leader runs at
// the cut rate, not the declared maximum; every sample passes, every
// worker made calls.
func TestClusterEval_RateLimitFailover(t *testing.T) {
	const conc, cases = 2, 16
	prov := startSlotProvider(t, conc, 40*time.Millisecond)
	agentFile := filepath.Join(t.TempDir(), "AGENT.json")
	if err := os.WriteFile(agentFile, []byte(fmt.Sprintf(`{"schema_version":1,"name":"limited","instruction":"Answer.",
 "model":{"provider":"openai","model":"fake","base_url":%q,"max_attempts":1,"rate_limit":{"concurrent_requests":%d}}}`, prov.url, conc)), 0o644); err != nil {
		t.Fatal(err)
	}
	workers := []string{"w0", "w1", "w2", "w3"}
	// The production fence lease (5 s), not the tests' 1.5 s: under load
	// (-race, load 30) the new leader can take longer than 1.5 s to
	// establish after the stop, and a gap over the lease is a full
	// restart by design (running jobs fail evaluation_service_restarted),
	// which is not what this test is about.
	c := testcluster.StartEval(t, testcluster.EvalOptions{Coordinators: 3, Workers: workers, Capacity: 2,
		AgentFiles: map[string]string{"limited": agentFile},
		Timing:     timing(func(t *coordinator.Timing) { t.FenceLease = 5 * time.Second })})
	testutil.WaitFor(t, 60*time.Second, "every worker answered", func() bool {
		for i := range c.Workers() {
			if c.Worker(i).LastAnswer().IsZero() {
				return false
			}
		}
		return true
	})
	cl := c.Client()
	set := []byte(`{"schema_version":2,"id":"rlf","version":"1","cases":[`)
	for i := range cases {
		if i > 0 {
			set = append(set, ',')
		}
		set = fmt.Appendf(set, `{"id":"c%02d","turns":[{"id":"t","input":"hi","expected_response":"ok"}]}`, i)
	}
	set = append(set, "]}"...)
	j, err := cl.Submit(context.Background(), scope, api.SubmitRequest{Set: set, Agent: "limited", Options: mustJSON(t, evalengine.DefaultOptions())})
	if err != nil {
		t.Fatal(err)
	}
	// The 429 has cut the fleet's limit and the job is under way.
	old, oldFactor := -1, 0.0
	testutil.WaitFor(t, 30*time.Second, "the 429's cut and some calls", func() bool {
		calls, _, _ := prov.stats()
		old = c.LeaderIndex()
		if old < 0 || calls < 6 {
			return false
		}
		st := c.Coordinator(old).LimitStates()
		if len(st) == 1 && st[0].Cuts >= 1 {
			oldFactor = st[0].Factor
			return true
		}
		return false
	})
	c.StopCoordinator(old)
	testutil.WaitFor(t, 20*time.Second, "a new leader", func() bool { i := c.LeaderIndex(); return i >= 0 && i != old })
	// The new leader runs at the fleet's cut rate, not the declared
	// maximum: it ran the same AIMD from the heartbeats, and the grants
	// outstanding show it (one growth step may fall in between).
	st := c.Leader().LimitStates()
	if len(st) != 1 || oldFactor >= 1 || st[0].Factor > oldFactor+ratelimit.Increase+1e-9 || st[0].Holders != len(workers) {
		t.Fatalf("new leader's view %+v: want the old leader's factor (%v) and %d holders", st, oldFactor, len(workers))
	}
	c.WaitJob(cl, scope, j.JobID, 90*time.Second, "completed")
	js, err := cl.Status(context.Background(), scope, j.JobID)
	if err != nil || js.Progress.Done != cases {
		t.Fatalf("job %+v %v", js, err)
	}
	// No sample failed for rate reasons. On a loaded machine the test's
	// 2 s dispatch grace can fail a task worker_lost (not a rate limit
	// matter, and it happens on main too); nothing else is allowed.
	lost := 0
	if js.Progress.Errors != 0 {
		res, err := cl.Result(context.Background(), scope, j.JobID)
		if err != nil {
			t.Fatal(err)
		}
		errs := sampleErrors(t, res)
		lost = errs[evalengine.TagWorkerLost]
		if lost != js.Progress.Errors {
			t.Fatalf("sample errors %v", errs)
		}
		t.Logf("%d samples worker_lost (load)", lost)
	}
	calls, peak, over := prov.stats()
	if calls > cases+1 || calls < cases-lost+1 {
		t.Fatalf("%d calls for %d samples (%d lost) and one 429", calls, cases, lost)
	}
	if peak > conc || over != 0 {
		t.Fatalf("the endpoint saw %d calls at once (%d calls over its %d slots)", peak, over, conc)
	}
	for i := range c.Workers() {
		var admitted int64
		for _, l := range c.Worker(i).Limits() {
			admitted += l.Admitted
		}
		if admitted == 0 && lost == 0 {
			t.Fatalf("worker %s made no call: its concurrency slot never came round", workers[i])
		}
	}
}
