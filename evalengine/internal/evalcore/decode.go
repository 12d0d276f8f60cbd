package evalcore

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/fadcedab/adk/internal/iocount"
	"github.com/fadcedab/adk/internal/jsonlimit"
)

// floatTolerance is how far a recomputed number may be from the decoded
// one (CONTRACTS §5.5).
const floatTolerance = 1e-12

// DecodeResult reads a result document strictly: bounded, exact key sets,
// and every derived field (metric and turn verdicts, sample statuses,
// per-case and run counts, rates, statistics, case aggregates, sample ids)
// recomputed from the samples and compared. A forged count is
// invalid_eval_result. Schema 1 needs only result_schema_version,
// eval_set_id, eval_set_version, cases and passed, and round-trips as is.
func DecodeResult(data []byte) (*Result, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.OwnDocumentLimits())
	if err != nil {
		return nil, LimitErr(CodeInvalidEvalResult, err)
	}
	return resultFromValue(data, v)
}

func resultFromValue(data []byte, v any) (*Result, error) {
	m, ok := asObject(v)
	if !ok {
		return nil, ReasonErr(CodeInvalidEvalResult, "not_an_object", "")
	}
	ver, _ := m["result_schema_version"].(json.Number)
	switch ver {
	case "1":
		id, ok1 := m["eval_set_id"].(string)
		version, ok2 := m["eval_set_version"].(string)
		_, ok3 := m["cases"].([]any)
		passed, ok4 := m["passed"].(bool)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, ReasonErr(CodeInvalidEvalResult, "invalid_v1_result", "")
		}
		return &Result{ResultSchemaVersion: 1, EvalSetID: id, EvalSetVersion: version, Passed: passed, legacy: m}, nil
	case "2":
	default:
		return nil, NewErr(CodeUnsupportedResultVersion, Bound(string(ver)))
	}
	var r Result
	if err := jsonlimit.Unmarshal(data, jsonlimit.OwnDocumentLimits(), &r); err != nil {
		return nil, LimitErr(CodeInvalidEvalResult, err)
	}
	if err := verifyResult(&r, v); err != nil {
		return nil, err
	}
	return r.markChecked(), nil
}

// CheckResult re-validates an in-memory result the way DecodeResult does.
func CheckResult(r *Result) (*Result, error) {
	if r == nil {
		return nil, ReasonErr(CodeInvalidEvalResult, "nil", "")
	}
	if r.checked == r {
		return r, nil
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, ReasonErr(CodeInvalidEvalResult, "not_json", "")
	}
	return DecodeResult(data)
}

// verifyResult recomputes r from its samples and compares the encoding
// with the decoded document doc.
func verifyResult(r *Result, doc any) error { return verifyResultN(r, doc, MaxCases) }

// verifyResultN is verifyResult with a case bound (a streamed result may
// hold more cases than a single document).
func verifyResultN(r *Result, doc any, maxCases int) error {
	bad := func(reason, detail string) error { return ReasonErr(CodeInvalidEvalResult, reason, detail) }
	if r.EvalSetSchemaVersion != 1 && r.EvalSetSchemaVersion != 2 {
		return bad("eval_set_schema_version", "")
	}
	if r.EvalSetID == "" || r.EvalSetVersion == "" {
		return bad("eval_set_identity", "")
	}
	if r.SampleCount < 1 || r.SampleCount > MaxSamplesPerCase || len(r.Cases) > maxCases {
		return bad("sample_count", "")
	}
	if !isFraction(r.PassRateThreshold) {
		return bad("pass_rate_threshold", "")
	}
	descs := make([]metricDesc, len(r.Metrics))
	byID := make(map[string]metricDesc, len(r.Metrics))
	for i, ms := range r.Metrics {
		d := metricDesc{id: ms.MetricID, kind: ms.Kind, scope: ms.Scope, threshold: ms.Threshold}
		if d.id == "" || (d.kind != KindMetric && d.kind != KindJudge) || (d.scope != ScopeTurn && d.scope != ScopeCase) || !isFraction(d.threshold) {
			return bad("metric_descriptor", ms.MetricID)
		}
		if _, dup := byID[d.id]; dup {
			return bad("duplicate_metric", d.id)
		}
		descs[i], byID[d.id] = d, d
	}
	h := aggHeader{
		setSchema:               r.EvalSetSchemaVersion,
		setID:                   r.EvalSetID,
		setVersion:              r.EvalSetVersion,
		samples:                 r.SampleCount,
		passRateThreshold:       r.PassRateThreshold,
		samplePassRateThreshold: 1,
		minSuccessful:           r.SampleCount,
		durationMS:              r.DurationMS,
		metadata:                r.Metadata,
	}
	if len(r.Cases) > 0 {
		h.samplePassRateThreshold = r.Cases[0].SamplePassRateThreshold
		h.minSuccessful = r.Cases[0].MinSuccessfulSamples
	}
	if !isFraction(h.samplePassRateThreshold) || h.minSuccessful < 1 || h.minSuccessful > h.samples {
		return bad("case_thresholds", "")
	}
	byCase := make([][]SampleResult, len(r.Cases))
	seen := make(map[string]bool, len(r.Cases))
	for ci := range r.Cases {
		c := &r.Cases[ci]
		if c.CaseID == "" || seen[c.CaseID] {
			return bad("case_id", c.CaseID)
		}
		seen[c.CaseID] = true
		if len(c.Samples) != r.SampleCount {
			return bad("case_sample_count", c.CaseID)
		}
		for si := range c.Samples {
			s := &c.Samples[si]
			if s.CaseID != c.CaseID || s.SampleIndex != si || s.SampleID != SampleID(r.EvalSetID, r.EvalSetVersion, c.CaseID, si) {
				return bad("sample_identity", c.CaseID)
			}
			if s.Status != SampleStatusPassed && s.Status != SampleStatusFailed && s.Status != SampleStatusError {
				return bad("sample_status", c.CaseID)
			}
			for ti := range s.Turns {
				t := &s.Turns[ti]
				t.Passed = true
				for mi := range t.Metrics {
					if err := recheckMetric(&t.Metrics[mi], ScopeTurn, byID); err != nil {
						return err
					}
					if !t.Metrics[mi].Passed {
						t.Passed = false
					}
				}
			}
			for mi := range s.Criteria {
				if err := recheckMetric(&s.Criteria[mi], ScopeCase, byID); err != nil {
					return err
				}
			}
			finishSample(s)
		}
		byCase[ci] = c.Samples
	}
	again := aggregate(h, descs, byCase)
	enc, err := json.Marshal(again)
	if err != nil {
		return bad("not_json", "")
	}
	dec := json.NewDecoder(bytes.NewReader(enc))
	dec.UseNumber()
	var gen any
	if err := dec.Decode(&gen); err != nil {
		return bad("not_json", "")
	}
	if path, ok := jsonClose(gen, doc, "$"); !ok {
		return bad("inconsistent", path)
	}
	*r = *again
	return nil
}

// recheckMetric validates a metric result against its descriptor and
// recomputes its verdict.
func recheckMetric(m *MetricResult, scope string, byID map[string]metricDesc) error {
	d, ok := byID[m.MetricID]
	if !ok || d.scope != scope || d.kind != m.Kind || d.threshold != m.Threshold || m.Scope != scope {
		return ReasonErr(CodeInvalidEvalResult, "metric_result", m.MetricID)
	}
	switch m.Status {
	case StatusOK:
		if !isFraction(m.Score) {
			return ReasonErr(CodeInvalidEvalResult, "metric_score", m.MetricID)
		}
	case StatusError, StatusNotEvaluated:
		if m.Score != 0 {
			return ReasonErr(CodeInvalidEvalResult, "metric_score", m.MetricID)
		}
	default:
		return ReasonErr(CodeInvalidEvalResult, "metric_status", m.MetricID)
	}
	m.Passed = m.Status == StatusOK && m.Score >= m.Threshold
	return nil
}

// jsonClose compares two generic documents; numbers may differ by
// floatTolerance. It returns the first differing path.
func jsonClose(a, b any, path string) (string, bool) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return path, false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok {
				return path + "." + k, false
			}
			if p, ok := jsonClose(xv, yv, path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return path, false
		}
		for i := range x {
			if p, ok := jsonClose(x[i], y[i], path+"["+strconv.Itoa(i)+"]"); !ok {
				return p, false
			}
		}
		return "", true
	}
	xf, ok1 := toFloat(a)
	yf, ok2 := toFloat(b)
	if ok1 && ok2 {
		return path, math.Abs(xf-yf) <= floatTolerance
	}
	return path, jsonEqual(a, b)
}

// ToGeneric turns a Go value into generic JSON values (numbers as
// json.Number).
func ToGeneric(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out any
	err = dec.Decode(&out)
	return out, err
}

// encodedSize returns the size of v's JSON encoding without keeping it.
func encodedSize(v any) (int, error) {
	var w iocount.Writer
	enc := json.NewEncoder(&w)
	if err := enc.Encode(v); err != nil {
		return 0, err
	}
	return int(w.N) - 1, nil
}
