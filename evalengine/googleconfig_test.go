package evalengine_test

import (
	"encoding/json"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

func TestParseGoogleTestConfig_MapsCriteria(t *testing.T) {
	tc, err := evalengine.ParseGoogleTestConfig([]byte(`{"criteria":{
		"tool_trajectory_avg_score":{"threshold":1.0,"match_type":"any_order"},
		"response_match_score":0.3},
		"user_simulator_config":{"model":"gemini-2.5-flash","max_allowed_invocations":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	if tc.MaxTurns != 3 {
		t.Fatalf("max turns %d", tc.MaxTurns)
	}
	var doc struct {
		Criteria []map[string]any `json:"criteria"`
	}
	if err := json.Unmarshal(tc.Criteria, &doc); err != nil || len(doc.Criteria) != 2 {
		t.Fatalf("criteria %s: %v", tc.Criteria, err)
	}
	rm, traj := doc.Criteria[0], doc.Criteria[1]
	if rm["criterion"] != "semantic_quality" || rm["threshold"] != 0.3 || rm["config"].(map[string]any)["algorithm"] != "token_f1" {
		t.Errorf("response_match_score became %v", rm)
	}
	if traj["criterion"] != "tool_trajectory" || traj["config"].(map[string]any)["match"] != "subset" {
		t.Errorf("tool_trajectory_avg_score ANY_ORDER became %v", traj)
	}
	// The document is a valid adk criteria file.
	if ms, err := evalengine.ParseCriteria(tc.Criteria); err != nil || len(ms) != 2 {
		t.Fatalf("mapped criteria do not parse: %v", err)
	}
	// No criteria: adk-python's defaults.
	tc, err = evalengine.ParseGoogleTestConfig([]byte(`{}`))
	if err != nil || tc.MaxTurns != evalengine.DefaultScenarioMaxTurns {
		t.Fatalf("defaults: %v", err)
	}
	if ms, err := evalengine.ParseCriteria(tc.Criteria); err != nil || len(ms) != 2 || ms[0].Threshold != 0.8 || ms[1].Threshold != 1 {
		t.Fatalf("default criteria: %v %+v", err, ms)
	}
}

func TestParseGoogleTestConfig_RefusesWhatItCannotMap(t *testing.T) {
	for doc, code := range map[string]string{
		`{"criteria":{"final_response_match_v2":0.5}}`:                                evalengine.CodeUnknownGoogleCriterion,
		`{"criteria":{"hallucinations_v1":{"threshold":0.5}}}`:                        evalengine.CodeUnknownGoogleCriterion,
		`{"custom_metrics":{}}`:                                                       evalengine.CodeUnknownGoogleCriterion,
		`{"criteria":{"response_match_score":2}}`:                                     evalengine.CodeInvalidGoogleTestConfig,
		`{"criteria":{"tool_trajectory_avg_score":{"threshold":1,"match_type":"x"}}}`: evalengine.CodeInvalidGoogleTestConfig,
		`{"criteria":{"response_match_score":{"threshold":1,"judge":1}}}`:             evalengine.CodeInvalidGoogleTestConfig,
		`{"criterias":{}}`: evalengine.CodeInvalidGoogleTestConfig,
		`{"user_simulator_config":{"max_allowed_invocations":0}}`: evalengine.CodeInvalidGoogleTestConfig,
		`[1]`: evalengine.CodeInvalidGoogleTestConfig,
	} {
		_, err := evalengine.ParseGoogleTestConfig([]byte(doc))
		if evalengine.ErrorCode(err) != code {
			t.Errorf("%s: %v, want %s", doc, err, code)
		}
	}
}

func FuzzParseGoogleTestConfig(f *testing.F) {
	f.Add([]byte(`{"criteria":{"tool_trajectory_avg_score":1,"response_match_score":{"threshold":0.5}}}`))
	f.Add([]byte(`{"user_simulator_config":{"max_allowed_invocations":5}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tc, err := evalengine.ParseGoogleTestConfig(data)
		if err != nil {
			return
		}
		if _, err := evalengine.ParseCriteria(tc.Criteria); err != nil {
			t.Fatalf("accepted config maps to invalid criteria: %v", err)
		}
	})
}

func TestGoogleScenarioCase_ImportedAndSplit(t *testing.T) {
	set, _, err := evalengine.LoadSet([]byte(`{"eval_set_id":"m","eval_cases":[
		{"eval_id":"a","conversation":[{"user_content":{"parts":[{"text":"q"}]}}]},
		{"eval_id":"b","conversation_scenario":{"starting_prompt":"hi","conversation_plan":"p","user_persona":"NOVICE"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !evalengine.IsScenarioCase(&set.Cases[1]) || evalengine.IsScenarioCase(&set.Cases[0]) {
		t.Fatal("scenario case not marked")
	}
	rest, skipped := evalengine.WithoutScenarioCases(set)
	if len(rest.Cases) != 1 || len(skipped) != 1 || skipped[0] != "b" || len(set.Cases) != 2 {
		t.Fatalf("split %d %v", len(rest.Cases), skipped)
	}
	// The canonical encoding keeps the marker, so a cluster sees it too.
	data, err := evalengine.EncodeSet(set)
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := evalengine.LoadSet(data)
	if err != nil || !evalengine.IsScenarioCase(&back.Cases[1]) {
		t.Fatalf("round trip: %v", err)
	}
}
