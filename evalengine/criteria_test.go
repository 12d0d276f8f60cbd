package evalengine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// scoreCase runs one case-scope metric on a case whose single turn answered
// out.
func scoreCase(t *testing.T, m evalengine.Metric, c *evalengine.Case, outs ...evalengine.TurnOutput) evalengine.Score {
	t.Helper()
	return m.Case.ScoreCase(context.Background(), evalengine.CaseEval{Case: c, Outputs: outs})
}

func calls(names ...string) []evalengine.ToolStep {
	var out []evalengine.ToolStep
	for _, n := range names {
		out = append(out, evalengine.ToolStep{Kind: evalengine.KindToolCall, Tool: n, Args: map[string]any{}})
	}
	return out
}

func trajCase(t *testing.T, expected string) *evalengine.Case {
	t.Helper()
	s := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","expected_trajectory":`+expected+`,"turns":[{"input":"x"}]}]}`)
	return &s.Cases[0]
}

func TestCriteria_TrajectoryPolicyMatrix(t *testing.T) {
	cases := []struct {
		expected string
		actual   []string
		want     map[string]float64 // match policy -> score
	}{
		{`["a","b"]`, []string{"a", "b"}, map[string]float64{"exact": 1, "in_order": 1, "any_order": 1, "subset": 1}},
		{`["a","b"]`, []string{"b", "a"}, map[string]float64{"exact": 0, "in_order": 0, "any_order": 1, "subset": 1}},
		{`["a","b"]`, []string{"a", "x", "b"}, map[string]float64{"exact": 0, "in_order": 1, "any_order": 0, "subset": 1}},
		{`["a","b"]`, []string{"b", "x", "a"}, map[string]float64{"exact": 0, "in_order": 0, "any_order": 0, "subset": 1}},
		{`["a","b"]`, []string{"a"}, map[string]float64{"exact": 0, "in_order": 0, "any_order": 0, "subset": 0}},
		{`[]`, []string{}, map[string]float64{"exact": 1, "in_order": 1, "any_order": 1, "subset": 1}},
		{`[]`, []string{"a"}, map[string]float64{"exact": 0, "in_order": 1, "any_order": 0, "subset": 1}},
	}
	for _, tc := range cases {
		c := trajCase(t, tc.expected)
		for policy, want := range tc.want {
			m := mustCriterion(t, "traj", evalengine.CriterionToolTrajectory, 1, map[string]any{"match": policy})
			got := scoreCase(t, m, c, evalengine.TurnOutput{Trajectory: calls(tc.actual...)})
			if got.Status != evalengine.StatusOK || got.Value != want {
				t.Errorf("expected %s actual %v policy %s: got %v %s, want %v", tc.expected, tc.actual, policy, got.Value, got.Status, want)
			}
			// The named criteria are the same policies.
			named := mustCriterion(t, "traj", "trajectory_"+policy, 1, nil)
			if g := scoreCase(t, named, c, evalengine.TurnOutput{Trajectory: calls(tc.actual...)}); g.Value != want {
				t.Errorf("trajectory_%s: got %v want %v", policy, g.Value, want)
			}
		}
	}
}

func TestCriteria_TrajectoryArgumentPolicies(t *testing.T) {
	c := trajCase(t, `[{"tool":"weather","args":{"city":"Pune"}}]`)
	extra := evalengine.TurnOutput{Trajectory: []evalengine.ToolStep{{Tool: "weather", Args: map[string]any{"city": "Pune", "units": "C"}}}}
	other := evalengine.TurnOutput{Trajectory: []evalengine.ToolStep{{Tool: "weather", Args: map[string]any{"city": "Oslo"}}}}
	same := evalengine.TurnOutput{Trajectory: []evalengine.ToolStep{{Tool: "weather", Args: map[string]any{"city": "Pune"}}}}
	cases := []struct {
		args string
		out  evalengine.TurnOutput
		want float64
	}{
		{"exact", same, 1}, {"exact", extra, 0}, {"subset", extra, 1}, {"subset", other, 0},
		{"ignored", other, 1}, {"ignore", other, 1},
	}
	for _, tc := range cases {
		m := mustCriterion(t, "traj", evalengine.CriterionToolTrajectory, 1, map[string]any{"args": tc.args})
		if got := scoreCase(t, m, c, tc.out); got.Value != tc.want {
			t.Errorf("args %s: got %v want %v (%v)", tc.args, got.Value, tc.want, got.Metadata)
		}
	}
	t.Run("numbers compare by value", func(t *testing.T) {
		c := trajCase(t, `[{"tool":"n","args":{"x":1.0}}]`)
		m := mustCriterion(t, "traj", evalengine.CriterionToolTrajectory, 1, nil)
		out := evalengine.TurnOutput{Trajectory: []evalengine.ToolStep{{Tool: "n", Args: map[string]any{"x": 1}}}}
		if got := scoreCase(t, m, c, out); got.Value != 1 {
			t.Fatalf("1.0 vs 1: %v", got)
		}
	})
	t.Run("subset arrays are a positional prefix", func(t *testing.T) {
		c := trajCase(t, `[{"tool":"n","args":{"l":[1,2]}}]`)
		m := mustCriterion(t, "traj", evalengine.CriterionToolTrajectory, 1, map[string]any{"args": "subset"})
		prefix := evalengine.TurnOutput{Trajectory: []evalengine.ToolStep{{Tool: "n", Args: map[string]any{"l": []any{1, 2, 3}}}}}
		swapped := evalengine.TurnOutput{Trajectory: []evalengine.ToolStep{{Tool: "n", Args: map[string]any{"l": []any{2, 1}}}}}
		if scoreCase(t, m, c, prefix).Value != 1 || scoreCase(t, m, c, swapped).Value != 0 {
			t.Fatal("positional prefix rule broken")
		}
	})
}

func TestCriteria_DuplicateStepsAreMultisetMatched(t *testing.T) {
	subset := mustCriterion(t, "t", evalengine.CriterionTrajectorySubset, 1, nil)
	anyOrder := mustCriterion(t, "t", evalengine.CriterionTrajectoryAnyOrder, 1, nil)
	aa := trajCase(t, `["A","A"]`)
	if got := scoreCase(t, subset, aa, evalengine.TurnOutput{Trajectory: calls("A")}); got.Value != 0 {
		t.Fatalf("subset [A,A] vs [A]: %v", got.Value)
	}
	if got := scoreCase(t, anyOrder, aa, evalengine.TurnOutput{Trajectory: calls("A", "A")}); got.Value != 1 {
		t.Fatalf("any_order [A,A] vs [A,A]: %v", got.Value)
	}
	// Greedy would pair the broad expectation with the only {x:1} call and
	// fail; the maximum matching finds the valid pairing.
	c := trajCase(t, `[{"tool":"f","args":{}},{"tool":"f","args":{"x":1}}]`)
	m := mustCriterion(t, "t", evalengine.CriterionToolTrajectory, 1, map[string]any{"match": "any_order", "args": "subset"})
	out := evalengine.TurnOutput{Trajectory: []evalengine.ToolStep{{Tool: "f", Args: map[string]any{"x": 1}}, {Tool: "f", Args: map[string]any{"x": 2}}}}
	got := scoreCase(t, m, c, out)
	if got.Value != 1 || got.Metadata["matched_count"] != 2 {
		t.Fatalf("maximum matching: %v %v", got.Value, got.Metadata)
	}
}

func TestCriteria_ExactResponseAndNormalization(t *testing.T) {
	s := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","turns":[
		{"input":"1","expected_response":"Sunny"},{"input":"2","expected":"Rain"},{"input":"3","expected":null}]}]}`)
	c := &s.Cases[0]
	outs := []evalengine.TurnOutput{{Output: "  sunny "}, {Output: "Rain"}, {Output: "anything"}}
	cases := []struct {
		norm string
		want float64
	}{{"exact", 0.5}, {"trim", 0.5}, {"casefold_trim", 1}}
	for _, tc := range cases {
		m := mustCriterion(t, "r", evalengine.CriterionExactResponse, 1, map[string]any{"normalization": tc.norm})
		got := scoreCase(t, m, c, outs...)
		if got.Value != tc.want || got.Metadata["expected_count"] != 2 {
			t.Errorf("%s: got %v %v, want %v over 2 pairs (null expected forms no pair)", tc.norm, got.Value, got.Metadata, tc.want)
		}
	}
	t.Run("expected_final_response uses the last turn", func(t *testing.T) {
		s := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","expected_final_response":"done","turns":[{"input":"a","expected_response":"ignored"},{"input":"b"}]}]}`)
		m := mustCriterion(t, "r", evalengine.CriterionExactResponse, 1, nil)
		got := scoreCase(t, m, &s.Cases[0], evalengine.TurnOutput{Output: "x"}, evalengine.TurnOutput{Output: "done"})
		if got.Value != 1 || got.Metadata["expected_count"] != 1 {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("non-strings compare deeply", func(t *testing.T) {
		s := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","input":"x","expected":{"response":{"a":[1,2]}}}]}`)
		m := mustCriterion(t, "r", evalengine.CriterionExactResponse, 1, map[string]any{"normalization": "trim"})
		var out any
		_ = json.Unmarshal([]byte(`{"a":[1,2.0]}`), &out)
		if got := scoreCase(t, m, &s.Cases[0], evalengine.TurnOutput{Output: out}); got.Value != 1 {
			t.Fatalf("got %v", got)
		}
	})
}

func TestCriteria_MissingExpectationIsNotEvaluated(t *testing.T) {
	s := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","turns":[{"input":"x"}]}]}`)
	c := &s.Cases[0]
	resp := mustCriterion(t, "r", evalengine.CriterionExactResponse, 1, nil)
	traj := mustCriterion(t, "t", evalengine.CriterionToolTrajectory, 1, nil)
	for _, m := range []evalengine.Metric{resp, traj} {
		got := scoreCase(t, m, c, evalengine.TurnOutput{Output: "x"})
		if got.Status != evalengine.StatusNotEvaluated || got.Value != 0 {
			t.Fatalf("%s: %+v", m.ID, got)
		}
	}
	if got := scoreCase(t, traj, c, evalengine.TurnOutput{}); got.Metadata["reason"] != "missing_expected_trajectory" {
		t.Fatalf("reason: %v", got.Metadata)
	}
}

func TestCriteria_TurnLevelTrajectories(t *testing.T) {
	s := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","turns":[
		{"input":"a","expected_trajectory":["x"]},{"input":"b","expected":{"tool_uses":["y"]}}]}]}`)
	m := mustCriterion(t, "t", evalengine.CriterionTrajectoryExact, 1, nil)
	got := scoreCase(t, m, &s.Cases[0], evalengine.TurnOutput{Trajectory: calls("x")}, evalengine.TurnOutput{Trajectory: calls("y")})
	if got.Value != 1 {
		t.Fatalf("concatenated turn trajectories: %v", got)
	}
}

func TestNewCriterion_InvalidConfig(t *testing.T) {
	bad := []struct {
		name string
		cfg  map[string]any
	}{
		{"nope", nil},
		{evalengine.CriterionExactResponse, map[string]any{"normalization": "lower"}},
		{evalengine.CriterionExactResponse, map[string]any{"match": "exact"}},
		{evalengine.CriterionTrajectoryExact, map[string]any{"match": "subset"}},
		{evalengine.CriterionToolTrajectory, map[string]any{"args": "fuzzy"}},
	}
	for _, tc := range bad {
		_, err := evalengine.NewCriterion("id", tc.name, 1, tc.cfg)
		wantCode(t, err, evalengine.CodeInvalidMetric)
	}
	_, err := evalengine.NewCriterion("", evalengine.CriterionExactResponse, 1, nil)
	wantCode(t, err, evalengine.CodeInvalidMetricID)
	_, err = evalengine.NewCriterion("x", evalengine.CriterionExactResponse, 1.5, nil)
	wantCode(t, err, evalengine.CodeInvalidMetric)
}

func TestParseCriteria(t *testing.T) {
	ms, err := evalengine.ParseCriteria([]byte(`{"criteria":[{"id":"response","criterion":"exact_response","threshold":1.0,"config":{"normalization":"trim"}},
		{"id":"trajectory","criterion":"tool_trajectory","kind":"judge","config":{"match":"in_order","args":"subset"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[1].Kind != evalengine.KindJudge || ms[1].Threshold != 1 || ms[0].Scope() != evalengine.ScopeCase {
		t.Fatalf("parsed: %+v", ms)
	}
	if d := evalengine.DefaultCriteria(); len(d) != 1 || d[0].ID != "response" || d[0].Threshold != 1 {
		t.Fatalf("default criteria: %+v", d)
	}
	bad := []struct{ doc, code string }{
		{`{"criteria":[],"extra":1}`, evalengine.CodeUnknownCriteriaKeys},
		{`"x"`, evalengine.CodeCriteriaMustBeArray},
		{`{"criteria":{}}`, evalengine.CodeCriteriaMustBeArray},
		{`[{"id":"a","criterion":"exact_response","module":"x"}]`, evalengine.CodeUnknownCriterionKeys},
		{`[{"id":"a","criterion":"llm_judge"}]`, evalengine.CodeInvalidCriterion},
		{`[{"id":"a","criterion":"exact_response","threshold":2}]`, evalengine.CodeInvalidCriterion},
		{`[{"id":"a","criterion":"exact_response","config":{"provider":"x"}}]`, evalengine.CodeInvalidCriterion},
		{`[{"criterion":"exact_response"}]`, evalengine.CodeInvalidCriterion},
		{`[{"id":"a","criterion":"exact_response"},{"id":"a","criterion":"exact_response"}]`, evalengine.CodeDuplicateMetricID},
		{`[`, evalengine.CodeInvalidCriteriaFile},
	}
	for _, tc := range bad {
		_, err := evalengine.ParseCriteria([]byte(tc.doc))
		wantCode(t, err, tc.code)
	}
}

func TestParseMetricTolerances(t *testing.T) {
	tol, err := evalengine.ParseMetricTolerances([]byte(`{"response":0.2}`))
	if err != nil || tol["response"] != 0.2 {
		t.Fatalf("%v %v", tol, err)
	}
	_, err = evalengine.ParseMetricTolerances([]byte(`[]`))
	wantCode(t, err, evalengine.CodeMetricTolerancesNotObject)
	_, err = evalengine.ParseMetricTolerances([]byte(`{"response":1.5}`))
	wantCode(t, err, evalengine.CodeInvalidMetricTolerances)
}
