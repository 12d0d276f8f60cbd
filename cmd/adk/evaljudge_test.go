package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeGemini is a Gemini generateContent server on 127.0.0.1 whose judge
// answer scores 0.8 and echoes the API key it received into the
// rationale, so the test proves the key never reaches the output.
func fakeGemini(t *testing.T, sawKey *atomic.Value) *httptest.Server {
	t.Helper()
	return fakeGeminiPaths(t, sawKey, nil, nil)
}

// fakeGeminiPaths is fakeGemini counting the calls that came through
// net/http's Transport (which asks for gzip) and the others (httpx's lean
// path); nil counters are not counted.
func fakeGeminiPaths(t *testing.T, sawKey *atomic.Value, viaTransport, viaLean *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case viaTransport == nil:
		case r.Header.Get("Accept-Encoding") == "gzip":
			viaTransport.Add(1)
		default:
			viaLean.Add(1)
		}
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("x-goog-api-key")
		sawKey.Store(key)
		if !strings.HasSuffix(r.URL.Path, ":generateContent") {
			http.NotFound(w, r)
			return
		}
		answer, _ := json.Marshal(map[string]any{"score": 0.8, "rationale": "polite and correct; key " + key})
		if strings.Contains(string(body), "simulating a human user") {
			// The same machine config drives the LLM user simulator
			// (--user-simulator-config): this user is satisfied at once.
			answer, _ = json.Marshal(map[string]any{"done": true, "message": ""})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"candidates": []any{map[string]any{
				"content":      map[string]any{"role": "model", "parts": []any{map[string]any{"text": string(answer)}}},
				"finishReason": "STOP",
			}},
			"modelVersion": "gemini-test-001",
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func judgeCriteria(threshold float64) string {
	return fmt.Sprintf(`[{"id":"response","criterion":"exact_response","threshold":0},
 {"id":"quality","criterion":"llm_judge","threshold":%g,"config":{"rubric":"Is the answer polite and correct?","rubric_id":"polite","rubric_version":"1"}},
 {"id":"overlap","criterion":"semantic_quality","threshold":0.5,"config":{"algorithm":"token_f1"}}]`, threshold)
}

func TestEvalRun_LLMJudge(t *testing.T) {
	t.Parallel()
	const key = "AIza-test-Pq7Lm2Xc9Vb4"
	var sawKey atomic.Value
	srv := fakeGemini(t, &sawKey)
	dir := fixture(t)
	writeFile(t, dir, "judge.json", `{"provider":"gemini","model":"gemini-test","base_url":"`+srv.URL+`",
		"api_key_env":"ADK_TEST_JUDGE_KEY","timeout_ms":10000}`)
	writeFile(t, dir, "pass.json", judgeCriteria(0.7))
	writeFile(t, dir, "strict.json", judgeCriteria(0.9))
	env := []string{"ADK_TEST_JUDGE_KEY=" + key}
	noKey := func(t *testing.T, r execResult) {
		t.Helper()
		if strings.Contains(r.stdout, key) || strings.Contains(r.stderr, key) {
			t.Fatalf("the judge's API key leaked: stdout %q stderr %q", r.stdout, r.stderr)
		}
	}

	t.Run("score over the threshold exits 0", func(t *testing.T) {
		r := runADK(t, dir, env, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--criteria", "pass.json",
			"--judge-config", "judge.json", "--format", "json")
		if r.code != exitOK {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
		noKey(t, r)
		if k, _ := sawKey.Load().(string); k != key {
			t.Fatalf("the server got key %q: the test proves nothing", k)
		}
		if !strings.Contains(r.stdout, `"score":0.8`) || !strings.Contains(r.stdout, "polite and correct") || !strings.Contains(r.stdout, `"metric_id":"overlap"`) {
			t.Fatalf("the result lacks the judge's score or the semantic_quality metric: %s", r.stdout)
		}
	})
	t.Run("score under the threshold exits 2", func(t *testing.T) {
		for _, format := range []string{"markdown", "junit", "sarif", "annotations"} {
			r := runADK(t, dir, env, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--criteria", "strict.json",
				"--judge-config", "judge.json", "--format", format)
			if r.code != exitFailed {
				t.Fatalf("%s: exit %d stderr %q", format, r.code, r.stderr)
			}
			noKey(t, r)
		}
	})
	t.Run("llm_judge without --judge-config exits 1", func(t *testing.T) {
		r := runADK(t, dir, env, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--criteria", "pass.json")
		oneErrorLine(t, r, "invalid_eval_criterion: judge_unavailable")
	})
	for _, tc := range []struct {
		name, judge, criteria, code string
		env                         []string
	}{
		{"unknown judge-config key", `{"provider":"gemini","api_key":"x"}`, "", "invalid_judge_config: unknown_field (api_key)", env},
		{"bad provider", `{"provider":"anthropic"}`, "", "invalid_judge_config: provider", env},
		{"not JSON", `{"provider":`, "", "invalid_judge_config: invalid_json", env},
		{"timeout out of range", `{"provider":"gemini","timeout_ms":999999999}`, "", "invalid_judge_config: timeout_ms", env},
		{"rate_limit zero", `{"provider":"gemini","rate_limit":{"requests_per_minute":0}}`, "", "invalid_judge_config: rate_limit.requests_per_minute (0 is not an integer in 1..1000000)", env},
		{"rate_limit unknown key", `{"provider":"gemini","rate_limit":{"rpm":5}}`, "", "invalid_judge_config: rate_limit.rpm (unknown key", env},
		{"rate_limit not an object", `{"provider":"gemini","rate_limit":7}`, "", "invalid_judge_config: rate_limit (want an object", env},
		{"key variable unset", `{"provider":"gemini","api_key_env":"ADK_TEST_JUDGE_KEY"}`, "", "invalid_judge_config: api_key_env_unset (ADK_TEST_JUDGE_KEY)", []string{"ADK_TEST_JUDGE_KEY="}},
		{"provider from the criteria file", `{"provider":"gemini","api_key_env":"ADK_TEST_JUDGE_KEY"}`,
			`[{"id":"q","criterion":"llm_judge","config":{"rubric":"r","rubric_id":"r","rubric_version":"1","provider":"openai"}}]`,
			"invalid_eval_criterion: judge_provider_from_file", env},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, dir, "j.json", tc.judge)
			criteria := "pass.json"
			if tc.criteria != "" {
				criteria = writeFile(t, dir, "c.json", tc.criteria)
			}
			r := runADK(t, dir, tc.env, "eval", "run", "--config", "good.json", "--eval-set", "set.json", "--criteria", criteria, "--judge-config", "j.json")
			oneErrorLine(t, r, tc.code)
			noKey(t, r)
		})
	}
}
