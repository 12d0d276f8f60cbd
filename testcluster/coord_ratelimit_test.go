package testcluster_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/testcluster"
)

// countingProvider is an OpenAI-compatible chat endpoint on 127.0.0.1
// that records when each call arrived.
type countingProvider struct {
	mu  sync.Mutex
	at  []time.Time
	srv *http.Server
	url string
}

func startCountingProvider(t *testing.T) *countingProvider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProvider{url: "http://" + ln.Addr().String() + "/v1"}
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		p.mu.Lock()
		p.at = append(p.at, time.Now())
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = p.srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = p.srv.Close()
		<-done
	})
	return p
}

func (p *countingProvider) calls() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]time.Time(nil), p.at...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// TestClusterEval_RateLimitSharedByWorkers: three workers whose agent
// declares 600 requests per minute for its endpoint together stay under
// 600 per minute (each alone would take all 600), every sample passes,
// and the leader knows the three holders. One coordinator: the split is
// the leader's, and on a loaded machine a 3-voter cluster's leadership
// churn fails jobs evaluation_service_restarted, which is not what this
// test is about.
func TestClusterEval_RateLimitSharedByWorkers(t *testing.T) {
	const rpm, cases = 600, 50
	prov := startCountingProvider(t)
	agentFile := filepath.Join(t.TempDir(), "AGENT.json")
	if err := os.WriteFile(agentFile, []byte(fmt.Sprintf(`{"schema_version":1,"name":"limited","instruction":"Answer.",
 "model":{"provider":"openai","model":"fake","base_url":%q,"max_attempts":1,"rate_limit":{"requests_per_minute":%d}}}`, prov.url, rpm)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := testcluster.StartEval(t, testcluster.EvalOptions{Coordinators: 1, Workers: []string{"w0", "w1", "w2"}, Capacity: 4,
		AgentFiles: map[string]string{"limited": agentFile}})
	// The fleet is up: every worker has its first answer (and grant).
	testutil.WaitFor(t, 30*time.Second, "every worker answered", func() bool {
		for i := range c.Workers() {
			if c.Worker(i).LastAnswer().IsZero() {
				return false
			}
		}
		return true
	})
	cl := c.Client()
	set := []byte(`{"schema_version":2,"id":"rl","version":"1","cases":[`)
	for i := range cases {
		if i > 0 {
			set = append(set, ',')
		}
		set = fmt.Appendf(set, `{"id":"c%02d","turns":[{"id":"t","input":"hi","expected_response":"ok"}]}`, i)
	}
	set = append(set, "]}"...)
	opts := evalengine.DefaultOptions()
	j, err := cl.Submit(context.Background(), scope, api.SubmitRequest{Set: set, Agent: "limited", Options: mustJSON(t, opts)})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitJob(cl, scope, j.JobID, 90*time.Second, "completed")
	st, err := cl.Status(context.Background(), scope, j.JobID)
	if err != nil || st.Progress.Errors != 0 || st.Progress.Done != cases {
		res, _ := cl.Result(context.Background(), scope, j.JobID)
		t.Fatalf("job progress %+v %v; result %s", st.Progress, err, res)
	}

	// Every stretch of calls fits the fleet's token bucket: the limit's
	// rate plus the workers' bursts (a second of their shares each, a
	// second of the limit together; twice that as slack for a share in
	// transit). Three workers each running at the whole limit would
	// break it within the first seconds.
	at := prov.calls()
	if len(at) != cases {
		t.Fatalf("%d provider calls for %d samples", len(at), cases)
	}
	perSec := float64(rpm) / 60
	burst := 2 * perSec
	for i := range at {
		for k := i + 1; k < len(at); k++ {
			n := float64(k - i + 1)
			if allowed := burst + perSec*at[k].Sub(at[i]).Seconds(); n > allowed+1 {
				t.Fatalf("calls %d..%d: %v calls in %v, the fleet may make %.1f", i, k, n, at[k].Sub(at[i]), allowed)
			}
		}
	}
	var admitted int64
	for i := range c.Workers() {
		for _, l := range c.Worker(i).Limits() {
			admitted += l.Admitted
			if l.Limits.RPM > rpm {
				t.Fatalf("worker %d limiter %+v", i, l)
			}
		}
	}
	if admitted != cases {
		t.Fatalf("limiters admitted %d calls for %d samples", admitted, cases)
	}
	states := c.Leader().LimitStates()
	if len(states) != 1 || states[0].Holders != 3 || states[0].Agent != "" {
		t.Fatalf("leader's limits %+v", states)
	}
}
