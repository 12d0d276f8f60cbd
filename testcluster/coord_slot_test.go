package testcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/testcluster"
)

// hangingProvider is an OpenAI-compatible chat endpoint on 127.0.0.1. A
// request whose user input is "hang-N" gets no answer until its client
// closes the connection (or a minute passes); any other ("hello-N") gets
// "ok" at once. It counts the requests for each input, and reports each
// hanging request as it arrives (arrived) and as its client gives it up
// (gone).
type hangingProvider struct {
	url     string
	arrived chan string
	gone    chan string
	mu      sync.Mutex
	calls   map[string]int
}

var inputRE = regexp.MustCompile(`(hang|hello)-[0-9]+`)

func startHangingProvider(t *testing.T) *hangingProvider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangingProvider{url: "http://" + ln.Addr().String() + "/v1", arrived: make(chan string, 64), gone: make(chan string, 64), calls: map[string]int{}}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		input := inputRE.FindString(string(body))
		p.mu.Lock()
		p.calls[input]++
		p.mu.Unlock()
		if strings.HasPrefix(input, "hang-") {
			p.arrived <- input
			select {
			case <-r.Context().Done(): // the client closed the connection
				p.gone <- input
			case <-time.After(time.Minute):
			}
			return
		}
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

func (p *hangingProvider) callsOf(input string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[input]
}

// waitEach takes n inputs from ch within d.
func waitEach(t *testing.T, ch <-chan string, n int, d time.Duration, what string) []string {
	t.Helper()
	var got []string
	deadline := time.After(d)
	for len(got) < n {
		select {
		case in := <-ch:
			got = append(got, in)
		case <-deadline:
			t.Fatalf("%s: %d of %d within %v (%v)", what, len(got), n, d, got)
		}
	}
	return got
}

// slotSet is an eval set of cases whose inputs are the given ones.
func slotSet(id string, inputs ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":%q,"version":"1","cases":[`, id)
	for i, in := range inputs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"c%d","input":%q,"expected":"ok"}`, i, in)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// TestClusterEval_SlotCallsStopOnOwnerDeathAndTheSlotsRunOn runs an
// AGENT.json agent (the openai provider on the lean call path, the agent
// Runner) on one worker with two run slots, so each sample's context is
// its runner slot's scope (evalengine.SampleSlot), shared by the Runner
// and the model call. Owner death kills a job while both slots' calls
// wait on the provider: both connections are closed at once (the kill
// cancels each slot; without it they would wait out a 60 s case
// timeout), the task still waiting for a slot never calls, and the job
// ends cancelled (owner lost). The same worker (its spent slots
// replaced) then runs a job whose one hanging case times out mid-call
// beside ten that pass: each case is called exactly once, the timeout
// is "timeout", every other sample passes.
func TestClusterEval_SlotCallsStopOnOwnerDeathAndTheSlotsRunOn(t *testing.T) {
	p := startHangingProvider(t)
	agentFile := filepath.Join(t.TempDir(), "AGENT.json")
	doc := `{"schema_version":1,"name":"slotted","instruction":"Answer briefly.",
 "model":{"provider":"openai","model":"fake","base_url":"` + p.url + `","max_attempts":1,"timeout_ms":120000}}`
	if err := os.WriteFile(agentFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	// The production fence lease: a leader gap under -race and load must
	// not fail the jobs evaluation_service_restarted (as in
	// TestClusterEval_OwnerKilledCancelsJobAndStopsTasks).
	c := testcluster.StartEval(t, testcluster.EvalOptions{NATSNodes: 1, Coordinators: 1, Workers: []string{"w0"}, Capacity: 2,
		AgentFiles: map[string]string{"slotted": agentFile},
		Timing:     timing(func(t *coordinator.Timing) { t.FenceLease = 5 * time.Second })})
	cl := c.Client()
	w := c.Worker(0)

	// Owner death with both slots' calls on the wire.
	lease, err := cl.KeepOwner("cli-slots", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	opts := evalengine.DefaultOptions()
	opts.CaseTimeoutMS = 60_000
	j, err := cl.Submit(context.Background(), scope, api.SubmitRequest{Set: slotSet("slots-owner", "hang-0", "hang-1", "hang-2"), Agent: "slotted",
		Options: mustJSON(t, opts), Owner: "cli-slots", OwnerTTLMS: 1000})
	if err != nil {
		t.Fatal(err)
	}
	onWire := waitEach(t, p.arrived, 2, 30*time.Second, "calls on the wire")
	testutil.WaitFor(t, 10*time.Second, "the third task held", func() bool { return w.Running() == 3 })
	lease.Stop()
	stopped := time.Now()
	gone := waitEach(t, p.gone, 2, 15*time.Second, "calls given up after the owner's death")
	t.Logf("calls %v on the wire, given up %v after the owner's last renewal", onWire, time.Since(stopped).Round(time.Millisecond))
	c.WaitJob(cl, scope, j.JobID, 15*time.Second, "cancelled")
	if got, _ := cl.Status(context.Background(), scope, j.JobID); got.Reason != evalrecord.ReasonOwnerLost {
		t.Fatalf("reason %q, want %q", got.Reason, evalrecord.ReasonOwnerLost)
	}
	testutil.WaitFor(t, 10*time.Second, "w0 idle", func() bool { return w.Running() == 0 })
	if n := p.callsOf("hang-0") + p.callsOf("hang-1") + p.callsOf("hang-2"); n != 2 || len(gone) != 2 {
		t.Fatalf("%d calls of the owner's job, %d given up: want the two running tasks' calls, each given up once", n, len(gone))
	}

	// The same slots (replaced where the kill spent them) run on: a call
	// cut off by its case timeout beside ten that pass.
	opts.CaseTimeoutMS = 3_000
	inputs := []string{"hello-0", "hello-1", "hang-3"}
	for i := 2; i < 10; i++ {
		inputs = append(inputs, fmt.Sprintf("hello-%d", i))
	}
	j, err = cl.Submit(context.Background(), scope, api.SubmitRequest{Set: slotSet("slots-after", inputs...), Agent: "slotted", Options: mustJSON(t, opts)})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitJob(cl, scope, j.JobID, 60*time.Second, "completed")
	doc2, err := cl.Result(context.Background(), scope, j.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var res evalengine.Result
	if err := json.Unmarshal(doc2, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Cases) != len(inputs) {
		t.Fatalf("%d cases, want %d", len(res.Cases), len(inputs))
	}
	for i, in := range inputs {
		cr := res.Cases[i]
		if len(cr.Samples) != 1 {
			t.Fatalf("case %s: %d samples", in, len(cr.Samples))
		}
		s := cr.Samples[0]
		if in == "hang-3" {
			if s.Error != evalengine.TagTimeout {
				t.Errorf("case %s: error %q, want %q", in, s.Error, evalengine.TagTimeout)
			}
		} else if !s.Passed || s.Error != "" {
			t.Errorf("case %s: passed %v, error %q", in, s.Passed, s.Error)
		}
		if n := p.callsOf(in); n != 1 {
			t.Errorf("case %s: %d provider calls, want 1", in, n)
		}
	}
	waitEach(t, p.gone, 1, 10*time.Second, "the timed-out call given up")
}
