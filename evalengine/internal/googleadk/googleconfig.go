package googleadk

import (
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/internal/jsonlimit"
)

// Google ADK test_config.json (adk-python's EvalConfig) error codes.
const (
	CodeInvalidGoogleTestConfig = "invalid_google_adk_test_config"
	CodeUnknownGoogleCriterion  = "unknown_google_adk_criterion"
)

// GoogleTestConfigFile is the name adk-python's AgentEvaluator looks for
// beside a .test.json file; adk uses it beside any Google ADK eval set.
const GoogleTestConfigFile = "test_config.json"

// Bounds of a scenario conversation (adk-python's user_simulator_config
// max_allowed_invocations, default 20).
const (
	DefaultScenarioMaxTurns = 20
	MaxScenarioMaxTurns     = 100
)

// GoogleTestConfig is a test_config.json mapped onto adk: the criteria as
// an adk criteria document (ParseCriteria reads it) and the scenario turn
// Bound from its user_simulator_config.
type GoogleTestConfig struct {
	// Criteria is {"criteria": [...]} in adk's criteria file format.
	Criteria []byte
	// MaxTurns is user_simulator_config.max_allowed_invocations, or
	// DefaultScenarioMaxTurns.
	MaxTurns int
}

// googleCriteria lists the adk-python metric names test_config.json may
// use, each with the adk criterion it becomes:
//
//   - tool_trajectory_avg_score → tool_trajectory with args exact and
//     match_type EXACT → exact, IN_ORDER → in_order, ANY_ORDER → subset
//     (adk-python's ANY_ORDER allows extra calls, as adk's subset does).
//     adk scores the whole sample's calls at once (1 or 0) where
//     adk-python averages per invocation; a set whose invocations all
//     match scores 1 in both.
//   - response_match_score → semantic_quality with algorithm token_f1 (a
//     ROUGE-1 F-measure over tokens; adk-python also Porter-stems, so
//     inflected words may score a little lower here).
//
// Any other name (final_response_match_v2, rubric_based_*,
// hallucinations_v1, safety_v1, per_turn_user_simulator_quality_v1, the
// Vertex metrics, custom_metrics) is refused with
// unknown_google_adk_criterion naming it: an LLM-judged criterion is
// written as an adk llm_judge criterion instead (--criteria).
func googleCriteria() []string {
	return []string{"response_match_score", "tool_trajectory_avg_score"}
}

// ParseGoogleTestConfig maps a test_config.json onto adk criteria.
func ParseGoogleTestConfig(data []byte) (*GoogleTestConfig, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.Limits{MaxBytes: evalcore.MaxCriteriaFileBytes})
	if err != nil {
		return nil, evalcore.LimitErr(CodeInvalidGoogleTestConfig, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, evalcore.ReasonErr(CodeInvalidGoogleTestConfig, "not_an_object", "")
	}
	for k := range obj {
		switch k {
		case "criteria", "user_simulator_config", "userSimulatorConfig":
		case "custom_metrics", "customMetrics":
			return nil, evalcore.ReasonErr(CodeUnknownGoogleCriterion, "custom_metrics", "Python code metrics cannot run here")
		default:
			return nil, evalcore.ReasonErr(CodeInvalidGoogleTestConfig, "unknown_key", k)
		}
	}
	out := &GoogleTestConfig{MaxTurns: DefaultScenarioMaxTurns}
	if usc, ok := gget(obj, "user_simulator_config"); ok {
		m, ok := usc.(map[string]any)
		if !ok {
			return nil, evalcore.ReasonErr(CodeInvalidGoogleTestConfig, "user_simulator_config", "")
		}
		if n, ok := gget(m, "max_allowed_invocations"); ok {
			f, ok := numberOf(n)
			if !ok || f != float64(int(f)) || f < 1 || f > MaxScenarioMaxTurns {
				return nil, evalcore.ReasonErr(CodeInvalidGoogleTestConfig, "max_allowed_invocations", "1.."+strconv.Itoa(MaxScenarioMaxTurns))
			}
			out.MaxTurns = int(f)
		}
	}
	critV, ok := obj["criteria"]
	if !ok {
		// adk-python's defaults when the file names no criteria.
		critV = map[string]any{"tool_trajectory_avg_score": 1.0, "response_match_score": 0.8}
	}
	crit, ok := critV.(map[string]any)
	if !ok {
		return nil, evalcore.ReasonErr(CodeInvalidGoogleTestConfig, "criteria", "")
	}
	names := make([]string, 0, len(crit))
	for k := range crit {
		names = append(names, k)
	}
	sort.Strings(names)
	items := make([]any, 0, len(names))
	for _, name := range names {
		item, err := googleCriterion(name, crit[name])
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	doc, err := canonjson.Marshal(map[string]any{"criteria": items})
	if err != nil {
		return nil, evalcore.ReasonErr(CodeInvalidGoogleTestConfig, "criteria", "")
	}
	out.Criteria = doc
	return out, nil
}

// googleCriterion maps one test_config.json criterion: a bare threshold or
// an object with threshold (and match_type for trajectories).
func googleCriterion(name string, v any) (map[string]any, error) {
	if !slices.Contains(googleCriteria(), name) {
		return nil, evalcore.ReasonErr(CodeUnknownGoogleCriterion, name, "supported: "+strings.Join(googleCriteria(), ", "))
	}
	threshold, obj, err := googleThreshold(name, v)
	if err != nil {
		return nil, err
	}
	switch name {
	case "tool_trajectory_avg_score":
		match := evalcore.MatchExact
		for k, mv := range obj {
			switch k {
			case "threshold":
			case "match_type", "matchType":
				s, _ := mv.(string)
				switch strings.ToUpper(s) {
				case "EXACT":
					match = evalcore.MatchExact
				case "IN_ORDER":
					match = evalcore.MatchInOrder
				case "ANY_ORDER":
					match = evalcore.MatchSubset
				default:
					return nil, evalcore.ReasonErr(CodeInvalidGoogleTestConfig, name+".match_type", "EXACT, IN_ORDER or ANY_ORDER")
				}
			default:
				return nil, evalcore.ReasonErr(CodeInvalidGoogleTestConfig, name+"."+k, "unknown key")
			}
		}
		return map[string]any{"id": name, "criterion": evalcore.CriterionToolTrajectory, "threshold": threshold,
			"config": map[string]any{"match": match, "args": evalcore.ArgsExact}}, nil
	case "response_match_score":
		for k := range obj {
			if k != "threshold" {
				return nil, evalcore.ReasonErr(CodeInvalidGoogleTestConfig, name+"."+k, "unknown key")
			}
		}
		return map[string]any{"id": name, "criterion": evalcore.MetricSemanticQuality, "threshold": threshold,
			"config": map[string]any{"algorithm": evalcore.SemanticTokenF1}}, nil
	}
	return nil, evalcore.ReasonErr(CodeUnknownGoogleCriterion, name, "supported: "+strings.Join(googleCriteria(), ", "))
}

func googleThreshold(name string, v any) (float64, map[string]any, error) {
	var t any = v
	obj, isObj := v.(map[string]any)
	if isObj {
		t = obj["threshold"]
	}
	f, ok := numberOf(t)
	if !ok || f < 0 || f > 1 {
		return 0, nil, evalcore.ReasonErr(CodeInvalidGoogleTestConfig, name+".threshold", "a number 0..1")
	}
	return f, obj, nil
}

// numberOf reads a decoded JSON number.
func numberOf(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}
