package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// chattyAgent answers every message.
const chattyAgent = `{"schema_version":1,"name":"chat","model":{"provider":"scripted","rules":[
 {"match":{"contains":"Pune"},"steps":[{"text":"Sunny"}]},
 {"match":{"contains":""},"steps":[{"text":"It snows in Oslo."}]}]}}`

// mixedADKSet is a Google ADK eval set with a scripted case and a
// conversation_scenario case.
const mixedADKSet = `{"eval_set_id":"mixed","eval_cases":[
 {"eval_id":"scripted","conversation":[{"invocation_id":"i1","user_content":{"role":"user","parts":[{"text":"Weather in Pune?"}]},
   "final_response":{"role":"model","parts":[{"text":"Sunny"}]}}]},
 {"eval_id":"simulated","conversation_scenario":{"starting_prompt":"Weather in Oslo?",
   "conversation_plan":"Ask about the weather in Oslo, then ask what to wear.","user_persona":"NOVICE"}}]}`

// fakeUserSimulator is an OpenAI-compatible endpoint that always wants
// to keep talking, so only the turn bound ends the conversation.
func fakeUserSimulator(t *testing.T, calls *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		msg, _ := json.Marshal(map[string]any{"done": false, "message": "And what should I wear?"})
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "u", "model": "sim", "choices": []any{map[string]any{
			"finish_reason": "stop", "message": map[string]any{"content": string(msg)}}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEvalRun_GoogleADKScenarios runs a Google ADK set with a
// conversation_scenario case through the binary: without a user simulator
// the scenario is not_evaluated (named, with its reason) and the rest
// runs; with one it runs through the LLM user simulator, bounded by the
// test_config.json beside the set, and the conversation is recorded.
func TestEvalRun_GoogleADKScenarios(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "agent.json", chattyAgent)
	writeFile(t, dir, "mixed.evalset.json", mixedADKSet)
	writeFile(t, dir, "test_config.json", `{"criteria":{"response_match_score":0.5},"user_simulator_config":{"max_allowed_invocations":3}}`)

	t.Run("without a user simulator the scenario is not evaluated", func(t *testing.T) {
		r := runADK(t, dir, nil, "eval", "run", "--config", "agent.json", "--eval-set", "mixed.evalset.json")
		res, err := evalengine.DecodeResult([]byte(r.stdout))
		if r.code != exitOK || err != nil {
			t.Fatalf("exit %d stderr %q: %v", r.code, r.stderr, err)
		}
		if res.CaseCount != 1 || res.Cases[0].CaseID != "scripted" || res.Metrics[0].MetricID != "response_match_score" {
			t.Fatalf("cases %d metrics %+v", res.CaseCount, res.Metrics)
		}
		ne, _ := json.Marshal(res.Metadata[evalengine.MetaNotEvaluatedCases])
		if string(ne) != `[{"case_id":"simulated","reason":"user_simulator_not_configured"}]` {
			t.Fatalf("not evaluated: %s", ne)
		}
		md := runADK(t, dir, nil, "eval", "run", "--config", "agent.json", "--eval-set", "mixed.evalset.json", "--format", "markdown")
		if !strings.Contains(md.stdout, "## Not evaluated\n\n| Case | Reason |\n| --- | --- |\n| simulated | user_simulator_not_configured |") {
			t.Fatalf("markdown: %s", md.stdout)
		}
	})

	t.Run("with a user simulator the scenario runs, bounded and recorded", func(t *testing.T) {
		var calls atomic.Int32
		srv := fakeUserSimulator(t, &calls)
		writeFile(t, dir, "usersim.json", `{"provider":"openai","model":"sim","base_url":"`+srv.URL+`/v1","api_key_env":"SIM_KEY"}`)
		r := runADK(t, dir, []string{"SIM_KEY=sk-sim-secret-123"}, "eval", "run", "--config", "agent.json", "--eval-set", "mixed.evalset.json",
			"--user-simulator-config", "usersim.json")
		res, err := evalengine.DecodeResult([]byte(r.stdout))
		if r.code == exitError || err != nil {
			t.Fatalf("exit %d stderr %q: %v", r.code, r.stderr, err)
		}
		if strings.Contains(r.stdout, "sk-sim-secret") {
			t.Fatal("the simulator's key is in the result")
		}
		var sim *evalengine.CaseResult
		for i := range res.Cases {
			if res.Cases[i].CaseID == "simulated" {
				sim = &res.Cases[i]
			}
		}
		if res.CaseCount != 2 || sim == nil || sim.Status == evalengine.SampleStatusError {
			t.Fatalf("cases %d, simulated %+v", res.CaseCount, sim)
		}
		meta, _ := sim.Samples[0].Turns[0].AdapterMetadata["simulation"].(map[string]any)
		transcript, _ := meta["transcript"].([]any)
		// max_allowed_invocations 3: three user turns, three replies,
		// the first the starting prompt verbatim.
		if len(transcript) != 6 || calls.Load() != 2 {
			t.Fatalf("transcript %d entries, simulator called %d times: %v", len(transcript), calls.Load(), meta)
		}
		if first := transcript[0].(map[string]any); first["role"] != "user" || first["content"] != "Weather in Oslo?" {
			t.Fatalf("first user turn %v", first)
		}
	})

	t.Run("test_config.json criteria that cannot be mapped are a typed error", func(t *testing.T) {
		writeFile(t, dir, "bad_config.json", `{"criteria":{"hallucinations_v1":0.5}}`)
		oneErrorLine(t, runADK(t, dir, nil, "eval", "run", "--config", "agent.json", "--eval-set", "mixed.evalset.json",
			"--adk-test-config", "bad_config.json"), "unknown_google_adk_criterion: hallucinations_v1 (supported: response_match_score, tool_trajectory_avg_score)")
		oneErrorLine(t, runADK(t, dir, nil, "eval", "run", "--config", "agent.json", "--eval-set", "mixed.evalset.json",
			"--adk-test-config", "bad_config.json", "--criteria", "x.json"), "conflicting_options: --criteria,--adk-test-config")
	})
}

// TestClusterEval_NotEvaluatedCasesLikeLocal: a cluster leaves a set's
// conversation_scenario cases out (it simulates no users); its result
// lists them in the metadata (not_evaluated_cases) as a local run's does,
// however it is read: the jsonl stream of `eval run --format jsonl`, the
// document, and `eval report JOB_ID` (Markdown's "Not evaluated").
func TestClusterEval_NotEvaluatedCasesLikeLocal(t *testing.T) {
	dir := t.TempDir()
	agent := writeFile(t, dir, "agent.json", chattyAgent)
	set := writeFile(t, dir, "mixed.evalset.json", mixedADKSet)
	url := startEvalCluster(t, "chat="+agent)
	summary := func(stream string) string {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(stream), "\n")
		var sum struct {
			Type   string `json:"type"`
			Result struct {
				Metadata map[string]any `json:"metadata"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Type != "summary" {
			t.Fatalf("last line: %v %.300s", err, lines[len(lines)-1])
		}
		ne, _ := json.Marshal(sum.Result.Metadata[evalengine.MetaNotEvaluatedCases])
		return string(ne)
	}
	const want = `[{"case_id":"simulated","reason":"user_simulator_not_configured"}]`
	if got := summary(runCLI(t, exitOK, "eval", "run", "--config", agent, "--eval-set", set, "--format", "jsonl")); got != want {
		t.Fatalf("local jsonl: not evaluated %s, want %s", got, want)
	}
	if got := summary(runCLI(t, exitOK, "eval", "run", "--cluster", url, "--agent", "chat", "--eval-set", set, "--format", "jsonl")); got != want {
		t.Fatalf("cluster jsonl: not evaluated %s, want %s (as the local run)", got, want)
	}
	id := lastClusterJob(t, url)
	res, err := evalengine.DecodeResult([]byte(runCLI(t, exitOK, "eval", "result", id, "--cluster", url)))
	if err != nil {
		t.Fatal(err)
	}
	if ne, _ := json.Marshal(res.Metadata[evalengine.MetaNotEvaluatedCases]); string(ne) != want {
		t.Fatalf("the job's result document: not evaluated %s, want %s", ne, want)
	}
	if got := summary(runCLI(t, exitOK, "eval", "report", id, "--cluster", url, "--format", "jsonl")); got != want {
		t.Fatalf("eval report JOB_ID --format jsonl: not evaluated %s, want %s", got, want)
	}
	md := runCLI(t, exitOK, "eval", "report", id, "--cluster", url, "--format", "markdown")
	if !strings.Contains(md, "## Not evaluated\n\n| Case | Reason |\n| --- | --- |\n| simulated | user_simulator_not_configured |") {
		t.Fatalf("eval report JOB_ID --format markdown: %s", md)
	}
}
