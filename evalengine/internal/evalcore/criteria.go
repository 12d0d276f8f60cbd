package evalcore

import (
	"context"
	"math"
	"strings"
)

// Metric kinds, scopes and metric statuses (CONTRACTS §5.3, §5.5).
const (
	KindMetric = "metric"
	KindJudge  = "judge"

	ScopeTurn = "turn"
	ScopeCase = "case"

	StatusOK           = "ok"
	StatusError        = "error"
	StatusNotEvaluated = "not_evaluated"
	StatusPartial      = "partial" // case-level criteria only
)

// Built-in criterion names (§5.6).
const (
	CriterionExactResponse      = "exact_response"
	CriterionTrajectoryExact    = "trajectory_exact"
	CriterionTrajectoryInOrder  = "trajectory_in_order"
	CriterionTrajectoryAnyOrder = "trajectory_any_order"
	CriterionTrajectorySubset   = "trajectory_subset"
	CriterionToolTrajectory     = "tool_trajectory"
)

// Trajectory match policies, argument policies and response normalizations.
const (
	MatchExact    = "exact"
	MatchInOrder  = "in_order"
	MatchAnyOrder = "any_order"
	MatchSubset   = "subset"

	ArgsExact   = "exact"
	ArgsSubset  = "subset"
	ArgsIgnored = "ignored"

	NormalizeExact        = "exact"
	NormalizeTrim         = "trim"
	NormalizeCasefoldTrim = "casefold_trim"
)

// maxMetricIDBytes bounds a metric id.
const maxMetricIDBytes = 256

// Metric is one criterion the engine scores. Exactly one of Turn and Case
// is set; that choice is the metric's scope. Built-ins come from
// NewCriterion (always case scope, as the contract forces) or the criteria
// file; custom metrics implement TurnScorer or CaseScorer.
type Metric struct {
	ID        string
	Kind      string  // KindMetric (default when "") or KindJudge
	Threshold float64 // 0..1; passed = status ok ∧ score ≥ Threshold
	Turn      TurnScorer
	Case      CaseScorer
}

// Scope returns ScopeTurn or ScopeCase.
func (m Metric) Scope() string {
	if m.Turn != nil {
		return ScopeTurn
	}
	return ScopeCase
}

func (m Metric) kind() string {
	if m.Kind == "" {
		return KindMetric
	}
	return m.Kind
}

// TurnScorer scores one turn of one sample.
type TurnScorer interface {
	ScoreTurn(ctx context.Context, e TurnEval) Score
}

// CaseScorer scores a whole sample once its turns have run.
type CaseScorer interface {
	ScoreCase(ctx context.Context, e CaseEval) Score
}

// TurnEval is what a turn-scope metric sees.
type TurnEval struct {
	Case        *Case
	CaseIndex   int
	SampleID    string
	SampleIndex int
	Turn        *Turn
	TurnIndex   int
	Output      TurnOutput // with the full trajectory, tool content included
	LatencyMS   int64
}

// CaseEval is what a case-scope metric sees: every turn's output in order.
type CaseEval struct {
	Case        *Case
	CaseIndex   int
	SampleID    string
	SampleIndex int
	Outputs     []TurnOutput // one per turn
	LatenciesMS []int64      // one per turn
}

// Trajectory returns every turn's tool steps concatenated, in order.
func (e CaseEval) Trajectory() []ToolStep {
	var out []ToolStep
	for _, o := range e.Outputs {
		out = append(out, o.Trajectory...)
	}
	return out
}

// Score is a metric's answer. Status "" means ok. An ok score outside 0..1
// (or NaN) becomes an error; not_evaluated and error score 0.
type Score struct {
	Value    float64
	Status   string
	Metadata map[string]any
}

// OK is an evaluated score.
func OK(v float64, meta map[string]any) Score {
	return Score{Value: v, Status: StatusOK, Metadata: meta}
}

// NotEvaluated is a score for missing expectations or data.
func NotEvaluated(reason string) Score {
	return Score{Status: StatusNotEvaluated, Metadata: map[string]any{"reason": reason}}
}

// ScoreError is a failed metric; it never passes.
func ScoreError(reason string) Score {
	return Score{Status: StatusError, Metadata: map[string]any{"reason": reason}}
}

// normalize applies the §5.3 return normalization.
func (s Score) normalize() Score {
	switch s.Status {
	case "", StatusOK:
		if math.IsNaN(s.Value) || s.Value < 0 || s.Value > 1 {
			return ScoreError("invalid_metric_score")
		}
		s.Status = StatusOK
	case StatusNotEvaluated, StatusError:
		s.Value = 0
	default:
		return ScoreError("invalid_metric_status")
	}
	return s
}

// ValidateMetrics checks ids, kinds, thresholds and scorers.
func ValidateMetrics(ms []Metric) error {
	seen := make(map[string]bool, len(ms))
	for _, m := range ms {
		if m.ID == "" || len(m.ID) > maxMetricIDBytes {
			return NewErr(CodeInvalidMetricID, m.ID)
		}
		if seen[m.ID] {
			return NewErr(CodeDuplicateMetricID, m.ID)
		}
		seen[m.ID] = true
		switch {
		case m.Kind != "" && m.Kind != KindMetric && m.Kind != KindJudge:
			return ReasonErr(CodeInvalidMetric, "invalid_kind", m.ID)
		case !isFraction(m.Threshold):
			return ReasonErr(CodeInvalidMetric, "invalid_threshold", m.ID)
		case (m.Turn == nil) == (m.Case == nil):
			return ReasonErr(CodeInvalidMetric, "missing_callback", m.ID)
		}
	}
	return nil
}

// NewCriterion builds a built-in criterion (§5.6) as a case-scope metric.
// config may hold normalization (exact_response), args and match
// (tool_trajectory; args for every trajectory criterion); other keys or
// values are invalid_eval_metric.
func NewCriterion(id, criterion string, threshold float64, config map[string]any) (Metric, error) {
	m := Metric{ID: id, Kind: KindMetric, Threshold: threshold}
	str := func(key, def string, allowed ...string) (string, error) {
		v, ok := config[key]
		if !ok {
			return def, nil
		}
		s, _ := v.(string)
		for _, a := range allowed {
			if s == a {
				return s, nil
			}
		}
		return "", ReasonErr(CodeInvalidMetric, "invalid_"+key, id)
	}
	allowedKeys := map[string]bool{}
	switch criterion {
	case CriterionExactResponse:
		allowedKeys["normalization"] = true
		norm, err := str("normalization", NormalizeExact, NormalizeExact, NormalizeTrim, NormalizeCasefoldTrim)
		if err != nil {
			return Metric{}, err
		}
		m.Case = exactResponse{normalization: norm}
	case CriterionTrajectoryExact, CriterionTrajectoryInOrder, CriterionTrajectoryAnyOrder, CriterionTrajectorySubset, CriterionToolTrajectory:
		allowedKeys["args"] = true
		match := strings.TrimPrefix(criterion, "trajectory_")
		if criterion == CriterionToolTrajectory {
			allowedKeys["match"] = true
			var err error
			if match, err = str("match", MatchExact, MatchExact, MatchInOrder, MatchAnyOrder, MatchSubset); err != nil {
				return Metric{}, err
			}
		}
		args, err := str("args", ArgsExact, ArgsExact, ArgsSubset, ArgsIgnored, "ignore")
		if err != nil {
			return Metric{}, err
		}
		if args == "ignore" {
			args = ArgsIgnored
		}
		m.Case = toolTrajectory{match: match, args: args}
	default:
		return Metric{}, ReasonErr(CodeInvalidMetric, "unknown_criterion", id)
	}
	for k := range config {
		if !allowedKeys[k] {
			return Metric{}, ReasonErr(CodeInvalidMetric, "unknown_config_key", id)
		}
	}
	if err := ValidateMetrics([]Metric{m}); err != nil {
		return Metric{}, err
	}
	return m, nil
}

// exactResponse is the exact_response criterion.
type exactResponse struct{ normalization string }

// ScoreCase compares expected responses with actual outputs (§5.6).
func (c exactResponse) ScoreCase(_ context.Context, e CaseEval) Score {
	matched, pairs := 0, 0
	var mismatch map[string]any
	compare := func(ti int, exp, act any) {
		pairs++
		if c.equal(exp, act) {
			matched++
		} else if mismatch == nil {
			mismatch = responseMismatch(ti, exp, act)
		}
	}
	if e.Case.ExpectedFinalResponse != nil {
		if n := len(e.Outputs); n > 0 {
			compare(n-1, e.Case.ExpectedFinalResponse, e.Outputs[n-1].Output)
		}
	} else {
		for i := range e.Case.Turns {
			if exp, ok := ExpectedResponse(e.Case.Turns[i].Expected); ok && i < len(e.Outputs) {
				compare(i, exp, e.Outputs[i].Output)
			}
		}
	}
	if pairs == 0 {
		return NotEvaluated("missing_expected_response")
	}
	meta := map[string]any{
		"criterion":      CriterionExactResponse,
		"normalization":  normalizationValue(c.normalization),
		"matched_count":  matched,
		"expected_count": pairs,
	}
	if mismatch != nil {
		meta[MetaFirstMismatch] = mismatch
	}
	return OK(float64(matched)/float64(pairs), meta)
}

// normalizationValue is a normalization as a metadata value: a known one
// is a constant, which boxes without an allocation.
func normalizationValue(n string) any {
	switch n {
	case NormalizeExact:
		return NormalizeExact
	case NormalizeTrim:
		return NormalizeTrim
	case NormalizeCasefoldTrim:
		return NormalizeCasefoldTrim
	}
	return n
}

func (c exactResponse) equal(exp, act any) bool {
	es, ok1 := exp.(string)
	as, ok2 := act.(string)
	if !ok1 || !ok2 {
		return jsonEqual(exp, act)
	}
	switch c.normalization {
	case NormalizeTrim:
		return strings.TrimSpace(es) == strings.TrimSpace(as)
	case NormalizeCasefoldTrim:
		return strings.EqualFold(strings.TrimSpace(es), strings.TrimSpace(as))
	}
	return es == as
}

// ExpectedResponse finds a turn's expected response. A null expectation is
// no expectation (doc.go, quirk 1).
func ExpectedResponse(expected any) (any, bool) {
	switch x := expected.(type) {
	case nil:
		return nil, false
	case map[string]any:
		for _, k := range [...]string{"response", "final_response", "expected_response"} {
			if v, ok := x[k]; ok && v != nil {
				return v, true
			}
		}
		return nil, false
	}
	return expected, true
}

// toolTrajectory is every trajectory criterion.
type toolTrajectory struct{ match, args string }

type expectedStep struct {
	name     string
	kind     string
	args     any
	nameOnly bool
}

// ScoreCase matches the expected trajectory against the actual tool calls.
func (c toolTrajectory) ScoreCase(_ context.Context, e CaseEval) Score {
	exp, reason := expectedTrajectory(e.Case)
	if reason != "" {
		return NotEvaluated(reason)
	}
	var act []ToolStep
	for _, o := range e.Outputs {
		for _, s := range o.Trajectory {
			if s.Kind == "" || s.Kind == KindToolCall {
				act = append(act, s)
			}
		}
	}
	matched := c.multisetMatches(exp, act)
	var pass bool
	switch c.match {
	case MatchExact:
		pass = len(exp) == len(act)
		for i := 0; pass && i < len(exp); i++ {
			pass = c.stepMatches(exp[i], act[i])
		}
	case MatchInOrder:
		j := 0
		for _, es := range exp {
			for j < len(act) && !c.stepMatches(es, act[j]) {
				j++
			}
			if j == len(act) {
				j = -1
				break
			}
			j++
		}
		pass = j >= 0
	case MatchAnyOrder:
		pass = len(exp) == len(act) && matched == len(exp)
	case MatchSubset:
		pass = matched == len(exp)
	}
	score := 0.0
	if pass {
		score = 1
	}
	meta := map[string]any{
		"criterion":      CriterionToolTrajectory,
		"match_policy":   c.match,
		"args_policy":    c.args,
		"expected_count": len(exp),
		"actual_count":   len(act),
		"matched_count":  matched,
	}
	if !pass {
		meta[MetaFirstMismatch] = c.firstMismatch(exp, act)
	}
	return OK(score, meta)
}

// firstMismatch names the first expected call the policy could not match
// and the actual call found in its place (index -1 when there is none), so
// a report can say "expected lookup(q=x), got search". Only the expected
// side carries arguments: the actual arguments are tool content, which the
// result holds only under capture_tool_content, and the report reads them
// from there (report.Failures).
func (c toolTrajectory) firstMismatch(exp []expectedStep, act []ToolStep) map[string]any {
	ei, ai := -1, -1
	switch c.match {
	case MatchExact:
		for i := 0; ; i++ {
			if i >= len(exp) || i >= len(act) || !c.stepMatches(exp[i], act[i]) {
				if i < len(exp) {
					ei = i
				}
				if i < len(act) {
					ai = i
				}
				break
			}
		}
	case MatchInOrder:
		j := 0
		for i, es := range exp {
			start := j
			for j < len(act) && !c.stepMatches(es, act[j]) {
				j++
			}
			if j == len(act) {
				ei = i
				if start < len(act) {
					ai = start
				}
				break
			}
			j++
		}
	default: // any_order, subset: the first expected call no actual call matched
		used := make([]bool, len(act))
		for i, es := range exp {
			found := false
			for j := range act {
				if !used[j] && c.stepMatches(es, act[j]) {
					used[j], found = true, true
					break
				}
			}
			if !found && ei < 0 {
				ei = i
			}
		}
		for j := range act {
			if !used[j] {
				ai = j
				break
			}
		}
	}
	m := map[string]any{"expected_index": ei, "actual_index": ai, "expected": nil, "actual": nil}
	if ei >= 0 {
		m["expected"] = exp[ei].describe()
	}
	if ai >= 0 {
		m["actual"] = act[ai].Tool
	}
	return m
}

// describe renders an expected call as `tool` or `tool {"arg":...}` with the
// arguments pruned of secrets and bounded.
func (e expectedStep) describe() string {
	if e.nameOnly {
		return e.name
	}
	return e.name + " " + Excerpt(e.args)
}

// MetaFirstMismatch is the metric metadata key of a criterion's first
// mismatch; report.Failures reads it.
const MetaFirstMismatch = "first_mismatch"

// responseMismatch records the first expected/actual response pair that
// differed, as bounded excerpts.
func responseMismatch(turnIndex int, exp, act any) map[string]any {
	return map[string]any{"turn_index": turnIndex, "expected": Excerpt(exp), "actual": Excerpt(act)}
}

// expectedTrajectory reads the case's expected trajectory, else the turns'
// expected.trajectory / expected.tool_uses concatenated.
func expectedTrajectory(c *Case) ([]expectedStep, string) {
	var raw []any
	if c.ExpectedTrajectory != nil {
		l, ok := c.ExpectedTrajectory.([]any)
		if !ok {
			return nil, "invalid_expected_trajectory"
		}
		raw = l
	} else {
		found := false
		for _, t := range c.Turns {
			m, ok := t.Expected.(map[string]any)
			if !ok {
				continue
			}
			v, ok := m["trajectory"]
			if !ok || v == nil {
				v, ok = m["tool_uses"]
			}
			if !ok || v == nil {
				continue
			}
			l, ok := v.([]any)
			if !ok {
				return nil, "invalid_expected_trajectory"
			}
			found = true
			raw = append(raw, l...)
		}
		if !found {
			return nil, "missing_expected_trajectory"
		}
	}
	steps := make([]expectedStep, 0, len(raw))
	for _, r := range raw {
		switch x := r.(type) {
		case string:
			if x == "" {
				return nil, "invalid_expected_trajectory"
			}
			steps = append(steps, expectedStep{name: x, kind: KindToolCall, nameOnly: true})
		case map[string]any:
			name, _ := x["tool"].(string)
			if name == "" {
				name, _ = x["name"].(string)
			}
			if name == "" {
				return nil, "invalid_expected_trajectory"
			}
			kind := KindToolCall
			if k, ok := x["kind"]; ok {
				if kind, ok = k.(string); !ok {
					return nil, "invalid_expected_trajectory"
				}
			}
			args, ok := x["args"]
			if !ok || args == nil {
				args = map[string]any{}
			}
			steps = append(steps, expectedStep{name: name, kind: kind, args: args})
		default:
			return nil, "invalid_expected_trajectory"
		}
	}
	return steps, ""
}

func (c toolTrajectory) stepMatches(e expectedStep, a ToolStep) bool {
	if e.name != a.Tool {
		return false
	}
	if e.nameOnly {
		return true
	}
	kind := a.Kind
	if kind == "" {
		kind = KindToolCall
	}
	if e.kind != kind {
		return false
	}
	args := a.Args
	if args == nil {
		args = map[string]any{}
	}
	switch c.args {
	case ArgsIgnored:
		return true
	case ArgsSubset:
		return jsonSubset(e.args, args)
	}
	return jsonEqual(e.args, args)
}

// maxMatchingWork bounds the augmenting-path search; above it the greedy
// count stands.
const maxMatchingWork = 1 << 20

// multisetMatches counts how many expected steps can be paired with
// distinct actual steps. A greedy pass runs first; when it leaves steps
// unmatched and the lists are small, augmenting paths find the maximum
// matching, so a subset-args expectation never fails only because greedy
// paired the wrong duplicate (doc.go, quirk 5).
func (c toolTrajectory) multisetMatches(exp []expectedStep, act []ToolStep) int {
	owner := make([]int, len(act)) // actual index -> expected index+1, 0 = free
	count := 0
	for i, e := range exp {
		for j := range act {
			if owner[j] == 0 && c.stepMatches(e, act[j]) {
				owner[j] = i + 1
				count++
				break
			}
		}
	}
	if count == len(exp) || count == len(act) || len(exp)*len(act) > maxMatchingWork {
		return count
	}
	matchedExp := make([]bool, len(exp))
	for _, o := range owner {
		if o > 0 {
			matchedExp[o-1] = true
		}
	}
	var visited []bool
	var augment func(i int) bool
	augment = func(i int) bool {
		for j := range act {
			if visited[j] || !c.stepMatches(exp[i], act[j]) {
				continue
			}
			visited[j] = true
			if owner[j] == 0 || augment(owner[j]-1) {
				owner[j] = i + 1
				return true
			}
		}
		return false
	}
	for i := range exp {
		if matchedExp[i] {
			continue
		}
		visited = make([]bool, len(act))
		if augment(i) {
			count++
		}
	}
	return count
}

// MaxCriteriaFileBytes caps a criteria or tolerances file (CONTRACTS §5.11).
const MaxCriteriaFileBytes = 1 << 20
