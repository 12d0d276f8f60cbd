package evalengine

import (
	"strconv"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/evalengine/internal/llm"
	"github.com/fadcedab/adk/internal/jsonlimit"
)

var (
	criterionKeys       = evalcore.KeySet("id", "criterion", "threshold", "kind", "scope", "config")
	criterionConfigKeys = evalcore.KeySet("normalization", "args", "match")
	// fileJudgeConfigKeys are the judge settings a file may hold: the
	// rubric and the bounds. Provider, model and provider_config come from
	// the machine (CriteriaOptions.Judge), never from a file.
	fileJudgeConfigKeys = evalcore.KeySet("rubric", "rubric_id", "rubric_version", "request_timeout_ms",
		"max_prompt_bytes", "max_output_bytes", "max_rationale_bytes", "max_output_tokens")
)

// CriterionLLMJudge names the LLM rubric judge in a criteria file.
const CriterionLLMJudge = "llm_judge"

// CriteriaOptions are what the machine adds to a criteria file.
type CriteriaOptions struct {
	// Judge supplies the provider, model, provider settings and
	// credentials (from the environment) for llm_judge entries. nil
	// refuses them (invalid_eval_criterion, reason judge_unavailable).
	Judge *ModelEnv
}

// DefaultCriteria is what the CLI uses without --criteria: one
// exact_response criterion with id "response" and threshold 1.0.
func DefaultCriteria() []Metric {
	m, err := NewCriterion("response", CriterionExactResponse, 1.0, nil)
	if err != nil {
		panic(err) // a constant, valid by construction
	}
	return []Metric{m}
}

// ParseCriteria is ParseCriteriaWithOptions without a judge environment:
// llm_judge entries are refused.
func ParseCriteria(data []byte) ([]Metric, error) {
	return ParseCriteriaWithOptions(data, CriteriaOptions{})
}

// ParseCriteriaWithOptions reads a CLI criteria file (§5.7, extended): a
// JSON array of {id, criterion, threshold?, kind?, scope?, config?}, or an
// object with exactly the key "criteria" holding that array. A file may
// name only first-party scorers, never code, a provider or a credential:
//
//   - the six built-in criteria (exact_response, trajectory_exact,
//     trajectory_in_order, trajectory_any_order, trajectory_subset,
//     tool_trajectory): scope case; config normalization, args, match.
//   - the built-in metrics latency, cost, safety and semantic_quality:
//     scope turn (default) or case; config is the metric's own keys (see
//     NewBuiltinMetric) without "metric", which the criterion name sets.
//   - llm_judge: kind judge (the default for it), scope case; config
//     rubric, rubric_id, rubric_version (required) and the bounds
//     request_timeout_ms, max_prompt_bytes, max_output_bytes,
//     max_rationale_bytes, max_output_tokens. provider, model and
//     provider_config are refused (reason judge_provider_from_file): the
//     provider, model and settings come from opts.Judge, the machine's
//     configuration, and API keys only from its environment.
//
// Indices in errors are 1-based. An empty list is returned as is (Run
// refuses it unless empty_criteria is "pass").
func ParseCriteriaWithOptions(data []byte, opts CriteriaOptions) ([]Metric, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.Limits{MaxBytes: MaxCriteriaFileBytes})
	if err != nil {
		return nil, evalcore.LimitErr(CodeInvalidCriteriaFile, err)
	}
	if obj, ok := v.(map[string]any); ok {
		if unk := evalcore.UnknownKeys(obj, evalcore.KeySet("criteria")); len(unk) > 0 {
			return nil, evalcore.NewErr(CodeUnknownCriteriaKeys, evalcore.KeysDetail(unk))
		}
		v = obj["criteria"]
	}
	items, ok := v.([]any)
	if !ok {
		return nil, evalcore.NewErr(CodeCriteriaMustBeArray, "")
	}
	out := make([]Metric, 0, len(items))
	seen := map[string]bool{}
	for i, item := range items {
		idx := strconv.Itoa(i + 1)
		m, ok := item.(map[string]any)
		if !ok {
			return nil, evalcore.NewErr(CodeInvalidCriterion, idx)
		}
		if unk := evalcore.UnknownKeys(m, criterionKeys); len(unk) > 0 {
			return nil, evalcore.NewErr(CodeUnknownCriterionKeys, idx+": "+evalcore.KeysDetail(unk))
		}
		id, _ := m["id"].(string)
		name, _ := m["criterion"].(string)
		if id == "" || name == "" {
			return nil, evalcore.NewErr(CodeInvalidCriterion, idx)
		}
		threshold := 1.0
		if t, present := m["threshold"]; present {
			if threshold, ok = evalcore.Fraction(t); !ok {
				return nil, evalcore.NewErr(CodeInvalidCriterion, idx)
			}
		}
		kind := ""
		if k, present := m["kind"]; present {
			if kind, _ = k.(string); kind != KindMetric && kind != KindJudge {
				return nil, evalcore.NewErr(CodeInvalidCriterion, idx)
			}
		}
		scope := ""
		if sc, present := m["scope"]; present {
			if scope, _ = sc.(string); scope != ScopeTurn && scope != ScopeCase {
				return nil, evalcore.NewErr(CodeInvalidCriterion, idx)
			}
		}
		var config map[string]any
		if c, present := m["config"]; present {
			if config, ok = c.(map[string]any); !ok {
				return nil, evalcore.NewErr(CodeInvalidCriterion, idx)
			}
		}
		metric, err := fileMetric(id, name, kind, scope, threshold, config, opts)
		if err != nil {
			if ErrorCode(err) == CodeInvalidMetricID {
				return nil, evalcore.NewErr(CodeInvalidCriterion, idx)
			}
			return nil, &Error{Code: CodeInvalidCriterion, Reason: errorReasonOrCode(err), Detail: idx, Err: err}
		}
		if seen[id] {
			return nil, evalcore.NewErr(CodeDuplicateMetricID, id)
		}
		seen[id] = true
		out = append(out, metric)
	}
	return out, nil
}

// fileMetric builds one criteria-file entry; kind and scope are "" when
// the file leaves them out.
func fileMetric(id, name, kind, scope string, threshold float64, config map[string]any, opts CriteriaOptions) (Metric, error) {
	switch name {
	case MetricLatency, MetricCost, MetricSafety, MetricSemanticQuality:
		if _, ok := config["metric"]; ok {
			return Metric{}, evalcore.ReasonErr(CodeInvalidMetric, "unknown_config_key", id)
		}
		cfg := make(map[string]any, len(config)+1)
		for k, v := range config {
			cfg[k] = v
		}
		cfg["metric"] = name
		if scope == "" {
			scope = ScopeTurn
		}
		m, err := NewBuiltinMetric(id, scope, threshold, cfg)
		if err == nil && kind != "" {
			m.Kind = kind
		}
		return m, err
	case CriterionLLMJudge:
		if kind == KindMetric || scope == ScopeTurn {
			return Metric{}, evalcore.ReasonErr(CodeInvalidMetric, "invalid_module_or_scope", id)
		}
		for k := range config {
			if !fileJudgeConfigKeys[k] {
				if llm.JudgeConfigKeys[k] {
					return Metric{}, evalcore.ReasonErr(CodeInvalidMetric, "judge_provider_from_file", id)
				}
				return Metric{}, evalcore.ReasonErr(CodeInvalidMetric, JudgeUnknownConfigKey, id)
			}
		}
		if opts.Judge == nil {
			return Metric{}, evalcore.ReasonErr(CodeInvalidMetric, "judge_unavailable", id)
		}
		cfg, err := ParseJudgeConfig(config)
		if err != nil {
			return Metric{}, err
		}
		j, err := NewJudge(cfg, *opts.Judge)
		if err != nil {
			return Metric{}, err
		}
		m := j.Metric(id, threshold)
		if err := evalcore.ValidateMetrics([]Metric{m}); err != nil {
			return Metric{}, err
		}
		return m, nil
	}
	if scope == ScopeTurn {
		return Metric{}, evalcore.ReasonErr(CodeInvalidMetric, "invalid_module_or_scope", id)
	}
	if unk := evalcore.UnknownKeys(config, criterionConfigKeys); len(unk) > 0 {
		return Metric{}, evalcore.ReasonErr(CodeInvalidMetric, "unknown_config_key", id)
	}
	m, err := NewCriterion(id, name, threshold, config)
	if err == nil && kind != "" {
		m.Kind = kind
	}
	return m, err
}

// errorReasonOrCode is the reason of a nested contract error, or its
// code when it has none ({llm_judge, R} gives R).
func errorReasonOrCode(err error) string {
	if r := ErrorReason(err); r != "" {
		return r
	}
	return ErrorCode(err)
}

// ParseMetricTolerances reads a --metric-tolerances file: an object of
// metric id → allowed score drop in 0..1.
func ParseMetricTolerances(data []byte) (map[string]float64, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.Limits{MaxBytes: MaxCriteriaFileBytes})
	if err != nil {
		return nil, evalcore.LimitErr(CodeInvalidMetricTolerances, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, evalcore.NewErr(CodeMetricTolerancesNotObject, "")
	}
	out := make(map[string]float64, len(obj))
	for id, t := range obj {
		f, ok := evalcore.Fraction(t)
		if id == "" || !ok {
			return nil, evalcore.NewErr(CodeInvalidMetricTolerances, id)
		}
		out[id] = f
	}
	return out, nil
}
