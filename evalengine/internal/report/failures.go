package report

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
)

// Failure-reason bounds. Every renderer (Markdown, JUnit, SARIF,
// annotations, and the HTML report) takes its reasons from Failures, so a
// reason reads the same everywhere and its size is bounded in one place
// (with evalcore.MaxExcerptRunes, which the criteria share).
const (
	// MaxFailureSamples bounds the samples explained per case; the rest
	// are counted in CaseFailure.OmittedSamples.
	MaxFailureSamples = 5
)

// CaseFailure explains why one case did not pass: what the renderers put
// in a "Failures" section, a JUnit <failure>, a SARIF message or an
// annotation. It carries no prompts; responses and expected tool calls
// appear only as bounded excerpts with secret-named keys pruned.
type CaseFailure struct {
	CaseID     string `json:"case_id"`
	Status     string `json:"status"`
	DurationMS int64  `json:"duration_ms"`
	// Reason is one line: the case status and the first failing metrics
	// or the error reason.
	Reason string `json:"reason"`
	// Metrics are the case-level criteria that did not pass.
	Metrics []FailedMetric `json:"metrics"`
	// SamplePassRate and its threshold say why a case whose metrics
	// partly passed still failed.
	SamplePassRate          float64         `json:"sample_pass_rate"`
	SamplePassRateThreshold float64         `json:"sample_pass_rate_threshold"`
	Samples                 []SampleFailure `json:"samples"`
	OmittedSamples          int             `json:"omitted_samples"`
}

// FailedMetric is one metric that did not pass, with its score and threshold
// (score is 0 when the status is error or not_evaluated).
type FailedMetric struct {
	MetricID  string  `json:"metric_id"`
	Scope     string  `json:"scope"`
	Status    string  `json:"status"`
	Score     float64 `json:"score"`
	Threshold float64 `json:"threshold"`
	// Reason is the metric's own typed reason (not_evaluated/error), or
	// a judge's bounded explanation when it gave one.
	Reason string `json:"reason,omitempty"`
}

// SampleFailure explains one failed or errored sample.
type SampleFailure struct {
	SampleIndex int    `json:"sample_index"`
	Status      string `json:"status"`
	// Error is the sample's typed error reason (adapter_timeout, ...).
	Error      string              `json:"error,omitempty"`
	Metrics    []FailedMetric      `json:"metrics"`
	Response   *ResponseMismatch   `json:"response,omitempty"`
	Trajectory *TrajectoryMismatch `json:"trajectory,omitempty"`
	// TraceID names the sample's trace when the run was traced
	// (adk trace query --trace-id).
	TraceID string `json:"trace_id,omitempty"`
}

// ResponseMismatch is the first turn whose response differed from the
// expected one, as bounded excerpts.
type ResponseMismatch struct {
	TurnIndex int    `json:"turn_index"`
	Expected  string `json:"expected"`
	Actual    string `json:"actual"`
}

// TrajectoryMismatch is the first expected tool call that was not matched
// and the actual call found in its place ("" when there was none). Index is
// the 0-based position in the expected trajectory (-1 when every expected
// call matched and an extra actual call failed the policy).
type TrajectoryMismatch struct {
	Index    int    `json:"index"`
	Expected string `json:"expected"`
	Actual   string `json:"actual"`
}

// Failures extracts the reasons of every case that did not pass, in result
// order. It is the one place reasons are derived; renderers only format them.
func Failures(r *evalcore.Result) []CaseFailure {
	var out []CaseFailure
	if r == nil {
		return out
	}
	for ci := range r.Cases {
		if f, ok := caseFailure(&r.Cases[ci]); ok {
			out = append(out, f)
		}
	}
	return out
}

// caseFailure is one case's entry of Failures (false when it passed): the
// streamed renderers call it case by case.
func caseFailure(c *evalcore.CaseResult) (CaseFailure, bool) {
	if c.Passed {
		return CaseFailure{}, false
	}
	f := CaseFailure{
		CaseID: c.CaseID, Status: c.Status, DurationMS: c.DurationMS,
		Metrics:                 failedMetrics(c.Criteria),
		SamplePassRate:          c.SamplePassRate,
		SamplePassRateThreshold: c.SamplePassRateThreshold,
	}
	for si := range c.Samples {
		s := &c.Samples[si]
		if s.Passed {
			continue
		}
		if len(f.Samples) == MaxFailureSamples {
			f.OmittedSamples++
			continue
		}
		f.Samples = append(f.Samples, sampleFailure(s))
	}
	f.Reason = f.reason()
	return f, true
}

func failedMetrics(ms []evalcore.MetricResult) []FailedMetric {
	var out []FailedMetric
	for i := range ms {
		m := &ms[i]
		if m.Passed {
			continue
		}
		fm := FailedMetric{MetricID: m.MetricID, Scope: m.Scope, Status: m.Status, Score: m.Score, Threshold: m.Threshold}
		fm.Reason = metricReason(m)
		out = append(out, fm)
	}
	return out
}

// metricReason is a metric's own typed reason (not_evaluated/error), or a
// judge's bounded explanation when it gave one; "" otherwise. The HTML
// report also shows it for metrics that passed (a judge's rationale).
func metricReason(m *evalcore.MetricResult) string {
	for _, k := range [...]string{"reason", "rationale", "explanation"} {
		if s, ok := m.Metadata[k].(string); ok && s != "" {
			return evalcore.ExcerptString(s)
		}
	}
	return ""
}

func sampleFailure(s *evalcore.SampleResult) SampleFailure {
	sf := SampleFailure{SampleIndex: s.SampleIndex, Status: s.Status, Error: evalcore.ExcerptString(s.Error), TraceID: s.TraceID}
	var metrics []evalcore.MetricResult
	metrics = append(metrics, s.Criteria...)
	for ti := range s.Turns {
		metrics = append(metrics, s.Turns[ti].Metrics...)
	}
	sf.Metrics = failedMetrics(metrics)
	for i := range metrics {
		m := &metrics[i]
		if m.Passed {
			continue
		}
		mm, _ := m.Metadata[evalcore.MetaFirstMismatch].(map[string]any)
		if mm == nil {
			continue
		}
		if _, isTraj := mm["expected_index"]; isTraj {
			if sf.Trajectory == nil {
				sf.Trajectory = trajectoryMismatch(mm, s.Trajectory)
			}
		} else if sf.Response == nil {
			exp, _ := mm["expected"].(string)
			act, _ := mm["actual"].(string)
			sf.Response = &ResponseMismatch{TurnIndex: intOf(mm["turn_index"]), Expected: exp, Actual: act}
		}
	}
	// A failing metric that does not say which response differed (an LLM
	// judge, a custom metric): show the first turn with an expectation.
	if sf.Response == nil && sf.Error == "" && len(sf.Metrics) > 0 {
		for ti := range s.Turns {
			if exp, ok := evalcore.ExpectedResponse(s.Turns[ti].Expected); ok {
				sf.Response = &ResponseMismatch{TurnIndex: ti, Expected: evalcore.Excerpt(exp), Actual: evalcore.Excerpt(s.Turns[ti].Actual)}
				break
			}
		}
	}
	return sf
}

// trajectoryMismatch completes the metric's record with the actual call's
// arguments when the result holds them (capture_tool_content).
func trajectoryMismatch(mm map[string]any, traj []evalcore.TrajectoryItem) *TrajectoryMismatch {
	tm := &TrajectoryMismatch{Index: intOf(mm["expected_index"])}
	tm.Expected, _ = mm["expected"].(string)
	tm.Actual, _ = mm["actual"].(string)
	if ai := intOf(mm["actual_index"]); ai >= 0 {
		n := 0
		for i := range traj {
			if traj[i].Kind != evalcore.KindToolCall {
				continue
			}
			if n == ai {
				if traj[i].Args != nil {
					tm.Actual = traj[i].Tool + " " + evalcore.Excerpt(traj[i].Args)
				}
				break
			}
			n++
		}
	}
	return tm
}

func intOf(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return int(n)
		}
	}
	return -1
}

// reason is the one-line summary: the first sample error and the failing
// case metrics, else the first failed sample's metrics, else the sample pass
// rate.
func (f *CaseFailure) reason() string {
	var parts []string
	for _, s := range f.Samples {
		if s.Error != "" {
			parts = append(parts, "sample error "+s.Error)
			break
		}
	}
	for _, m := range f.Metrics {
		// A metric nobody could score because every sample errored says
		// nothing the error does not.
		if len(parts) > 0 && m.Status == evalcore.StatusNotEvaluated {
			continue
		}
		parts = append(parts, m.String())
	}
	if len(parts) == 0 {
		for _, s := range f.Samples {
			for _, m := range s.Metrics {
				parts = append(parts, m.String())
			}
			if len(parts) > 0 {
				break
			}
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "sample pass rate "+f4(f.SamplePassRate)+" < "+f4(f.SamplePassRateThreshold))
	}
	const maxParts = 3
	if len(parts) > maxParts {
		parts = append(parts[:maxParts], "+"+strconv.Itoa(len(parts)-maxParts)+" more")
	}
	return f.Status + ": " + strings.Join(parts, "; ")
}

// String renders "response 0.0000 < 1.0000" or "judge error (judge_timeout)".
func (m FailedMetric) String() string {
	s := m.MetricID + " "
	if m.Status == evalcore.StatusOK || m.Status == evalcore.StatusPartial {
		s += f4(m.Score) + " < " + f4(m.Threshold)
	} else {
		s += m.Status
	}
	if m.Reason != "" {
		s += " (" + m.Reason + ")"
	}
	return s
}

// Details renders the failure as plain text lines (no trailing newline),
// the body of a JUnit <failure> and the details of an annotation.
func (f *CaseFailure) Details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "case %s: %s", f.CaseID, f.Reason)
	fmt.Fprintf(&b, "\nsample pass rate %s (threshold %s)", f4(f.SamplePassRate), f4(f.SamplePassRateThreshold))
	for _, s := range f.Samples {
		fmt.Fprintf(&b, "\nsample %d: %s%s", s.SampleIndex, s.Status, s.traceSuffix())
		if s.Error != "" {
			fmt.Fprintf(&b, "\n  error: %s", s.Error)
		}
		for _, m := range s.Metrics {
			fmt.Fprintf(&b, "\n  metric %s", m.String())
		}
		if r := s.Response; r != nil {
			fmt.Fprintf(&b, "\n  turn %d expected: %s\n  turn %d actual:   %s", r.TurnIndex+1, r.Expected, r.TurnIndex+1, r.Actual)
		}
		if t := s.Trajectory; t != nil {
			fmt.Fprintf(&b, "\n  first trajectory mismatch%s: expected %s, actual %s", t.position(), orNone(t.Expected), orNone(t.Actual))
		}
	}
	if f.OmittedSamples > 0 {
		fmt.Fprintf(&b, "\n%d more failed samples not shown", f.OmittedSamples)
	}
	return b.String()
}

// traceSuffix is " (trace ID)" for a traced sample, else "".
func (s *SampleFailure) traceSuffix() string {
	if s.TraceID == "" {
		return ""
	}
	return " (trace " + s.TraceID + ")"
}

func (t *TrajectoryMismatch) position() string {
	if t.Index < 0 {
		return " (extra call)"
	}
	return " at call " + strconv.Itoa(t.Index+1)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
