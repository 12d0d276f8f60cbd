package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
)

// TestEvalRun_RateLimitThroughBinary: `adk eval run` with an agent whose
// model declares rate_limit keeps its calls under the limit, retries a
// 429 (with its Retry-After) instead of failing the sample, and refuses a
// bad limit with invalid_agent_config naming the key.
func TestEvalRun_RateLimitThroughBinary(t *testing.T) {
	const cases, rpm = 8, 240 // 4/s, a burst of 4
	var mu sync.Mutex
	var at []time.Time
	throttled := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		first := !throttled
		throttled = true
		at = append(at, time.Now())
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	agent := func(limit string) string {
		return `{"schema_version":1,"name":"a","model":{"provider":"openai","model":"fake","base_url":"` + srv.URL +
			`/v1","max_attempts":1,"rate_limit":` + limit + `}}`
	}
	writeFile(t, dir, "limited.json", agent(fmt.Sprintf(`{"requests_per_minute":%d,"concurrent_requests":2}`, rpm)))
	var set strings.Builder
	set.WriteString(`{"schema_version":2,"id":"rl","version":"1","cases":[`)
	for i := range cases {
		if i > 0 {
			set.WriteByte(',')
		}
		fmt.Fprintf(&set, `{"id":"c%d","turns":[{"id":"t","input":"hi","expected_response":"ok"}]}`, i)
	}
	set.WriteString("]}")
	writeFile(t, dir, "set.json", set.String())

	r := runADK(t, dir, nil, "eval", "run", "--config", "limited.json", "--eval-set", "set.json", "--concurrency", "8")
	if r.code != exitOK {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	res, err := evalengine.DecodeResult([]byte(r.stdout))
	if err != nil || !res.Passed {
		t.Fatalf("result passed=%v err=%v", res != nil && res.Passed, err)
	}
	mu.Lock()
	calls := append([]time.Time(nil), at...)
	mu.Unlock()
	sort.Slice(calls, func(i, j int) bool { return calls[i].Before(calls[j]) })
	if len(calls) != cases+1 {
		t.Fatalf("%d calls for %d samples and one 429", len(calls), cases)
	}
	// After the 429 everyone waited its Retry-After (1 s) ...
	if gap := calls[1].Sub(calls[0]); gap < 900*time.Millisecond {
		t.Fatalf("next call %v after the 429 (Retry-After: 1)", gap)
	}
	// ... and then went at most at the limit: a burst of 4, then 4/s.
	perSec := float64(rpm) / 60
	for i := 1; i < len(calls); i++ {
		for k := i + 1; k < len(calls); k++ {
			if n, allowed := float64(k-i+1), perSec+perSec*calls[k].Sub(calls[i]).Seconds(); n > allowed+1 {
				t.Fatalf("calls %d..%d: %v in %v, over the limit (%.1f)", i, k, n, calls[k].Sub(calls[i]), allowed)
			}
		}
	}

	for limit, key := range map[string]string{
		`{"requests_per_minute":0}`:        "rate_limit.requests_per_minute",
		`{"concurrent_requests":"many"}`:   "rate_limit.concurrent_requests",
		`{"tokens_per_minute":2000000000}`: "rate_limit.tokens_per_minute",
	} {
		writeFile(t, dir, "bad.json", agent(limit))
		r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json")
		oneErrorLine(t, r, "invalid_agent_config")
		if !strings.Contains(r.stderr, key) {
			t.Errorf("%s: stderr %q does not name %s", limit, r.stderr, key)
		}
	}
}
