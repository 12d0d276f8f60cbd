package evalengine

import (
	"strconv"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// MaxCriteriaFileBytes caps a criteria or tolerances file (CONTRACTS §5.11).
const MaxCriteriaFileBytes = 1 << 20

var (
	criterionKeys       = keySet("id", "criterion", "threshold", "kind", "config")
	criterionConfigKeys = keySet("normalization", "args", "match")
)

// DefaultCriteria is what the CLI uses without --criteria: one
// exact_response criterion with id "response" and threshold 1.0.
func DefaultCriteria() []Metric {
	m, err := NewCriterion("response", CriterionExactResponse, 1.0, nil)
	if err != nil {
		panic(err) // a constant, valid by construction
	}
	return []Metric{m}
}

// ParseCriteria reads a CLI criteria file (§5.7): a JSON array of
// {id, criterion, threshold?, kind?, config?}, or an object with exactly
// the key "criteria" holding that array. Only built-in criteria can be
// named; no custom modules, judges or provider configuration. Indices in
// errors are 1-based. An empty list is returned as is (Run refuses it
// unless empty_criteria is "pass").
func ParseCriteria(data []byte) ([]Metric, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.Limits{MaxBytes: MaxCriteriaFileBytes})
	if err != nil {
		return nil, limitErr(CodeInvalidCriteriaFile, err)
	}
	if obj, ok := v.(map[string]any); ok {
		if unk := unknownKeys(obj, keySet("criteria")); len(unk) > 0 {
			return nil, newErr(CodeUnknownCriteriaKeys, keysDetail(unk))
		}
		v = obj["criteria"]
	}
	items, ok := v.([]any)
	if !ok {
		return nil, newErr(CodeCriteriaMustBeArray, "")
	}
	out := make([]Metric, 0, len(items))
	seen := map[string]bool{}
	for i, item := range items {
		idx := strconv.Itoa(i + 1)
		m, ok := item.(map[string]any)
		if !ok {
			return nil, newErr(CodeInvalidCriterion, idx)
		}
		if unk := unknownKeys(m, criterionKeys); len(unk) > 0 {
			return nil, newErr(CodeUnknownCriterionKeys, idx+": "+keysDetail(unk))
		}
		id, _ := m["id"].(string)
		name, _ := m["criterion"].(string)
		if id == "" || name == "" {
			return nil, newErr(CodeInvalidCriterion, idx)
		}
		threshold := 1.0
		if t, present := m["threshold"]; present {
			if threshold, ok = fraction(t); !ok {
				return nil, newErr(CodeInvalidCriterion, idx)
			}
		}
		kind := KindMetric
		if k, present := m["kind"]; present {
			if kind, _ = k.(string); kind != KindMetric && kind != KindJudge {
				return nil, newErr(CodeInvalidCriterion, idx)
			}
		}
		var config map[string]any
		if c, present := m["config"]; present {
			if config, ok = c.(map[string]any); !ok {
				return nil, newErr(CodeInvalidCriterion, idx)
			}
			if unk := unknownKeys(config, criterionConfigKeys); len(unk) > 0 {
				return nil, newErr(CodeInvalidCriterion, idx)
			}
		}
		metric, err := NewCriterion(id, name, threshold, config)
		if err != nil {
			if ErrorCode(err) == CodeInvalidMetricID {
				return nil, newErr(CodeInvalidCriterion, idx)
			}
			return nil, &Error{Code: CodeInvalidCriterion, Reason: ErrorReason(err), Detail: idx, Err: err}
		}
		metric.Kind = kind
		if seen[id] {
			return nil, newErr(CodeDuplicateMetricID, id)
		}
		seen[id] = true
		out = append(out, metric)
	}
	return out, nil
}

// ParseMetricTolerances reads a --metric-tolerances file: an object of
// metric id → allowed score drop in 0..1.
func ParseMetricTolerances(data []byte) (map[string]float64, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.Limits{MaxBytes: MaxCriteriaFileBytes})
	if err != nil {
		return nil, limitErr(CodeInvalidMetricTolerances, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, newErr(CodeMetricTolerancesNotObject, "")
	}
	out := make(map[string]float64, len(obj))
	for id, t := range obj {
		f, ok := fraction(t)
		if id == "" || !ok {
			return nil, newErr(CodeInvalidMetricTolerances, id)
		}
		out[id] = f
	}
	return out, nil
}
