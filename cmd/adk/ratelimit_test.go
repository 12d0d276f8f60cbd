package main

import (
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

// TestEvalRun_RateLimitSharedByAgentAndJudge: an agent and its LLM judge
// calling one endpoint (provider, base URL, model) share one limiter in
// `adk eval run`: their calls together never exceed the endpoint's
// concurrent_requests or its rate (each with a limiter of its own would
// take the whole limit), the run's stderr sums the limiter up, and a judge
// declaring a different limit for the endpoint is refused naming both
// files.
func TestEvalRun_RateLimitSharedByAgentAndJudge(t *testing.T) {
	const cases, rpm, conc = 6, 300, 2 // 5/s, a burst of 5
	var mu sync.Mutex
	var at []time.Time
	inFlight, maxInFlight, judged := 0, 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		at = append(at, time.Now())
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		judge := strings.Contains(string(body), "polite and correct")
		if judge {
			judged++
		}
		mu.Unlock()
		// Long enough that calls overlap: a second limiter would show
		// as more than conc calls in flight.
		time.Sleep(60 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		text := "ok"
		if judge {
			text = `{\"score\":0.9,\"rationale\":\"fine\"}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"`+text+`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	limit := fmt.Sprintf(`{"requests_per_minute":%d,"concurrent_requests":%d}`, rpm, conc)
	writeFile(t, dir, "agent.json", `{"schema_version":1,"name":"a","model":{"provider":"openai","model":"fake","base_url":"`+srv.URL+
		`/v1","max_attempts":1,"rate_limit":`+limit+`}}`)
	judge := func(limit string) string {
		return `{"provider":"openai","model":"fake","base_url":"` + srv.URL + `/v1","api_key_env":"ADK_TEST_JUDGE_KEY","rate_limit":` + limit + `}`
	}
	writeFile(t, dir, "judge.json", judge(limit))
	writeFile(t, dir, "criteria.json", `[{"id":"q","criterion":"llm_judge","threshold":0.5,"config":{"rubric":"Is the answer polite and correct?","rubric_id":"polite","rubric_version":"1"}}]`)
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
	env := []string{"ADK_TEST_JUDGE_KEY=k-test"}

	r := runADK(t, dir, env, "eval", "run", "--config", "agent.json", "--eval-set", "set.json", "--criteria", "criteria.json",
		"--judge-config", "judge.json", "--concurrency", "8")
	if r.code != exitOK {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	mu.Lock()
	calls := append([]time.Time(nil), at...)
	peak, nJudge := maxInFlight, judged
	mu.Unlock()
	if len(calls) != 2*cases || nJudge != cases {
		t.Fatalf("%d calls (%d judge) for %d samples", len(calls), nJudge, cases)
	}
	if peak > conc {
		t.Fatalf("%d calls in flight at once, the endpoint allows %d", peak, conc)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].Before(calls[j]) })
	perSec := float64(rpm) / 60
	for i := range calls {
		for k := i + 1; k < len(calls); k++ {
			if n, allowed := float64(k-i+1), perSec+perSec*calls[k].Sub(calls[i]).Seconds(); n > allowed+1 {
				t.Fatalf("calls %d..%d: %v in %v, over the endpoint's limit (%.1f)", i, k, n, calls[k].Sub(calls[i]), allowed)
			}
		}
	}
	want := fmt.Sprintf("adk: rate limit openai %s/v1 fake: granted %d, throttled 0 (429), waited ", srv.URL, 2*cases)
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q lacks the limiter's totals %q", r.stderr, want)
	}

	// A different limit for the endpoint in the judge config: refused,
	// naming both declarations.
	writeFile(t, dir, "judge.json", judge(`{"requests_per_minute":60}`))
	r = runADK(t, dir, env, "eval", "run", "--config", "agent.json", "--eval-set", "set.json", "--criteria", "criteria.json", "--judge-config", "judge.json")
	if r.code != exitError || !strings.Contains(r.stderr, "--judge-config judge.json") || !strings.Contains(r.stderr, `--config agent.json agent "a"`) {
		t.Fatalf("conflicting limits: exit %d stderr %q", r.code, r.stderr)
	}
}

// TestEvalRun_RateLimitThroughUserSimulator: the LLM user simulator of
// --user-simulator-config calls its endpoint through the process's
// limiter registry: four conversation_scenario cases run at once, yet
// with the simulator's rate_limit.concurrent_requests 1 never more than
// one of its calls is in flight (without the limit, the control run,
// they overlap), the run's stderr sums the simulator's limiter up, and an
// agent declaring a different limit for the same endpoint is refused
// naming both files.
func TestEvalRun_RateLimitThroughUserSimulator(t *testing.T) {
	const cases = 4
	var mu sync.Mutex
	inFlight, peak, calls := 0, 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		calls++
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		// Long enough that the cases' simulator calls overlap unless
		// one limiter holds them to one at a time.
		time.Sleep(60 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		msg, _ := json.Marshal(map[string]any{"done": false, "message": "And what should I wear?"})
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "u", "model": "sim", "choices": []any{map[string]any{
			"finish_reason": "stop", "message": map[string]any{"content": string(msg)}}}})
	}))
	defer srv.Close()
	reset := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		p, c := peak, calls
		peak, calls = 0, 0
		return p, c
	}
	dir := t.TempDir()
	writeFile(t, dir, "agent.json", chattyAgent)
	var set strings.Builder
	set.WriteString(`{"eval_set_id":"sims","eval_cases":[`)
	for i := range cases {
		if i > 0 {
			set.WriteByte(',')
		}
		fmt.Fprintf(&set, `{"eval_id":"s%d","conversation_scenario":{"starting_prompt":"Weather in Oslo?","conversation_plan":"Ask about the weather, then what to wear.","user_persona":"NOVICE"}}`, i)
	}
	set.WriteString("]}")
	writeFile(t, dir, "sims.evalset.json", set.String())
	// Three invocations a case: the starting prompt and two simulated.
	writeFile(t, dir, "test_config.json", `{"criteria":{"response_match_score":0.5},"user_simulator_config":{"max_allowed_invocations":3}}`)
	sim := func(limit string) string {
		s := `{"provider":"openai","model":"sim","base_url":"` + srv.URL + `/v1","api_key_env":"SIM_KEY"`
		if limit != "" {
			s += `,"rate_limit":` + limit
		}
		return s + "}"
	}
	env := []string{"SIM_KEY=sk-sim-secret-123"}
	run := func() execResult {
		return runADK(t, dir, env, "eval", "run", "--config", "agent.json", "--eval-set", "sims.evalset.json",
			"--user-simulator-config", "usersim.json", "--concurrency", "8")
	}

	// The control: no limit, the cases' simulator calls overlap.
	writeFile(t, dir, "usersim.json", sim(""))
	if r := run(); r.code == exitError {
		t.Fatalf("control: exit %d stderr %q", r.code, r.stderr)
	}
	if p, c := reset(); c != 2*cases || p < 2 {
		t.Fatalf("control: %d simulator calls, at most %d at once: the test cannot tell one limiter from none", c, p)
	}

	writeFile(t, dir, "usersim.json", sim(`{"requests_per_minute":6000,"concurrent_requests":1}`))
	r := run()
	if r.code == exitError {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if p, c := reset(); c != 2*cases || p != 1 {
		t.Fatalf("%d simulator calls, %d at once: want %d, one at a time", c, p, 2*cases)
	}
	want := fmt.Sprintf("adk: rate limit openai %s/v1 sim: granted %d, throttled 0 (429), waited ", srv.URL, 2*cases)
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q lacks the simulator limiter's totals %q", r.stderr, want)
	}
	if strings.Contains(r.stdout+r.stderr, "sk-sim-secret") {
		t.Fatal("the simulator's key is in the output")
	}

	// The agent calling the same endpoint with another limit: refused,
	// naming both declarations.
	writeFile(t, dir, "agent2.json", `{"schema_version":1,"name":"a","model":{"provider":"openai","model":"sim","base_url":"`+srv.URL+
		`/v1","max_attempts":1,"rate_limit":{"requests_per_minute":60}}}`)
	r = runADK(t, dir, env, "eval", "run", "--config", "agent2.json", "--eval-set", "sims.evalset.json", "--user-simulator-config", "usersim.json")
	if r.code != exitError || !strings.Contains(r.stderr, "--user-simulator-config usersim.json") || !strings.Contains(r.stderr, `--config agent2.json agent "a"`) {
		t.Fatalf("conflicting limits: exit %d stderr %q", r.code, r.stderr)
	}
}
