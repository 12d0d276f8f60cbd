package evalengine_test

import (
	"context"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

func mustBuiltin(t *testing.T, scope string, cfg map[string]any) evalengine.Metric {
	t.Helper()
	m, err := evalengine.NewBuiltinMetric("m", scope, 0.5, cfg)
	if err != nil {
		t.Fatalf("NewBuiltinMetric(%v): %v", cfg, err)
	}
	return m
}

func wantScore(t *testing.T, s evalengine.Score, status string, v float64) {
	t.Helper()
	if s.Status != status || (status == evalengine.StatusOK && abs(s.Value-v) > 1e-12) {
		t.Fatalf("score %+v, want %s %v", s, status, v)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func wantNotEvaluated(t *testing.T, s evalengine.Score, reason string) {
	t.Helper()
	if s.Status != evalengine.StatusNotEvaluated || s.Metadata["reason"] != reason {
		t.Fatalf("score %+v, want not_evaluated %s", s, reason)
	}
}

func TestBuiltinMetric_Latency(t *testing.T) {
	ctx := context.Background()
	m := mustBuiltin(t, evalengine.ScopeTurn, map[string]any{"metric": "latency", "target_ms": 100, "hard_limit_ms": 300})
	for _, tc := range []struct {
		ms   int64
		want float64
	}{{50, 1}, {100, 1}, {200, 0.5}, {300, 0}, {900, 0}} {
		wantScore(t, m.Turn.ScoreTurn(ctx, evalengine.TurnEval{LatencyMS: tc.ms}), evalengine.StatusOK, tc.want)
	}
	wantNotEvaluated(t, m.Turn.ScoreTurn(ctx, evalengine.TurnEval{LatencyMS: -1}), "latency_unavailable")

	c := mustBuiltin(t, evalengine.ScopeCase, map[string]any{"metric": "latency", "target_ms": 100, "hard_limit_ms": 200})
	wantScore(t, c.Case.ScoreCase(ctx, evalengine.CaseEval{LatenciesMS: []int64{50, 150}}), evalengine.StatusOK, 0.75)
	wantNotEvaluated(t, c.Case.ScoreCase(ctx, evalengine.CaseEval{}), "latency_unavailable")

	hard := mustBuiltin(t, evalengine.ScopeTurn, map[string]any{"metric": "latency", "target_ms": 100, "hard_limit_ms": 100})
	wantScore(t, hard.Turn.ScoreTurn(ctx, evalengine.TurnEval{LatencyMS: 101}), evalengine.StatusOK, 0)
	def := mustBuiltin(t, evalengine.ScopeTurn, map[string]any{"metric": "latency"})
	wantScore(t, def.Turn.ScoreTurn(ctx, evalengine.TurnEval{LatencyMS: 2500}), evalengine.StatusOK, 0.5) // 1000/4000
}

func usage(in, out any) map[string]any {
	return map[string]any{"usage": map[string]any{"input_tokens": in, "output_tokens": out}}
}

func TestBuiltinMetric_CostAndSafety(t *testing.T) {
	ctx := context.Background()
	cost := mustBuiltin(t, evalengine.ScopeTurn, map[string]any{
		"metric": "cost", "input_microunits_per_million": 1_000_000, "output_microunits_per_million": 2_000_000, "max_cost_microunits": 100,
	})
	s := cost.Turn.ScoreTurn(ctx, evalengine.TurnEval{Output: evalengine.TurnOutput{Metadata: usage(10, 20)}})
	wantScore(t, s, evalengine.StatusOK, 1)
	if s.Metadata["cost_microunits"] != 50.0 {
		t.Fatalf("cost metadata %v", s.Metadata)
	}
	over := mustBuiltin(t, evalengine.ScopeTurn, map[string]any{
		"metric": "cost", "input_microunits_per_million": 1_000_000, "output_microunits_per_million": 2_000_000, "max_cost_microunits": 25,
	})
	wantScore(t, over.Turn.ScoreTurn(ctx, evalengine.TurnEval{Output: evalengine.TurnOutput{Metadata: usage(10, 20)}}), evalengine.StatusOK, 0.5)
	openaiNames := map[string]any{"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 20}}
	wantScore(t, over.Turn.ScoreTurn(ctx, evalengine.TurnEval{Output: evalengine.TurnOutput{Metadata: openaiNames}}), evalengine.StatusOK, 0.5)
	wantNotEvaluated(t, cost.Turn.ScoreTurn(ctx, evalengine.TurnEval{}), "usage_unavailable")
	wantNotEvaluated(t, cost.Turn.ScoreTurn(ctx, evalengine.TurnEval{Output: evalengine.TurnOutput{Metadata: usage(-1, 2)}}), "usage_unavailable")

	caseCost := mustBuiltin(t, evalengine.ScopeCase, map[string]any{
		"metric": "cost", "input_microunits_per_million": 1_000_000, "output_microunits_per_million": 2_000_000, "max_cost_microunits": 50,
	})
	outs := []evalengine.TurnOutput{{Metadata: usage(10, 20)}, {Metadata: usage(10, 20)}}
	wantScore(t, caseCost.Case.ScoreCase(ctx, evalengine.CaseEval{Outputs: outs}), evalengine.StatusOK, 0.5) // 100 spent of 50
	outs = append(outs, evalengine.TurnOutput{})
	wantNotEvaluated(t, caseCost.Case.ScoreCase(ctx, evalengine.CaseEval{Outputs: outs}), "usage_unavailable")

	safety := mustBuiltin(t, evalengine.ScopeTurn, map[string]any{"metric": "safety", "max_violations": 1})
	for _, tc := range []struct {
		v    any
		want float64
	}{{0, 1}, {1, 1}, {2, 0}, {[]any{"a"}, 1}, {[]any{"a", "b"}, 0}} {
		s := safety.Turn.ScoreTurn(ctx, evalengine.TurnEval{Output: evalengine.TurnOutput{Metadata: map[string]any{"safety_violations": tc.v}}})
		wantScore(t, s, evalengine.StatusOK, tc.want)
	}
	wantNotEvaluated(t, safety.Turn.ScoreTurn(ctx, evalengine.TurnEval{}), "safety_unavailable")
	caseSafety := mustBuiltin(t, evalengine.ScopeCase, map[string]any{"metric": "safety"})
	one := evalengine.TurnOutput{Metadata: map[string]any{"safety_violations": 1}}
	zero := evalengine.TurnOutput{Metadata: map[string]any{"safety_violations": []any{}}}
	wantScore(t, caseSafety.Case.ScoreCase(ctx, evalengine.CaseEval{Outputs: []evalengine.TurnOutput{zero, zero}}), evalengine.StatusOK, 1)
	wantScore(t, caseSafety.Case.ScoreCase(ctx, evalengine.CaseEval{Outputs: []evalengine.TurnOutput{zero, one}}), evalengine.StatusOK, 0)
}

func TestBuiltinMetric_Semantic(t *testing.T) {
	ctx := context.Background()
	if f := evalengine.TokenF1("alpha beta", "alpha gamma"); f != 0.5 {
		t.Fatalf("F1 = %v", f)
	}
	for _, tc := range []struct {
		e, a string
		want float64
	}{{"", "  ", 1}, {"x", "", 0}, {"Hello, World!", "hello world", 1}, {"a a b", "a b b", 2.0 / 3}, {"snake_case x", "snake case", 0}} {
		if f := evalengine.TokenF1(tc.e, tc.a); abs(f-tc.want) > 1e-12 {
			t.Errorf("F1(%q,%q) = %v, want %v", tc.e, tc.a, f, tc.want)
		}
	}
	f1 := mustBuiltin(t, evalengine.ScopeTurn, map[string]any{"metric": "semantic_quality"})
	turn := &evalengine.Turn{Expected: map[string]any{"response": "alpha beta"}}
	wantScore(t, f1.Turn.ScoreTurn(ctx, evalengine.TurnEval{Turn: turn, Output: evalengine.TurnOutput{Output: "Alpha gamma"}}), evalengine.StatusOK, 0.5)
	wantNotEvaluated(t, f1.Turn.ScoreTurn(ctx, evalengine.TurnEval{Turn: &evalengine.Turn{}, Output: evalengine.TurnOutput{Output: "x"}}), "expected_unavailable")
	wantNotEvaluated(t, f1.Turn.ScoreTurn(ctx, evalengine.TurnEval{Turn: turn}), "actual_unavailable")
	wantNotEvaluated(t, f1.Turn.ScoreTurn(ctx, evalengine.TurnEval{Turn: turn, Output: evalengine.TurnOutput{Output: 42}}), "text_unavailable")

	exact := mustBuiltin(t, evalengine.ScopeCase, map[string]any{"metric": "semantic_quality", "algorithm": "exact_normalized"})
	c := &evalengine.Case{ExpectedFinalResponse: " Sunny "}
	outs := []evalengine.TurnOutput{{Output: "cloudy"}, {Output: "sunny"}}
	wantScore(t, exact.Case.ScoreCase(ctx, evalengine.CaseEval{Case: c, Outputs: outs}), evalengine.StatusOK, 1)
	wantNotEvaluated(t, exact.Case.ScoreCase(ctx, evalengine.CaseEval{Case: &evalengine.Case{}, Outputs: outs}), "expected_unavailable")
}

func TestBuiltinMetric_CaseMetricAggregatesRuntimeMetadata(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","turns":[{"input":"a"},{"input":"b"}]}]}`)
	ad := &fakeAdapter{script: map[string]evalengine.TurnOutput{
		"a": {Output: "x", Metadata: usage(10, 20)},
		"b": {Output: "y", Metadata: usage(10, 20)},
	}}
	cost, err := evalengine.NewBuiltinMetric("cost", evalengine.ScopeCase, 1, map[string]any{
		"metric": "cost", "input_microunits_per_million": 1_000_000, "output_microunits_per_million": 2_000_000, "max_cost_microunits": 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	latency, err := evalengine.NewBuiltinMetric("latency", evalengine.ScopeTurn, 1, map[string]any{"metric": "latency", "target_ms": 60_000})
	if err != nil {
		t.Fatal(err)
	}
	res, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: ad, Metrics: []evalengine.Metric{cost, latency}, Options: opts(nil)})
	if err != nil {
		t.Fatal(err)
	}
	crit := res.Cases[0].Samples[0].Criteria[0]
	if crit.Status != evalengine.StatusOK || crit.Score != 1 || crit.Metadata["cost_microunits"] != 100.0 || crit.Metadata["usage_input"] != int64(20) {
		t.Fatalf("case cost %+v", crit)
	}
	if !res.Passed || res.Metrics[1].EvaluatedCount != 2 {
		t.Fatalf("result passed=%v metrics=%+v", res.Passed, res.Metrics)
	}
}

func TestBuiltinMetric_ConfigFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		cfg    map[string]any
		reason string
	}{
		{map[string]any{"metric": "nope"}, "invalid_builtin_eval_metric"},
		{map[string]any{}, "invalid_builtin_eval_metric"},
		{map[string]any{"metric": "latency", "target_ms": 0}, "invalid_latency_metric_config"},
		{map[string]any{"metric": "latency", "target_ms": 200, "hard_limit_ms": 100}, "invalid_latency_metric_config"},
		{map[string]any{"metric": "latency", "target_ms": 3_600_001}, "invalid_latency_metric_config"},
		{map[string]any{"metric": "latency", "target_ms": 1.5}, "invalid_latency_metric_config"},
		{map[string]any{"metric": "latency", "extra": 1}, "invalid_latency_metric_config"},
		{map[string]any{"metric": "cost", "max_cost_microunits": 0}, "invalid_cost_metric_config"},
		{map[string]any{"metric": "cost", "input_microunits_per_million": 1_000_000_000_001}, "invalid_cost_metric_config"},
		{map[string]any{"metric": "safety", "max_violations": 10_001}, "invalid_safety_metric_config"},
		{map[string]any{"metric": "safety", "max_violations": "1"}, "invalid_safety_metric_config"},
		{map[string]any{"metric": "semantic_quality", "algorithm": "bleu"}, "invalid_semantic_metric_config"},
	} {
		_, err := evalengine.NewBuiltinMetric("m", evalengine.ScopeTurn, 1, tc.cfg)
		if evalengine.ErrorCode(err) != evalengine.CodeInvalidMetric || evalengine.ErrorReason(err) != tc.reason {
			t.Errorf("%v: %v, want %s", tc.cfg, err, tc.reason)
		}
	}
	if _, err := evalengine.NewBuiltinMetric("m", "sample", 1, map[string]any{"metric": "latency"}); evalengine.ErrorCode(err) != evalengine.CodeInvalidMetric {
		t.Errorf("bad scope: %v", err)
	}
	if _, err := evalengine.NewBuiltinMetric("m", evalengine.ScopeTurn, 1.5, map[string]any{"metric": "latency"}); evalengine.ErrorCode(err) != evalengine.CodeInvalidMetric {
		t.Errorf("bad threshold: %v", err)
	}
}
