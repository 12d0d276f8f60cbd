package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
)

// limitedOpenAI is a fake OpenAI endpoint on 127.0.0.1 holding its own
// limit (a token bucket of rpm with two seconds of burst, as
// bench/openaifake): above it, it answers 429 with Retry-After 1. It
// records when every request arrived.
type limitedOpenAI struct {
	*httptest.Server
	bucket *rate.Limiter

	mu        sync.Mutex
	arrivals  []time.Time
	throttled int
}

func newLimitedOpenAI(t *testing.T, rpm int) *limitedOpenAI {
	perSec := float64(rpm) / 60
	s := &limitedOpenAI{bucket: rate.NewLimiter(rate.Limit(perSec), int(2*perSec))}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		ok := s.bucket.Allow()
		s.mu.Lock()
		s.arrivals = append(s.arrivals, time.Now())
		if !ok {
			s.throttled++
		}
		s.mu.Unlock()
		if !ok {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// promSum sums the samples of metric (any labels) on a process's
// /metrics; ok is false when it cannot be read or has no such sample.
func promSum(addr, metric string) (sum float64, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum, ok = sum+v, true
		}
	}
	return sum, ok
}

// TestClusterEval_RateLimitFleetThroughBinaries runs the fleet-wide rate
// limit through the built binary: an `adk coordinator` and two `adk
// worker` processes whose agent declares rate_limit.requests_per_minute
// against a fake that answers 429 above that limit. The job passes with
// no sample failed, the fake sees no more calls in any stretch than the
// limit allows, and both workers' adk_ratelimit_* metrics show a share
// of the limit and the calls they were granted. (make bench-ratelimit
// measures the same path at length with 3 coordinators and 4 workers.)
func TestClusterEval_RateLimitFleetThroughBinaries(t *testing.T) {
	const (
		rpm     = 300 // 5 a second
		samples = 30
	)
	fake := newLimitedOpenAI(t, rpm)
	adkBinary(t) // built (once per test binary) before the clock starts
	began := time.Now()
	dir := t.TempDir()
	agent := writeFile(t, dir, "agent.json", `{"schema_version":1,"name":"rl","model":{"provider":"openai","model":"fake","base_url":"`+fake.URL+
		`/v1","max_attempts":1,"timeout_ms":30000,"rate_limit":{"requests_per_minute":`+strconv.Itoa(rpm)+`}}}`)
	var set strings.Builder
	set.WriteString(`{"schema_version":2,"id":"rl","version":"1","cases":[`)
	for i := range samples {
		if i > 0 {
			set.WriteByte(',')
		}
		fmt.Fprintf(&set, `{"id":"c%d","turns":[{"id":"t","input":"hi %d","expected_response":"ok"}]}`, i, i)
	}
	set.WriteString("]}")
	writeFile(t, dir, "set.json", set.String())

	url := startTestNATS(t)
	procs := newFleet(t)
	coordMetrics := freeAddrs(t, 1)[0]
	procs.start("c1", "coordinator", "--id", "c1", "--data-dir", filepath.Join(dir, "c1"), "--raft-addr", "127.0.0.1:0",
		"--nats", url, "--bootstrap", "--workers", "w1,w2", "--metrics-addr", coordMetrics, "--log-level", "error")
	metrics := freeAddrs(t, 2)
	workers := map[string]*adkProc{}
	for i, id := range []string{"w1", "w2"} {
		workers[id] = procs.start(id, "worker", "--id", id, "--nats", url, "--capacity", "4", "--agent", "rl="+agent,
			"--metrics-addr", metrics[i], "--log-level", "error")
	}
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl := client.New(nc, 2*time.Second)
	// Both workers hold a share before the job, so both run its tasks.
	testutil.WaitFor(t, 30*time.Second, "the coordinator and a share of the limit on both workers", func() bool {
		for id, p := range workers {
			if p.exited() {
				t.Fatalf("%s exited: %v\n%s", id, p.err, p.stderr.String())
			}
		}
		if _, err := cl.Capabilities(context.Background()); err != nil {
			return false
		}
		total := 0.0
		for _, addr := range metrics {
			share, ok := promSum(addr, "adk_ratelimit_requests_per_minute")
			if !ok || share <= 0 || share > rpm {
				return false
			}
			total += share
		}
		return total <= rpm
	})

	t.Logf("fleet up with shares: %v", time.Since(began))
	r := runADK(t, dir, nil, "eval", "run", "--cluster", url, "--agent", "rl", "--eval-set", "set.json", "--concurrency", "8")
	if r.code != exitOK {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	res, err := evalengine.DecodeResult([]byte(r.stdout))
	if err != nil || !res.Passed || len(res.Cases) != samples {
		t.Fatalf("result: err %v\n%s", err, r.stdout)
	}
	for _, c := range res.Cases {
		if !c.Passed {
			t.Fatalf("case %s failed (%s): a throttled call must wait, not fail", c.CaseID, c.Status)
		}
	}

	t.Logf("job done: %v", time.Since(began))
	fake.mu.Lock()
	calls := append([]time.Time(nil), fake.arrivals...)
	throttled := fake.throttled
	fake.mu.Unlock()
	sort.Slice(calls, func(i, j int) bool { return calls[i].Before(calls[j]) })
	t.Logf("%d calls, %d answered 429, over %v", len(calls), throttled, calls[len(calls)-1].Sub(calls[0]))
	if len(calls)-throttled != samples {
		t.Fatalf("%d calls served for %d samples", len(calls)-throttled, samples)
	}
	// The fake's own limit: rpm plus two seconds of burst. Counted over
	// every call that reached it (429s included), in every stretch; one
	// call of slack for a request that reached the server late.
	perSec := float64(rpm) / 60
	for i := range calls {
		for k := i + 1; k < len(calls); k++ {
			if n, allowed := float64(k-i+1), 2*perSec+perSec*calls[k].Sub(calls[i]).Seconds(); n > allowed+1 {
				t.Fatalf("calls %d..%d: %v in %v, over the limit (%.1f)", i, k, n, calls[k].Sub(calls[i]), allowed)
			}
		}
	}
	if throttled*20 > len(calls) {
		t.Fatalf("%d of %d calls answered 429: the workers did not share the limit", throttled, len(calls))
	}
	var granted float64
	for i, addr := range metrics {
		g, ok := promSum(addr, "adk_ratelimit_granted_total")
		if !ok || g < 1 {
			t.Fatalf("worker w%d: adk_ratelimit_granted_total %v (present %v), want its calls counted", i+1, g, ok)
		}
		granted += g
	}
	if int(granted) != len(calls) {
		t.Fatalf("the workers granted %v calls, the fake saw %d", granted, len(calls))
	}
	// The coordinator's view of the limit (README: fleet series): both
	// workers share it; with the job done neither has calls, and the
	// demand series say so within a heartbeat interval or two.
	if n, ok := promSum(coordMetrics, "adk_ratelimit_fleet_workers"); !ok || n != 2 {
		t.Fatalf("adk_ratelimit_fleet_workers %v (present %v), want 2", n, ok)
	}
	testutil.WaitFor(t, 30*time.Second, "the fleet's demand series back at 0", func() bool {
		a, okA := promSum(coordMetrics, "adk_ratelimit_fleet_active_workers")
		w, okW := promSum(coordMetrics, "adk_ratelimit_fleet_waiting")
		return okA && okW && a == 0 && w == 0
	})
}

// TestClusterEval_RateLimitLeaderKilledThroughBinaries: the fleet's rate
// limit holds across a leader's kill -9, with the built binaries: three
// `adk coordinator` processes and two `adk worker` processes whose agent
// declares requests_per_minute 600 and concurrent_requests 2 for a fake
// endpoint. The leader process is killed with SIGKILL once the job is
// under way; the job still ends, and the endpoint never sees more
// than 2 calls at once nor more calls in any stretch than the limit
// allows: the new leader, which cannot know what its predecessor granted
// last, grows no share before it does. (make chaos-procs kills leaders at
// random, some runs under a rate limit; this holds one kill to the
// limit's tight bounds.) It once ended with "adk: timeout" 30 s after the
// kill, the job long completed: the CLI's held status call was on the
// killed coordinator
// (TestClusterEval_StatusTakenByADeadCoordinatorIsAskedAgain).
//
// What the kill may cost is the design's, not a pass of every sample: a
// task the killed leader assigned in Raft but had not yet stored in the
// task stream is failed worker_lost by its successor (2 of 10 runs at load
// 11-19 under -race, 2026-12-06: one sample, ~20 s after the kill, two
// DispatchGrace periods; the leader logs "tasks out of the queue and
// unreported"), and a leader gap over the workers' 5 s fence fails the
// tasks they held the same way (1 of the 10: 8 samples). So the test holds what the
// design guarantees instead: every sample passed or failed worker_lost,
// no input reached the endpoint twice (at most once), and every passed
// sample's call did; leaders flapping past the fence (a full restart)
// may fail the job, with that typed reason only.
func TestClusterEval_RateLimitLeaderKilledThroughBinaries(t *testing.T) {
	const (
		rpm, conc = 600, 2 // 10 a second, 2 at once
		samples   = 40
		hold      = 150 * time.Millisecond
		capacity  = 4
	)
	var mu sync.Mutex
	var arrivals []time.Time
	inputs := map[string]int{} // calls per sample input ("hi N")
	inFlight, peak := 0, 0
	input := regexp.MustCompile(`hi [0-9]+`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		inputs[input.FindString(string(body))]++
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		time.Sleep(hold) // the model's latency: calls overlap unless limited
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	calls := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), arrivals...)
	}
	adkBinary(t)
	began := time.Now()
	dir := t.TempDir()
	agent := writeFile(t, dir, "agent.json", `{"schema_version":1,"name":"rl","model":{"provider":"openai","model":"fake","base_url":"`+srv.URL+
		`/v1","max_attempts":1,"timeout_ms":60000,"rate_limit":{"requests_per_minute":`+strconv.Itoa(rpm)+`,"concurrent_requests":`+strconv.Itoa(conc)+`}}}`)
	var set strings.Builder
	set.WriteString(`{"schema_version":2,"id":"rlk","version":"1","cases":[`)
	for i := range samples {
		if i > 0 {
			set.WriteByte(',')
		}
		fmt.Fprintf(&set, `{"id":"c%d","turns":[{"id":"t","input":"hi %d","expected_response":"ok"}]}`, i, i)
	}
	set.WriteString("]}")
	writeFile(t, dir, "set.json", set.String())

	url := startTestNATS(t)
	procs := newFleet(t)
	// The processes log at info: a failure, or a sample lost, shows what
	// each saw (a task failed as lost and why, a fence, a full restart).
	var costly bool
	defer func() {
		if t.Failed() || costly {
			for _, p := range procs.procs {
				t.Logf("%s stderr:\n%s", p.name, p.stderr.String())
			}
		}
	}()
	ids := []string{"c1", "c2", "c3"}
	addrs := freeAddrs(t, 3)
	var peers []string
	for i, id := range ids {
		peers = append(peers, id+"="+addrs[i])
	}
	coords := map[string]*adkProc{}
	for i, id := range ids {
		coords[id] = procs.start(id, "coordinator", "--id", id, "--data-dir", filepath.Join(dir, id), "--raft-addr", addrs[i],
			"--bootstrap", "--peers", strings.Join(peers, ","), "--nats", url, "--workers", "w1,w2", "--log-level", "info")
	}
	for _, id := range []string{"w1", "w2"} {
		procs.start(id, "worker", "--id", id, "--nats", url, "--capacity", strconv.Itoa(capacity), "--agent", "rl="+agent, "--log-level", "info")
	}
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl := client.New(nc, 2*time.Second)
	var leader string
	testutil.WaitFor(t, 60*time.Second, "three voters and a leader", func() bool {
		for id, p := range coords {
			if p.exited() {
				t.Fatalf("%s exited: %v\n%s", id, p.err, p.stderr.String())
			}
		}
		var voters int
		leader, voters = fleetState(cl)
		return leader != "" && voters == 3
	})
	t.Logf("formed: %v", time.Since(began))

	type runResult struct{ r execResult }
	done := make(chan runResult, 1)
	go func() {
		done <- runResult{runADK(t, dir, nil, "eval", "run", "--cluster", url, "--agent", "rl", "--eval-set", "set.json", "--concurrency", "16")}
	}()
	testutil.WaitFor(t, 60*time.Second, "the job under way", func() bool { return len(calls()) >= 8 })
	if l, _ := fleetState(cl); l != "" {
		leader = l
	}
	killedAt := time.Now()
	coords[leader].kill(t)
	t.Logf("killed leader %s after %d calls: %v", leader, len(calls()), time.Since(began))
	var r execResult
	select {
	case rr := <-done:
		r = rr.r
	case <-time.After(120 * time.Second):
		t.Fatal("the job did not end")
	}
	t.Logf("job done: %v", time.Since(began))
	var passed, lost int
	var passedInputs []string
	restarted := r.code == exitError && strings.Contains(r.stderr, evalrecord.ReasonServiceRestarted)
	switch {
	case restarted:
		// Leaders flapping for longer than the fence (seen once at load
		// 19: elections among the two survivors for 40 s) are a full
		// restart by design: the job fails with that typed reason. The
		// limit and at most once still hold for the calls made.
		t.Logf("the job failed %s (a leader gap over the fence lease, by design)", evalrecord.ReasonServiceRestarted)
	case r.code != exitOK && r.code != exitFailed:
		t.Fatalf("exit %d stderr %q; samples not passed: %s", r.code, r.stderr, notPassed(r.stdout))
	}
	res, err := evalengine.DecodeResult([]byte(r.stdout))
	if err != nil && !restarted {
		t.Fatalf("exit %d, no result: %v\n%.300s", r.code, err, r.stdout)
	}
	for _, c := range resultCases(res) {
		for _, s := range c.Samples {
			switch {
			case s.Passed:
				passed++
				passedInputs = append(passedInputs, "hi "+strings.TrimPrefix(s.CaseID, "c"))
			case s.Error == evalengine.TagWorkerLost:
				lost++
			default:
				t.Fatalf("sample %s %s %q: only worker_lost may come of a leader's kill; not passed: %s", s.CaseID, s.Status, s.Error, notPassed(r.stdout))
			}
		}
	}
	if !restarted && (passed+lost != samples || (lost == 0) != (r.code == exitOK)) {
		t.Fatalf("exit %d: %d samples passed, %d worker_lost of %d", r.code, passed, lost, samples)
	}
	costly = lost > 0 || restarted
	if lost > 0 {
		t.Logf("%d samples failed worker_lost (the design's cost of the kill): %s", lost, notPassed(r.stdout))
	}
	at := calls()
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	after := 0
	for _, c := range at {
		if c.After(killedAt) {
			after++
		}
	}
	mu.Lock()
	p := peak
	twice := map[string]int{}
	for in, n := range inputs {
		if n != 1 {
			twice[in] = n
		}
	}
	missing := []string{}
	for _, in := range passedInputs {
		if inputs[in] == 0 {
			missing = append(missing, in)
		}
	}
	mu.Unlock()
	t.Logf("%d calls (%d after the kill), at most %d at once", len(at), after, p)
	if len(twice) > 0 || len(missing) > 0 {
		t.Fatalf("calls per input other than one: %v; passed samples whose input never reached the endpoint: %v", twice, missing)
	}
	if len(at) < passed || len(at) > samples || after == 0 && !restarted {
		t.Fatalf("%d calls for %d passed of %d samples, %d after the kill", len(at), passed, samples, after)
	}
	if p > conc {
		t.Fatalf("%d calls at once, the limit is %d: the grants outlived the leader's kill over the limit", p, conc)
	}
	// Every stretch within the limit's rate plus the fleet's bursts (one
	// second of the limit together) and one call of slack.
	perSec := float64(rpm) / 60
	for i := range at {
		for k := i + 1; k < len(at); k++ {
			if n, allowed := float64(k-i+1), perSec+perSec*at[k].Sub(at[i]).Seconds(); n > allowed+1 {
				t.Fatalf("calls %d..%d: %v in %v, over the limit (%.1f)", i, k, n, at[k].Sub(at[i]), allowed)
			}
		}
	}
}

// resultCases is a decoded result's cases; none without a result.
func resultCases(res *evalengine.Result) []evalengine.CaseResult {
	if res == nil {
		return nil
	}
	return res.Cases
}

// notPassed lists a result document's samples that did not pass, each
// with its status and error: what a failed fleet test needs to say (the
// whole document is too long to read in a log).
func notPassed(stdout string) string {
	res, err := evalengine.DecodeResult([]byte(stdout))
	if err != nil {
		return fmt.Sprintf("(no result: %v) %.300s", err, stdout)
	}
	var b strings.Builder
	for _, c := range res.Cases {
		for _, s := range c.Samples {
			if !s.Passed {
				fmt.Fprintf(&b, "[%s %s %q] ", s.CaseID, s.Status, s.Error)
			}
		}
	}
	return b.String()
}
