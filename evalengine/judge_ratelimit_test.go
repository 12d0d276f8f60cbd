package evalengine_test

import (
	"context"
	"encoding/json"
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

// countingGemini is a fake Gemini endpoint on 127.0.0.1 that records when
// each request arrived and how many were in flight at once, and answers
// 429 (Retry-After 1) to the first throttle requests.
type countingGemini struct {
	*httptest.Server
	mu       sync.Mutex
	arrivals []time.Time
	inFlight int
	maxIn    int
	throttle int
	n429     int
}

func newCountingGemini(t *testing.T, throttle int) *countingGemini {
	t.Helper()
	s := &countingGemini{throttle: throttle}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

func (s *countingGemini) handle(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.arrivals = append(s.arrivals, time.Now())
	s.inFlight++
	s.maxIn = max(s.maxIn, s.inFlight)
	throttled := s.n429 < s.throttle
	if throttled {
		s.n429++
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if throttled {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"code":429,"message":"quota"}}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": []any{map[string]any{"text": `{"score":1,"rationale":"ok"}`}}},
			"finishReason": "STOP",
		}},
		"modelVersion": "gemini-3.1-flash-lite-001",
	})
}

func (s *countingGemini) snapshot() (arrivals []time.Time, maxIn, n429 int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.arrivals...), s.maxIn, s.n429
}

// TestLLMJudge_RateLimitSharedByRun runs an eval whose two llm_judge
// metrics (one judge each) call one endpoint with a provider_config
// rate_limit: both judges go through one limiter, the endpoint never has
// more than concurrent_requests calls in flight, the calls are spread at
// requests_per_minute, and a 429 delays a call instead of failing it.
func TestLLMJudge_RateLimitSharedByRun(t *testing.T) {
	const (
		rpm        = 300 // 5 a second, burst 5
		concurrent = 2
		cases      = 6
		judges     = 2
	)
	srv := newCountingGemini(t, 1)
	limits := evalengine.NewRateLimiters()
	env := &evalengine.ModelEnv{Provider: evalengine.ProviderGemini, Model: "gemini-3.1-flash-lite", ProviderConfig: map[string]any{
		"base_url": srv.URL, "api_key_env": "", "max_attempts": 1,
		"rate_limit": map[string]any{"requests_per_minute": float64(rpm), "concurrent_requests": float64(concurrent)},
	}, RateLimits: limits}
	var crit []string
	for i := range judges {
		crit = append(crit, fmt.Sprintf(`{"id":"j%d","criterion":"llm_judge","threshold":0.5,"config":{"rubric":"r","rubric_id":"r%d","rubric_version":"1"}}`, i, i))
	}
	metrics, err := evalengine.ParseCriteriaWithOptions([]byte(`{"criteria":[`+strings.Join(crit, ",")+`]}`), evalengine.CriteriaOptions{Judge: env})
	if err != nil {
		t.Fatal(err)
	}
	var cs []string
	for i := range cases {
		cs = append(cs, fmt.Sprintf(`{"id":"c%d","turns":[{"input":"hi %d","expected":"hi %d"}]}`, i, i, i))
	}
	set := mustSet(t, `{"id":"s","version":"1","cases":[`+strings.Join(cs, ",")+`]}`)
	res, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: &fakeAdapter{echo: true}, Metrics: metrics,
		Options: opts(func(o *evalengine.Options) { o.Concurrency = cases }),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Cases {
		for _, s := range c.Samples {
			for _, cr := range s.Criteria {
				if cr.Status != "ok" || !cr.Passed {
					t.Fatalf("case %s criterion %s: %+v (a throttled call must wait, not fail)", c.CaseID, cr.MetricID, cr)
				}
			}
		}
	}

	arrivals, maxIn, n429 := srv.snapshot()
	calls := cases * judges
	if len(arrivals) != calls+n429 || n429 != 1 {
		t.Fatalf("the endpoint saw %d requests (%d answered 429), want %d + 1", len(arrivals), n429, calls)
	}
	if maxIn > concurrent {
		t.Fatalf("%d calls in flight at once, over concurrent_requests %d", maxIn, concurrent)
	}
	ls := limits.Limiters()
	if len(ls) != 1 {
		t.Fatalf("%d limiters for one endpoint, want 1 shared by both judges", len(ls))
	}
	if st := ls[0].Stats(); st.Admitted != int64(len(arrivals)) || st.Throttled != 1 {
		t.Fatalf("limiter %+v: every request (%d) goes through the one limiter", st, len(arrivals))
	}
	// A token bucket of rpm/60 a second with a burst of one second admits
	// at most burst+k requests in any k seconds; the 429's Retry-After
	// pauses it further. So the requests spread over at least
	// (n-burst)/rate seconds. Load only stretches this (a lower bound);
	// 200 ms allow for one request reaching the server late.
	sort.Slice(arrivals, func(i, j int) bool { return arrivals[i].Before(arrivals[j]) })
	rate, burst := float64(rpm)/60, rpm/60
	want := time.Duration(float64(len(arrivals)-burst-1) / rate * float64(time.Second))
	if got := arrivals[len(arrivals)-1].Sub(arrivals[0]); got < want-200*time.Millisecond {
		t.Fatalf("%d requests within %v, the limit allows them no sooner than %v", len(arrivals), got, want)
	}
}

// TestLLMJudge_RateLimitBadInput: a bad provider_config.rate_limit is
// invalid_provider_config naming the key, for the judge and the LLM user,
// and builds nothing.
func TestLLMJudge_RateLimitBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		rl   any
		key  string
	}{
		{"not an object", "fast", "provider_config.rate_limit"},
		{"zero", map[string]any{"requests_per_minute": 0}, "provider_config.rate_limit.requests_per_minute"},
		{"over the bound", map[string]any{"concurrent_requests": 10_001}, "provider_config.rate_limit.concurrent_requests"},
		{"fraction", map[string]any{"tokens_per_minute": 1.5}, "provider_config.rate_limit.tokens_per_minute"},
		{"unknown key", map[string]any{"requests_per_hour": 5}, "provider_config.rate_limit.requests_per_hour"},
		{"empty", map[string]any{}, "provider_config.rate_limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := evalengine.ParseJudgeConfig(map[string]any{"rubric": "r", "rubric_id": "a", "rubric_version": "1",
				"provider_config": map[string]any{"rate_limit": tc.rl}})
			assertJudgeErr(t, err, evalengine.JudgeInvalidProviderConfig)
			if !strings.Contains(err.Error(), tc.key+":") {
				t.Fatalf("error %q does not name %s", err, tc.key)
			}
			limits := evalengine.NewRateLimiters()
			env := evalengine.ModelEnv{Provider: evalengine.ProviderGemini, ProviderConfig: map[string]any{"api_key_env": "", "rate_limit": tc.rl}, RateLimits: limits}
			if _, err := evalengine.NewJudge(baseJudgeConfig(), env); err == nil || !strings.Contains(err.Error(), tc.key+":") {
				t.Fatalf("judge: %v, want an error naming %s", err, tc.key)
			}
			_, err = evalengine.NewLLMUser(evalengine.LLMUserConfig{Persona: "p", Goal: "g"}, env)
			if evalengine.ErrorCode(err) != evalengine.CodeLLMUser || !strings.Contains(err.Error(), tc.key+":") {
				t.Fatalf("user: %v, want %s naming %s", err, evalengine.CodeLLMUser, tc.key)
			}
			if n := len(limits.Limiters()); n != 0 {
				t.Fatalf("a refused config made %d limiters", n)
			}
		})
	}

	// One endpoint, two different limits: the second is refused.
	limits := evalengine.NewRateLimiters()
	env := func(rpm int) evalengine.ModelEnv {
		return evalengine.ModelEnv{Provider: evalengine.ProviderGemini, RateLimits: limits, RateLimitSource: fmt.Sprintf("config-%d", rpm), ProviderConfig: map[string]any{
			"api_key_env": "", "base_url": "http://127.0.0.1:1", "rate_limit": map[string]any{"requests_per_minute": rpm}}}
	}
	if _, err := evalengine.NewJudge(baseJudgeConfig(), env(60)); err != nil {
		t.Fatal(err)
	}
	if _, err := evalengine.NewLLMUser(evalengine.LLMUserConfig{Persona: "p", Goal: "g"}, env(60)); err != nil {
		t.Fatalf("the same limit for the simulator: %v", err)
	}
	_, err := evalengine.NewJudge(baseJudgeConfig(), env(120))
	// The error names both declarations and both limits.
	if err == nil || !strings.Contains(err.Error(), "provider_config.rate_limit in config-120 differs from config-60 (requests_per_minute=120 vs requests_per_minute=60) for endpoi") {
		t.Fatalf("a second limit for one endpoint: %v", err)
	}
	if n := len(limits.Limiters()); n != 1 {
		t.Fatalf("%d limiters, want 1", n)
	}
}
