package evalcore

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// Result schema version and sample/case statuses (CONTRACTS §5.5).
const (
	ResultSchemaVersion = 2

	SampleStatusPassed = "passed"
	SampleStatusFailed = "failed"
	SampleStatusError  = "error"
	CaseStatusPartial  = "partial"
)

// Result is the result document (result_schema_version 2). Its JSON
// encoding is the document; DecodeResult reads it back strictly and the
// round trip is exact. A decoded schema-1 result keeps its original
// document (see Legacy).
type Result struct {
	ResultSchemaVersion  int     `json:"result_schema_version"`
	EvalSetSchemaVersion int     `json:"eval_set_schema_version"`
	EvalSetID            string  `json:"eval_set_id"`
	EvalSetVersion       string  `json:"eval_set_version"`
	Passed               bool    `json:"passed"`
	PassRate             float64 `json:"pass_rate"`
	PassRateThreshold    float64 `json:"pass_rate_threshold"`
	// PassRateInterval is the 95 % Wilson interval of PassRate over the
	// cases; decoding recomputes it like every other derived field.
	PassRateInterval PassRateInterval `json:"pass_rate_interval"`
	CaseCount        int              `json:"case_count"`
	PassedCaseCount  int              `json:"passed_case_count"`
	ErrorCaseCount   int              `json:"error_case_count"`
	PartialCaseCount int              `json:"partial_case_count"`
	SampleCount      int              `json:"sample_count"` // per case
	DurationMS       int64            `json:"duration_ms"`
	Metrics          []MetricSummary  `json:"metrics"`
	Cases            []CaseResult     `json:"cases"`
	Metadata         map[string]any   `json:"metadata"`

	legacy map[string]any // the whole document of a decoded schema-1 result
	// checked points to the Result itself when Run or Aggregate built it or
	// DecodeResult verified it: Render, Compare and StatsReport then skip
	// re-validating it (an encode plus strict decode that costs more than
	// the run's own bookkeeping at 10,000 samples). A copy (r2 := *r) or a
	// Result assembled by hand does not point to itself and is always
	// re-validated. Mutating a checked Result in place is the caller's
	// responsibility.
	checked *Result
	// sampleJSON holds the canonical encoding of every sample
	// ([case][sample]), made by the worker that ran it, so that rendering
	// the JSON report splices them instead of encoding every sample again
	// after the last one finished (canonicalResult). Run sets it; like
	// checked, it trusts the samples not to be changed in place after.
	sampleJSON [][][]byte
	// summary holds the cases of a dropped-samples run (RunConfig.
	// DropSamples), kept compactly, when Cases is nil: WriteSummary
	// writes them.
	summary *runAgg
}

// markChecked records that r was built or verified by this package.
func (r *Result) markChecked() *Result {
	r.checked = r
	return r
}

// Legacy returns the original document of a decoded schema-1 result, or nil.
func (r *Result) Legacy() map[string]any { return r.legacy }

// MarshalJSON encodes the document; a schema-1 result encodes unchanged.
func (r *Result) MarshalJSON() ([]byte, error) {
	if r.legacy != nil {
		return json.Marshal(r.legacy)
	}
	type plain Result
	return json.Marshal((*plain)(r))
}

// MarshalJSONWith is MarshalJSON, byte for byte, taking the encoding of
// sample si of case ci from encoded(ci, si) where it returns non-nil. That
// must be json.Marshal of r.Cases[ci].Samples[si] (an element of a slice
// encodes the same alone): a coordinator encodes each sample as its result
// arrives, so completing a 10,000-sample job does not encode 6.5 MB at
// its end.
func (r *Result) MarshalJSONWith(encoded func(ci, si int) []byte) ([]byte, error) {
	const resultTail, caseTail = `"cases":null,"metadata":null}`, `"samples":null}`
	type plain Result
	if r.legacy != nil || encoded == nil {
		return r.MarshalJSON()
	}
	head := *r
	head.Cases, head.Metadata = nil, nil
	hb, err := json.Marshal((*plain)(&head))
	if err != nil {
		return nil, err
	}
	if !bytes.HasSuffix(hb, []byte(resultTail)) {
		return r.MarshalJSON() // a field after those two: stay exact
	}
	size := len(hb) + 1024
	for i := range r.Cases {
		size += 1024 * (1 + len(r.Cases[i].Samples))
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.Write(hb[:len(hb)-len(resultTail)])
	if r.Cases == nil {
		buf.WriteString(`"cases":null`)
	} else {
		buf.WriteString(`"cases":[`)
	}
	for ci := range r.Cases {
		if ci > 0 {
			buf.WriteByte(',')
		}
		c := r.Cases[ci]
		samples := c.Samples
		c.Samples = nil
		cb, err := json.Marshal(&c)
		if err != nil {
			return nil, err
		}
		if samples == nil || !bytes.HasSuffix(cb, []byte(caseTail)) {
			if cb, err = json.Marshal(&r.Cases[ci]); err != nil {
				return nil, err
			}
			buf.Write(cb)
			continue
		}
		buf.Write(cb[:len(cb)-len(caseTail)])
		buf.WriteString(`"samples":[`)
		for si := range samples {
			if si > 0 {
				buf.WriteByte(',')
			}
			b := encoded(ci, si)
			if b == nil {
				if b, err = json.Marshal(&samples[si]); err != nil {
					return nil, err
				}
			}
			buf.Write(b)
		}
		buf.WriteString(`]}`)
	}
	if r.Cases != nil {
		buf.WriteByte(']')
	}
	mb, err := json.Marshal(r.Metadata)
	if err != nil {
		return nil, err
	}
	buf.WriteString(`,"metadata":`)
	buf.Write(mb)
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// MetricSummary aggregates one metric descriptor over the whole run.
type MetricSummary struct {
	MetricID          string     `json:"metric_id"`
	Kind              string     `json:"kind"`
	Scope             string     `json:"scope"`
	AverageScore      float64    `json:"average_score"`
	Threshold         float64    `json:"threshold"`
	Passed            bool       `json:"passed"`
	EvaluatedCount    int        `json:"evaluated_count"`
	ErrorCount        int        `json:"error_count"`
	NotEvaluatedCount int        `json:"not_evaluated_count"`
	Statistics        Statistics `json:"statistics"`
}

// CaseResult aggregates one case over its samples. The public trajectory
// and metadata are sample 0's; the turns stay in Samples (doc.go, quirk 2).
type CaseResult struct {
	CaseID                  string           `json:"case_id"`
	Status                  string           `json:"status"`
	Passed                  bool             `json:"passed"`
	DurationMS              int64            `json:"duration_ms"`
	Trajectory              []TrajectoryItem `json:"trajectory"`
	Metadata                map[string]any   `json:"metadata"`
	Criteria                []MetricResult   `json:"criteria"`
	SampleCount             int              `json:"sample_count"`
	SuccessfulSampleCount   int              `json:"successful_sample_count"`
	PassedSampleCount       int              `json:"passed_sample_count"`
	ErrorSampleCount        int              `json:"error_sample_count"`
	SamplePassRate          float64          `json:"sample_pass_rate"`
	SamplePassRateThreshold float64          `json:"sample_pass_rate_threshold"`
	MinSuccessfulSamples    int              `json:"min_successful_samples"`
	SampleStatistics        Statistics       `json:"sample_statistics"`
	Samples                 []SampleResult   `json:"samples"`
}

// SampleResult is one run of one case. A distributed worker produces these
// with RunSample; Aggregate turns a full set of them into a Result.
type SampleResult struct {
	CaseID      string           `json:"case_id"`
	SampleID    string           `json:"sample_id"`
	SampleIndex int              `json:"sample_index"`
	Status      string           `json:"status"` // passed | failed | error
	Passed      bool             `json:"passed"`
	DurationMS  int64            `json:"duration_ms"`
	Turns       []TurnResult     `json:"turns"`
	Trajectory  []TrajectoryItem `json:"trajectory"`
	Criteria    []MetricResult   `json:"criteria"` // case-scope metrics
	Metadata    map[string]any   `json:"metadata"` // the case's metadata
	Error       string           `json:"error,omitempty"`
	// TraceID names the sample's trace when the run was traced (each
	// turn also records it, with its run id).
	TraceID string `json:"trace_id,omitempty"`
}

// TurnResult is one turn of one sample.
type TurnResult struct {
	TurnID          string           `json:"turn_id"`
	Input           any              `json:"input"`
	Expected        any              `json:"expected"`
	Actual          any              `json:"actual"`
	Passed          bool             `json:"passed"`
	Metrics         []MetricResult   `json:"metrics"`
	Events          []any            `json:"events,omitempty"`
	Trajectory      []TrajectoryItem `json:"trajectory"`
	Metadata        map[string]any   `json:"metadata"`
	AdapterMetadata map[string]any   `json:"adapter_metadata"`
	// RunID and TraceID name the turn's run and the sample's trace when
	// the run was traced (adk trace query --run-id / --trace-id); absent
	// in results of untraced runs and of older versions.
	RunID   string `json:"run_id,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
}

// TrajectoryItem is one public trajectory entry. Args and Result are kept
// only with capture_tool_content.
type TrajectoryItem struct {
	TurnID string  `json:"turn_id"`
	Kind   string  `json:"kind"`
	Tool   string  `json:"tool"`
	CallID *string `json:"call_id"`
	Args   any     `json:"args,omitempty"`
	Result any     `json:"result,omitempty"`
}

// MetricResult is one metric's verdict on a turn, a sample or a case.
type MetricResult struct {
	MetricID  string         `json:"metric_id"`
	Kind      string         `json:"kind"`
	Scope     string         `json:"scope"`
	Score     float64        `json:"score"`
	Threshold float64        `json:"threshold"`
	Passed    bool           `json:"passed"`
	Status    string         `json:"status"`
	Metadata  map[string]any `json:"metadata"`
}

// Statistics summarises scores with the population standard deviation
// (÷n), all zeros when empty (doc.go, quirk 3).
type Statistics struct {
	Count             int     `json:"count"`
	Mean              float64 `json:"mean"`
	Minimum           float64 `json:"minimum"`
	Maximum           float64 `json:"maximum"`
	StandardDeviation float64 `json:"standard_deviation"`
}

// NewStatistics computes Statistics over xs.
func NewStatistics(xs []float64) Statistics {
	if len(xs) == 0 {
		return Statistics{}
	}
	st := Statistics{Count: len(xs), Minimum: xs[0], Maximum: xs[0]}
	sum := 0.0
	for _, x := range xs {
		sum += x
		st.Minimum = math.Min(st.Minimum, x)
		st.Maximum = math.Max(st.Maximum, x)
	}
	st.Mean = sum / float64(len(xs))
	v := 0.0
	for _, x := range xs {
		d := x - st.Mean
		v += d * d
	}
	st.StandardDeviation = math.Sqrt(v / float64(len(xs)))
	return st
}

// metricDesc is the part of a Metric the aggregation needs; it can be
// rebuilt from a decoded result, which is how decoding re-checks one.
type metricDesc struct {
	id, kind, scope string
	threshold       float64
}

func descsOf(ms []Metric) []metricDesc {
	out := make([]metricDesc, len(ms))
	for i, m := range ms {
		out[i] = metricDesc{id: m.ID, kind: m.kind(), scope: m.Scope(), threshold: m.Threshold}
	}
	return out
}

// aggHeader holds the run-level inputs of the aggregation.
type aggHeader struct {
	setSchema               int
	setID, setVersion       string
	samples                 int
	passRateThreshold       float64
	samplePassRateThreshold float64
	minSuccessful           int
	durationMS              int64
	metadata                map[string]any
}

// Aggregate builds the result document from one SampleResult per (case,
// sample) of set, in any order. It is the one aggregation the local run
// and the distributed coordinator share, so both produce the same document
// (apart from timings). opts must be the run's options; duration is the
// run's wall time.
func Aggregate(set *Set, metrics []Metric, opts Options, samples []SampleResult, duration time.Duration) (*Result, error) {
	if err := set.check(); err != nil {
		return nil, err
	}
	opts, err := opts.Normalize()
	if err != nil {
		return nil, err
	}
	if err := ValidateMetrics(metrics); err != nil {
		return nil, err
	}
	if len(samples) != len(set.Cases)*opts.Samples {
		return nil, NewErr(CodeInvalidSampleResults, "want "+strconv.Itoa(len(set.Cases)*opts.Samples)+" samples, got "+strconv.Itoa(len(samples)))
	}
	index := make(map[string]int, len(set.Cases))
	for i, c := range set.Cases {
		index[c.ID] = i
	}
	byCase := make([][]SampleResult, len(set.Cases))
	for i := range byCase {
		byCase[i] = make([]SampleResult, opts.Samples)
	}
	for _, s := range samples {
		ci, ok := index[s.CaseID]
		if !ok || s.SampleIndex < 0 || s.SampleIndex >= opts.Samples {
			return nil, NewErr(CodeInvalidSampleResults, s.CaseID)
		}
		if byCase[ci][s.SampleIndex].SampleID != "" {
			return nil, NewErr(CodeInvalidSampleResults, "duplicate "+s.CaseID+"#"+strconv.Itoa(s.SampleIndex))
		}
		if s.SampleID != SampleID(set.ID, set.Version, s.CaseID, s.SampleIndex) {
			return nil, NewErr(CodeInvalidSampleResults, "sample id "+s.CaseID+"#"+strconv.Itoa(s.SampleIndex))
		}
		byCase[ci][s.SampleIndex] = s
	}
	return aggregate(headerOf(set, opts, duration), descsOf(metrics), byCase).markChecked(), nil
}

func headerOf(set *Set, opts Options, duration time.Duration) aggHeader {
	meta := opts.ResultMetadata
	if meta == nil {
		meta = map[string]any{}
	}
	return aggHeader{
		setSchema:               set.SchemaVersion,
		setID:                   set.ID,
		setVersion:              set.Version,
		samples:                 opts.Samples,
		passRateThreshold:       opts.PassRateThreshold,
		samplePassRateThreshold: opts.SamplePassRateThreshold,
		minSuccessful:           opts.MinSuccessfulSamples,
		durationMS:              duration.Milliseconds(),
		metadata:                meta,
	}
}

// metricTally accumulates one metric's results.
type metricTally struct {
	ok          []float64
	errs, notEv int
}

func (t *metricTally) add(m *MetricResult) {
	switch m.Status {
	case StatusOK:
		t.ok = append(t.ok, m.Score)
	case StatusError:
		t.errs++
	default:
		t.notEv++
	}
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// aggregate is the pure aggregation over samples grouped by case, each
// group ordered by sample index.
func aggregate(h aggHeader, descs []metricDesc, byCase [][]SampleResult) *Result {
	a := newRunAgg(h, descs, len(byCase))
	for ci, samples := range byCase {
		a.addCase(ci, samples)
	}
	return a.finish(h.durationMS)
}

// runAgg aggregates a run case by case, in any case order: the local
// run that drops samples (RunConfig.DropSamples) adds each case as soon
// as its samples are done and keeps only its aggregate. The result is the
// same as adding the cases in order: the scores that the run-level
// statistics pool are kept per case and pooled in case order at finish.
type runAgg struct {
	h         aggHeader
	descs     []metricDesc
	pos       map[string]int
	r         *Result
	caseTally []metricTally // scratch of addCase
	metrics   [][]caseMetric
	errs      []int // per metric, over the run
	notEv     []int
	// compact keeps each case as a caseAgg instead of a CaseResult (the
	// drop-samples run): the Result's Cases stay nil and WriteSummary
	// builds every case's line from its caseAgg.
	compact bool
	cases   []caseAgg
}

// caseAgg is one case's aggregate as a dropped-samples run keeps it, a
// third of a CaseResult's size: the per-metric results (each with a
// four-key metadata map and boxed statistics) are built only when the
// case's line is written, and the fields every case shares are the run's.
// At 100,000 cases the CaseResults were most of the run's peak memory.
type caseAgg struct {
	id         string
	metadata   map[string]any // nil and emptyMeta set: an empty object
	trajectory []TrajectoryItem
	durationMS int64
	stats      Statistics // of the successful samples' outcomes
	status     string
	samples    int32
	successful int32
	passedN    int32
	errorN     int32
	passed     bool
	emptyMeta  bool
	metrics    []caseMetric // per metric, in descriptor order
}

// caseMetric is one metric's tally over one case's samples.
type caseMetric struct {
	ok          []float64 // scores of the samples it scored, in sample order
	errs, notEv int32
}

func newRunAgg(h aggHeader, descs []metricDesc, cases int) *runAgg {
	a := &runAgg{
		h:     h,
		descs: descs,
		pos:   make(map[string]int, len(descs)),
		r: &Result{
			ResultSchemaVersion:  ResultSchemaVersion,
			EvalSetSchemaVersion: h.setSchema,
			EvalSetID:            h.setID,
			EvalSetVersion:       h.setVersion,
			PassRateThreshold:    h.passRateThreshold,
			CaseCount:            cases,
			SampleCount:          h.samples,
			Metrics:              make([]MetricSummary, len(descs)),
			Cases:                make([]CaseResult, cases),
			Metadata:             h.metadata,
		},
		caseTally: make([]metricTally, len(descs)),
		metrics:   make([][]caseMetric, cases),
		errs:      make([]int, len(descs)),
		notEv:     make([]int, len(descs)),
	}
	for i, d := range descs {
		a.pos[d.id] = i
	}
	return a
}

// newCompactRunAgg is newRunAgg keeping caseAggs (see runAgg.compact).
func newCompactRunAgg(h aggHeader, descs []metricDesc, cases int) *runAgg {
	a := newRunAgg(h, descs, cases)
	a.compact = true
	a.r.Cases, a.metrics = nil, nil
	a.cases = make([]caseAgg, cases)
	a.r.summary = a
	return a
}

// addCase aggregates case ci from its samples, ordered by sample index.
func (a *runAgg) addCase(ci int, samples []SampleResult) {
	h, pos, r := &a.h, a.pos, a.r
	caseTally := a.caseTally
	for i := range caseTally {
		caseTally[i] = metricTally{}
	}
	c := caseAgg{samples: int32(len(samples))}
	if len(samples) > 0 {
		c.id = samples[0].CaseID
		c.trajectory = samples[0].Trajectory
		c.metadata = samples[0].Metadata
		if c.metadata != nil && len(c.metadata) == 0 {
			c.metadata, c.emptyMeta = nil, true
		}
	}
	var outcomeBuf [16]float64
	outcomes := outcomeBuf[:0]
	for si := range samples {
		s := &samples[si]
		c.durationMS += s.DurationMS
		if s.Status == SampleStatusError {
			c.errorN++
		} else {
			c.successful++
			if s.Passed {
				c.passedN++
				outcomes = append(outcomes, 1)
			} else {
				outcomes = append(outcomes, 0)
			}
		}
		for mi := range s.Criteria {
			if p, ok := pos[s.Criteria[mi].MetricID]; ok {
				caseTally[p].add(&s.Criteria[mi])
			}
		}
		for ti := range s.Turns {
			for mi := range s.Turns[ti].Metrics {
				if p, ok := pos[s.Turns[ti].Metrics[mi].MetricID]; ok {
					caseTally[p].add(&s.Turns[ti].Metrics[mi])
				}
			}
		}
	}
	c.stats = NewStatistics(outcomes)
	rate := c.samplePassRate()
	c.passed = int(c.successful) >= h.minSuccessful && rate >= h.samplePassRateThreshold
	switch {
	case c.successful == 0:
		c.status = SampleStatusError
		c.passed = false
	case c.errorN > 0:
		c.status = CaseStatusPartial
	case c.passed:
		c.status = SampleStatusPassed
	default:
		c.status = SampleStatusFailed
	}
	c.metrics = make([]caseMetric, len(a.descs))
	for i := range a.descs {
		t := &caseTally[i]
		c.metrics[i] = caseMetric{ok: t.ok, errs: int32(t.errs), notEv: int32(t.notEv)}
		a.errs[i] += t.errs
		a.notEv[i] += t.notEv
	}
	if !a.compact {
		a.metrics[ci] = c.metrics
	}
	if c.passed {
		r.PassedCaseCount++
	}
	switch c.status {
	case SampleStatusError:
		r.ErrorCaseCount++
	case CaseStatusPartial:
		r.PartialCaseCount++
	}
	if a.compact {
		a.cases[ci] = c
		return
	}
	r.Cases[ci] = a.caseResult(&c)
	r.Cases[ci].Samples = samples
}

func (c *caseAgg) samplePassRate() float64 {
	if c.successful == 0 {
		return 0
	}
	return float64(c.passedN) / float64(c.successful)
}

// caseResult builds the CaseResult of c, without samples.
func (a *runAgg) caseResult(c *caseAgg) CaseResult {
	out := CaseResult{
		CaseID:                  c.id,
		Status:                  c.status,
		Passed:                  c.passed,
		DurationMS:              c.durationMS,
		Trajectory:              c.trajectory,
		Metadata:                c.metadata,
		Criteria:                make([]MetricResult, len(a.descs)),
		SampleCount:             int(c.samples),
		SuccessfulSampleCount:   int(c.successful),
		PassedSampleCount:       int(c.passedN),
		ErrorSampleCount:        int(c.errorN),
		SamplePassRate:          c.samplePassRate(),
		SamplePassRateThreshold: a.h.samplePassRateThreshold,
		MinSuccessfulSamples:    a.h.minSuccessful,
		SampleStatistics:        c.stats,
	}
	if c.emptyMeta {
		out.Metadata = map[string]any{}
	}
	for i, d := range a.descs {
		t := &c.metrics[i]
		errs, notEv, total := int(t.errs), int(t.notEv), len(t.ok)+int(t.errs)+int(t.notEv)
		mr := MetricResult{MetricID: d.id, Kind: d.kind, Scope: d.scope, Threshold: d.threshold, Score: mean(t.ok)}
		switch {
		case total == 0 || (len(t.ok) == 0 && errs == 0):
			mr.Status = StatusNotEvaluated
		case len(t.ok) == total:
			mr.Status = StatusOK
		case len(t.ok) == 0:
			mr.Status = StatusError
		default:
			mr.Status = StatusPartial
		}
		mr.Passed = mr.Status == StatusOK && mr.Score >= d.threshold
		mr.Metadata = map[string]any{
			"sample_count":        total,
			"error_count":         errs,
			"not_evaluated_count": notEv,
			"statistics":          NewStatistics(t.ok),
		}
		out.Criteria[i] = mr
	}
	return out
}

// finish pools the run-level metric summaries (in case order) and the
// verdict.
func (a *runAgg) finish(durationMS int64) *Result {
	r := a.r
	r.DurationMS = durationMS
	metrics := a.metrics
	if a.compact {
		metrics = make([][]caseMetric, len(a.cases))
		for ci := range a.cases {
			metrics[ci] = a.cases[ci].metrics
		}
	}
	for i, d := range a.descs {
		n := 0
		for ci := range metrics {
			if metrics[ci] != nil {
				n += len(metrics[ci][i].ok)
			}
		}
		pooled := make([]float64, 0, n)
		for ci := range metrics {
			if metrics[ci] != nil {
				pooled = append(pooled, metrics[ci][i].ok...)
			}
		}
		avg := mean(pooled)
		errs, notEv := a.errs[i], a.notEv[i]
		r.Metrics[i] = MetricSummary{
			MetricID:          d.id,
			Kind:              d.kind,
			Scope:             d.scope,
			AverageScore:      avg,
			Threshold:         d.threshold,
			Passed:            len(pooled) > 0 && errs == 0 && notEv == 0 && avg >= d.threshold,
			EvaluatedCount:    len(pooled),
			ErrorCount:        errs,
			NotEvaluatedCount: notEv,
			Statistics:        NewStatistics(pooled),
		}
	}
	if r.CaseCount > 0 {
		r.PassRate = float64(r.PassedCaseCount) / float64(r.CaseCount)
	}
	r.PassRateInterval = resultPassRateInterval(r.PassedCaseCount, r.CaseCount)
	r.Passed = r.PassRate >= r.PassRateThreshold
	return r
}

// MetaNotEvaluatedCases is the result metadata key listing the cases a run
// left out, each {"case_id", "reason"}.
const MetaNotEvaluatedCases = "not_evaluated_cases"

// MarkNotEvaluated records in r's metadata that the cases ids were not
// evaluated, for reason. The renderers list them.
func MarkNotEvaluated(r *Result, ids []string, reason string) {
	if r == nil || len(ids) == 0 {
		return
	}
	list := make([]any, len(ids))
	for i, id := range ids {
		list[i] = map[string]any{"case_id": id, "reason": reason}
	}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	r.Metadata[MetaNotEvaluatedCases] = list
}

// MarkNotEvaluatedCases records in r's metadata that the cases were not
// evaluated, each {case id, reason} (the order kept): MarkNotEvaluated's
// list when the reasons differ.
func MarkNotEvaluatedCases(r *Result, cases [][2]string) {
	if r == nil || len(cases) == 0 {
		return
	}
	list := make([]any, len(cases))
	for i, c := range cases {
		list[i] = map[string]any{"case_id": c[0], "reason": c[1]}
	}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	r.Metadata[MetaNotEvaluatedCases] = list
}

// NotEvaluatedCases reads MarkNotEvaluated's list back.
func NotEvaluatedCases(r *Result) [][2]string {
	list, _ := r.Metadata[MetaNotEvaluatedCases].([]any)
	var out [][2]string
	for _, v := range list {
		m, _ := v.(map[string]any)
		id, _ := m["case_id"].(string)
		reason, _ := m["reason"].(string)
		if id != "" {
			out = append(out, [2]string{id, reason})
		}
	}
	return out
}
