package evalengine_test

import (
	"context"
	"testing"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/evalengine"
)

func TestParseCriteria_BuiltinMetrics(t *testing.T) {
	ms, err := evalengine.ParseCriteria([]byte(`[
		{"id":"latency","criterion":"latency","threshold":0.5,"config":{"target_ms":100,"hard_limit_ms":300}},
		{"id":"cost","criterion":"cost","scope":"case","config":{"input_microunits_per_million":1000000,"max_cost_microunits":10}},
		{"id":"safety","criterion":"safety","config":{"max_violations":0}},
		{"id":"f1","criterion":"semantic_quality","scope":"case","config":{"algorithm":"token_f1"}},
		{"id":"response","criterion":"exact_response","scope":"case"}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"turn", "case", "turn", "case", "case"}
	for i, m := range ms {
		if m.Scope() != want[i] {
			t.Errorf("%s scope %s, want %s", m.ID, m.Scope(), want[i])
		}
	}
	for _, tc := range []struct {
		doc, reason string
	}{
		{`[{"id":"x","criterion":"latency","config":{"metric":"cost"}}]`, "unknown_config_key"},
		{`[{"id":"x","criterion":"semantic_quality","config":{"algorithm":"bleu"}}]`, "invalid_semantic_metric_config"},
		{`[{"id":"x","criterion":"cost","config":{"max_cost_microunits":0}}]`, "invalid_cost_metric_config"},
		{`[{"id":"x","criterion":"exact_response","scope":"turn"}]`, "invalid_module_or_scope"},
		{`[{"id":"x","criterion":"llm_judge","config":{"rubric":"r","rubric_id":"a","rubric_version":"1"}}]`, "judge_unavailable"},
	} {
		_, err := evalengine.ParseCriteria([]byte(tc.doc))
		if evalengine.ErrorCode(err) != evalengine.CodeInvalidCriterion || evalengine.ErrorReason(err) != tc.reason {
			t.Errorf("%s: %v, want reason %s", tc.doc, err, tc.reason)
		}
	}
	_, err = evalengine.ParseCriteria([]byte(`[{"id":"x","criterion":"latency","module":"evil"}]`))
	wantCode(t, err, evalengine.CodeUnknownCriterionKeys)
}

func TestParseCriteria_JudgeProviderComesFromTheMachine(t *testing.T) {
	var got evalengine.ProviderSpec
	env := evalengine.ModelEnv{
		Provider: "openai", Model: "gpt-judge", ProviderConfig: map[string]any{"base_url": "http://127.0.0.1:1"},
		NewProvider: func(spec evalengine.ProviderSpec) (model.Provider, error) {
			got = spec
			return funcProvider(func(context.Context, *model.Request) (*model.Response, error) {
				return textResponse(`{"score":0.9,"rationale":"ok"}`), nil
			}), nil
		},
	}
	for _, doc := range []string{
		`[{"id":"j","criterion":"llm_judge","config":{"rubric":"r","rubric_id":"a","rubric_version":"1","provider":"gemini"}}]`,
		`[{"id":"j","criterion":"llm_judge","config":{"rubric":"r","rubric_id":"a","rubric_version":"1","model":"x"}}]`,
		`[{"id":"j","criterion":"llm_judge","config":{"rubric":"r","rubric_id":"a","rubric_version":"1","provider_config":{"api_key":"sk-from-file"}}}]`,
	} {
		_, err := evalengine.ParseCriteriaWithOptions([]byte(doc), evalengine.CriteriaOptions{Judge: &env})
		if evalengine.ErrorReason(err) != "judge_provider_from_file" {
			t.Errorf("%s: %v", doc, err)
		}
	}
	_, err := evalengine.ParseCriteriaWithOptions([]byte(`[{"id":"j","criterion":"llm_judge","kind":"metric","config":{"rubric":"r","rubric_id":"a","rubric_version":"1"}}]`), evalengine.CriteriaOptions{Judge: &env})
	if evalengine.ErrorReason(err) != "invalid_module_or_scope" {
		t.Errorf("kind metric: %v", err)
	}
	_, err = evalengine.ParseCriteriaWithOptions([]byte(`[{"id":"j","criterion":"llm_judge","config":{"rubric":"r","rubric_id":"a","rubric_version":"1","request_timeout_ms":120001}}]`), evalengine.CriteriaOptions{Judge: &env})
	if evalengine.ErrorCode(err) != evalengine.CodeInvalidCriterion || evalengine.ErrorReason(err) != evalengine.JudgeInvalidRequestTimeout {
		t.Errorf("bound: %v", err)
	}

	ms, err := evalengine.ParseCriteriaWithOptions([]byte(`{"criteria":[{"id":"j","criterion":"llm_judge","threshold":0.8,
		"config":{"rubric":"Is it right?","rubric_id":"a","rubric_version":"7","max_output_tokens":64}}]}`), evalengine.CriteriaOptions{Judge: &env})
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Kind != "judge" || ms[0].Scope() != "case" || got.Provider != "openai" || got.Model != "gpt-judge" || got.Config["base_url"] != "http://127.0.0.1:1" {
		t.Fatalf("metric %+v spec %+v", ms[0], got)
	}
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","input":"q","expected":"q"}]}`)
	res, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &fakeAdapter{echo: true}, Metrics: ms, Options: opts(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Cases[0].Samples[0].Criteria[0]; !c.Passed || c.Metadata["model"] != "gpt-judge" || c.Metadata["rubric_version"] != "7" {
		t.Fatalf("criterion %+v", c)
	}
}

func TestParseCriteria_JudgeAgainstGeminiServer(t *testing.T) {
	t.Setenv(judgeKeyEnv, plantedEnvSecret)
	srv := newJudgeServer(t, evalengine.ProviderGemini, judgeReply{text: `{"score":1,"rationale":"fine, %KEY%"}`})
	env := evalengine.ModelEnv{ProviderConfig: map[string]any{"base_url": srv.URL, "api_key_env": judgeKeyEnv, "max_attempts": 1}}
	ms, err := evalengine.ParseCriteriaWithOptions([]byte(`[{"id":"j","criterion":"llm_judge","config":{"rubric":"r","rubric_id":"a","rubric_version":"1"}}]`),
		evalengine.CriteriaOptions{Judge: &env})
	if err != nil {
		t.Fatal(err)
	}
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","input":"q"}]}`)
	res, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &fakeAdapter{echo: true}, Metrics: ms, Options: opts(nil)})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cases[0].Samples[0].Criteria[0]
	if !c.Passed || c.Metadata["provider"] != "gemini" || c.Metadata["model"] != evalengine.DefaultJudgeModel || c.Metadata["rationale"] != "fine, [REDACTED]" {
		t.Fatalf("criterion %+v", c)
	}
	if _, key := srv.last(); key != plantedEnvSecret {
		t.Fatalf("key from the environment not sent: %q", key)
	}
	srv.mu.Lock()
	paths := srv.paths
	srv.mu.Unlock()
	if len(paths) != 1 || paths[0] != "/models/gemini-3.1-flash-lite:generateContent" {
		t.Fatalf("paths %v", paths)
	}
}
