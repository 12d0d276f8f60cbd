package evalcore

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"unicode"
)

// Built-in metric names (CONTRACTS §5.12), chosen by config "metric".
const (
	MetricLatency         = "latency"
	MetricCost            = "cost"
	MetricSafety          = "safety"
	MetricSemanticQuality = "semantic_quality"

	SemanticTokenF1         = "token_f1"
	SemanticExactNormalized = "exact_normalized"
)

// Built-in metric config errors: the Reason of an invalid_eval_metric.
const (
	ReasonInvalidLatencyConfig  = "invalid_latency_metric_config"
	ReasonInvalidCostConfig     = "invalid_cost_metric_config"
	ReasonInvalidSafetyConfig   = "invalid_safety_metric_config"
	ReasonInvalidSemanticConfig = "invalid_semantic_metric_config"
	ReasonInvalidBuiltinMetric  = "invalid_builtin_eval_metric"
)

// not_evaluated reasons of the built-in metrics.
const (
	ReasonLatencyUnavailable  = "latency_unavailable"
	ReasonUsageUnavailable    = "usage_unavailable"
	ReasonSafetyUnavailable   = "safety_unavailable"
	ReasonTextUnavailable     = "text_unavailable"
	ReasonExpectedUnavailable = "expected_unavailable"
	ReasonActualUnavailable   = "actual_unavailable"
)

// Built-in metric bounds.
const (
	maxLatencyMS      = 3_600_000
	maxMicrounits     = 1_000_000_000_000
	maxSafetyLimit    = 10_000
	maxSafetyListSize = 1_000_000
)

// NewBuiltinMetric builds a provider-free built-in metric (§5.12) of the
// given scope (ScopeTurn or ScopeCase). config["metric"] names it:
//
//   - latency: target_ms (1000), hard_limit_ms (max(target, 4·target)),
//     1..3 600 000 ms, hard ≥ target. Score 1 at or under the target,
//     falling linearly to 0 at the hard limit. The turn's measured
//     latency (adapter_metadata.runtime_latency_ms); case scope is the
//     mean of the turns' scores.
//   - cost: input_microunits_per_million, output_microunits_per_million
//     (0), max_cost_microunits (1, > 0), integers ≤ 10¹². cost =
//     (in·inRate + out·outRate)/10⁶; score 1 within budget, else
//     max/cost. Tokens from adapter metadata usage.{input_tokens |
//     prompt_tokens, output_tokens | completion_tokens}; case scope sums
//     the turns.
//   - safety: max_violations (0, ≤ 10 000). Score 1 when the count of
//     adapter metadata safety_violations (an integer or a list) is within
//     it, else 0; case scope sums the turns.
//   - semantic_quality: algorithm token_f1 (default) | exact_normalized,
//     over trimmed, case-folded text. Turn scope compares the turn's
//     expected response with its output; case scope the case's
//     expected_final_response with the last turn's output.
//
// Missing data is never guessed: it is not_evaluated with reason
// latency_unavailable, usage_unavailable, safety_unavailable,
// text_unavailable, expected_unavailable or actual_unavailable. In case
// scope every turn must carry the data.
func NewBuiltinMetric(id, scope string, threshold float64, config map[string]any) (Metric, error) {
	m := Metric{ID: id, Kind: KindMetric, Threshold: threshold}
	name, _ := config["metric"].(string)
	var (
		b   builtinMetric
		err error
	)
	switch name {
	case MetricLatency:
		b, err = newLatencyMetric(config)
	case MetricCost:
		b, err = newCostMetric(config)
	case MetricSafety:
		b, err = newSafetyMetric(config)
	case MetricSemanticQuality:
		b, err = newSemanticMetric(config)
	default:
		return Metric{}, ReasonErr(CodeInvalidMetric, ReasonInvalidBuiltinMetric, id)
	}
	if err != nil {
		return Metric{}, ReasonErr(CodeInvalidMetric, err.Error(), id)
	}
	switch scope {
	case ScopeTurn:
		m.Turn = builtinTurn{b}
	case "", ScopeCase:
		m.Case = builtinCase{b}
	default:
		return Metric{}, ReasonErr(CodeInvalidMetric, "invalid_module_or_scope", id)
	}
	if err := ValidateMetrics([]Metric{m}); err != nil {
		return Metric{}, err
	}
	return m, nil
}

// builtinMetric scores a turn, and a case as an aggregate over turns.
type builtinMetric interface {
	turn(e TurnEval) Score
	caseScore(e CaseEval) Score
}

type builtinTurn struct{ b builtinMetric }

// ScoreTurn scores one turn.
func (t builtinTurn) ScoreTurn(_ context.Context, e TurnEval) Score { return t.b.turn(e) }

type builtinCase struct{ b builtinMetric }

// ScoreCase scores a whole sample.
func (c builtinCase) ScoreCase(_ context.Context, e CaseEval) Score { return c.b.caseScore(e) }

// configError is a config reason carried as an error inside this file.
type configError string

func (e configError) Error() string { return string(e) }

// intConfig reads config[key] as an integer in lo..hi, or def when absent.
func intConfig(config map[string]any, key string, def, lo, hi int64) (int64, bool) {
	v, ok := config[key]
	if !ok {
		return def, true
	}
	n, ok := JSONInt(v)
	return n, ok && n >= lo && n <= hi
}

// JSONInt reads a JSON number that is an exact integer.
func JSONInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
	}
	f, ok := toFloat(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

func onlyKeys(config map[string]any, keys ...string) bool {
	return len(UnknownKeys(config, KeySet(append(keys, "metric")...))) == 0
}

// latencyMetric scores measured latency against a target and hard limit.
type latencyMetric struct{ target, hard int64 }

func newLatencyMetric(config map[string]any) (builtinMetric, error) {
	bad := configError(ReasonInvalidLatencyConfig)
	if !onlyKeys(config, "target_ms", "hard_limit_ms") {
		return nil, bad
	}
	target, ok := intConfig(config, "target_ms", 1000, 1, maxLatencyMS)
	if !ok {
		return nil, bad
	}
	hard, ok := intConfig(config, "hard_limit_ms", min(4*target, maxLatencyMS), 1, maxLatencyMS)
	if !ok || hard < target {
		return nil, bad
	}
	return latencyMetric{target: target, hard: hard}, nil
}

func (l latencyMetric) score(ms float64) Score {
	s := 1.0
	if ms > float64(l.target) {
		if l.hard == l.target {
			s = 0
		} else {
			s = clamp01(1 - (ms-float64(l.target))/float64(l.hard-l.target))
		}
	}
	return OK(s, map[string]any{"metric": MetricLatency, "latency_ms": ms, "target_ms": l.target, "hard_limit_ms": l.hard})
}

func (l latencyMetric) turn(e TurnEval) Score {
	if e.LatencyMS < 0 {
		return NotEvaluated(ReasonLatencyUnavailable)
	}
	return l.score(float64(e.LatencyMS))
}

// caseScore is the mean of the turns' scores: the contract's vector (50
// ms and 150 ms against 100/200) is (1 + 0.5)/2 = 0.75, where the score
// of the mean latency would be 1.
func (l latencyMetric) caseScore(e CaseEval) Score {
	if len(e.LatenciesMS) == 0 {
		return NotEvaluated(ReasonLatencyUnavailable)
	}
	sum, total := 0.0, 0.0
	for _, ms := range e.LatenciesMS {
		if ms < 0 {
			return NotEvaluated(ReasonLatencyUnavailable)
		}
		sum += l.score(float64(ms)).Value
		total += float64(ms)
	}
	n := float64(len(e.LatenciesMS))
	return OK(sum/n, map[string]any{"metric": MetricLatency, "mean_latency_ms": total / n, "target_ms": l.target, "hard_limit_ms": l.hard})
}

// costMetric prices token usage in micro-units.
type costMetric struct{ inRate, outRate, maxCost int64 }

func newCostMetric(config map[string]any) (builtinMetric, error) {
	bad := configError(ReasonInvalidCostConfig)
	if !onlyKeys(config, "input_microunits_per_million", "output_microunits_per_million", "max_cost_microunits") {
		return nil, bad
	}
	in, ok1 := intConfig(config, "input_microunits_per_million", 0, 0, maxMicrounits)
	out, ok2 := intConfig(config, "output_microunits_per_million", 0, 0, maxMicrounits)
	maxCost, ok3 := intConfig(config, "max_cost_microunits", 1, 1, maxMicrounits)
	if !ok1 || !ok2 || !ok3 {
		return nil, bad
	}
	return costMetric{inRate: in, outRate: out, maxCost: maxCost}, nil
}

// UsageOf reads the token counters of one turn's adapter metadata.
func UsageOf(meta map[string]any) (in, out int64, ok bool) {
	u, _ := meta["usage"].(map[string]any)
	if u == nil {
		return 0, 0, false
	}
	read := func(keys ...string) (int64, bool) {
		for _, k := range keys {
			if v, present := u[k]; present {
				n, ok := JSONInt(v)
				return n, ok && n >= 0
			}
		}
		return 0, false
	}
	in, ok1 := read("input_tokens", "prompt_tokens")
	out, ok2 := read("output_tokens", "completion_tokens")
	return in, out, ok1 && ok2
}

// score prices in and out tokens. Float arithmetic: rates and counts up to
// 10¹² would overflow an int64 product, and the score is a ratio anyway.
// The metadata avoids the word "token", which the secret pruner drops.
func (c costMetric) score(in, out int64) Score {
	cost := (float64(in)*float64(c.inRate) + float64(out)*float64(c.outRate)) / 1e6
	s := 1.0
	if cost > float64(c.maxCost) {
		s = float64(c.maxCost) / cost
	}
	return OK(s, map[string]any{
		"metric": MetricCost, "usage_input": in, "usage_output": out,
		"cost_microunits": cost, "max_cost_microunits": c.maxCost,
	})
}

func (c costMetric) turn(e TurnEval) Score {
	in, out, ok := UsageOf(e.Output.Metadata)
	if !ok {
		return NotEvaluated(ReasonUsageUnavailable)
	}
	return c.score(in, out)
}

func (c costMetric) caseScore(e CaseEval) Score {
	if len(e.Outputs) == 0 {
		return NotEvaluated(ReasonUsageUnavailable)
	}
	var in, out int64
	for _, o := range e.Outputs {
		i, j, ok := UsageOf(o.Metadata)
		if !ok {
			return NotEvaluated(ReasonUsageUnavailable)
		}
		in, out = in+i, out+j
	}
	return c.score(in, out)
}

// safetyMetric counts reported safety violations.
type safetyMetric struct{ max int64 }

func newSafetyMetric(config map[string]any) (builtinMetric, error) {
	bad := configError(ReasonInvalidSafetyConfig)
	if !onlyKeys(config, "max_violations") {
		return nil, bad
	}
	n, ok := intConfig(config, "max_violations", 0, 0, maxSafetyLimit)
	if !ok {
		return nil, bad
	}
	return safetyMetric{max: n}, nil
}

func violationsOf(meta map[string]any) (int64, bool) {
	switch v := meta["safety_violations"].(type) {
	case nil:
		return 0, false
	case []any:
		return int64(len(v)), true
	default:
		n, ok := JSONInt(v)
		return n, ok && n >= 0 && n <= maxSafetyListSize
	}
}

func (s safetyMetric) score(count int64) Score {
	v := 0.0
	if count <= s.max {
		v = 1
	}
	return OK(v, map[string]any{"metric": MetricSafety, "violation_count": count, "max_violations": s.max})
}

func (s safetyMetric) turn(e TurnEval) Score {
	n, ok := violationsOf(e.Output.Metadata)
	if !ok {
		return NotEvaluated(ReasonSafetyUnavailable)
	}
	return s.score(n)
}

func (s safetyMetric) caseScore(e CaseEval) Score {
	if len(e.Outputs) == 0 {
		return NotEvaluated(ReasonSafetyUnavailable)
	}
	var total int64
	for _, o := range e.Outputs {
		n, ok := violationsOf(o.Metadata)
		if !ok {
			return NotEvaluated(ReasonSafetyUnavailable)
		}
		total += n
	}
	return s.score(total)
}

// semanticMetric compares expected and actual text deterministically.
type semanticMetric struct{ algorithm string }

func newSemanticMetric(config map[string]any) (builtinMetric, error) {
	bad := configError(ReasonInvalidSemanticConfig)
	if !onlyKeys(config, "algorithm") {
		return nil, bad
	}
	alg := SemanticTokenF1
	if v, ok := config["algorithm"]; ok {
		alg, _ = v.(string)
		if alg != SemanticTokenF1 && alg != SemanticExactNormalized {
			return nil, bad
		}
	}
	return semanticMetric{algorithm: alg}, nil
}

func (s semanticMetric) compare(expected any, hasExpected bool, actual any) Score {
	if !hasExpected {
		return NotEvaluated(ReasonExpectedUnavailable)
	}
	if actual == nil {
		return NotEvaluated(ReasonActualUnavailable)
	}
	es, ok1 := expected.(string)
	as, ok2 := actual.(string)
	if !ok1 || !ok2 {
		return NotEvaluated(ReasonTextUnavailable)
	}
	var v float64
	if s.algorithm == SemanticExactNormalized {
		if normalizeText(es) == normalizeText(as) {
			v = 1
		}
	} else {
		v = TokenF1(es, as)
	}
	return OK(v, map[string]any{"metric": MetricSemanticQuality, "algorithm": s.algorithm})
}

func (s semanticMetric) turn(e TurnEval) Score {
	var exp any
	ok := false
	if e.Turn != nil {
		exp, ok = ExpectedResponse(e.Turn.Expected)
	}
	return s.compare(exp, ok, e.Output.Output)
}

func (s semanticMetric) caseScore(e CaseEval) Score {
	exp := e.Case.ExpectedFinalResponse
	if len(e.Outputs) == 0 {
		return s.compare(exp, exp != nil, nil)
	}
	return s.compare(exp, exp != nil, e.Outputs[len(e.Outputs)-1].Output)
}

// normalizeText trims and case-folds.
func normalizeText(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// tokens splits normalized text on every rune that is not a letter, a
// digit or an underscore.
func tokens(s string) []string {
	return strings.FieldsFunc(normalizeText(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
	})
}

// TokenF1 is the multiset token F1 of two texts after trimming and case
// folding: 1 when both have no tokens, 0 when only one has none.
func TokenF1(expected, actual string) float64 {
	e, a := tokens(expected), tokens(actual)
	if len(e) == 0 && len(a) == 0 {
		return 1
	}
	if len(e) == 0 || len(a) == 0 {
		return 0
	}
	counts := make(map[string]int, len(e))
	for _, t := range e {
		counts[t]++
	}
	common := 0
	for _, t := range a {
		if counts[t] > 0 {
			counts[t]--
			common++
		}
	}
	if common == 0 {
		return 0
	}
	p := float64(common) / float64(len(a))
	r := float64(common) / float64(len(e))
	return 2 * p * r / (p + r)
}
