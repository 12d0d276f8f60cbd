package evalcore

import "errors"

// The stream checks (scanStream: OpenStreamFile, ReadStreamSide,
// ReadStreamSeries) decode every sample line, and a 100,000-case stream
// is 100,000 of them. What they read of a sample is its identity, its
// status and verdicts, and its metric results; what they do not read (a
// turn's input, expected and actual output, events, the metadata objects,
// a trajectory step's args and result) encoding/json would build as maps
// and interfaces only to drop them. scanSample is SampleResult with those
// fields replaced by types that check the JSON type and build nothing:
// the same JSON names, the same Go types for every field that is built,
// so encoding/json (strict, unknown fields refused) accepts exactly the
// lines it accepts into SampleResult, no more, no less.
// TestScanTypes_MirrorTheResultTypes holds the types together. Case lines
// are read the same way (scanCase).

// scanSample is a sample line's sample as the stream checks read it.
type scanSample struct {
	CaseID      string               `json:"case_id"`
	SampleID    string               `json:"sample_id"`
	SampleIndex int                  `json:"sample_index"`
	Status      string               `json:"status"`
	Passed      bool                 `json:"passed"`
	DurationMS  int64                `json:"duration_ms"`
	Turns       []scanTurn           `json:"turns"`
	Trajectory  []scanTrajectoryItem `json:"trajectory"`
	Criteria    []scanMetric         `json:"criteria"`
	Metadata    jsonObject           `json:"metadata"`
	Error       string               `json:"error,omitempty"`
	TraceID     string               `json:"trace_id,omitempty"`
}

// scanTurn is TurnResult as the stream checks read it.
type scanTurn struct {
	TurnID          string               `json:"turn_id"`
	Input           jsonValue            `json:"input"`
	Expected        jsonValue            `json:"expected"`
	Actual          jsonValue            `json:"actual"`
	Passed          bool                 `json:"passed"`
	Metrics         []scanMetric         `json:"metrics"`
	Events          jsonArray            `json:"events,omitempty"`
	Trajectory      []scanTrajectoryItem `json:"trajectory"`
	Metadata        jsonObject           `json:"metadata"`
	AdapterMetadata jsonObject           `json:"adapter_metadata"`
	RunID           string               `json:"run_id,omitempty"`
	TraceID         string               `json:"trace_id,omitempty"`
}

// scanTrajectoryItem is TrajectoryItem as the stream checks read it.
type scanTrajectoryItem struct {
	TurnID string     `json:"turn_id"`
	Kind   string     `json:"kind"`
	Tool   string     `json:"tool"`
	CallID jsonString `json:"call_id"`
	Args   jsonValue  `json:"args,omitempty"`
	Result jsonValue  `json:"result,omitempty"`
}

// scanMetric is MetricResult as the stream checks read it.
type scanMetric struct {
	MetricID  string     `json:"metric_id"`
	Kind      string     `json:"kind"`
	Scope     string     `json:"scope"`
	Score     float64    `json:"score"`
	Threshold float64    `json:"threshold"`
	Passed    bool       `json:"passed"`
	Status    string     `json:"status"`
	Metadata  jsonObject `json:"metadata"`
}

// jsonValue stands for an `any` field: every JSON value decodes into one
// (the line was checked as JSON before it is decoded).
type jsonValue struct{}

func (*jsonValue) UnmarshalJSON([]byte) error { return nil }

// jsonObject stands for a map[string]any field: an object or null, as
// encoding/json takes into a map; null is recorded (a nil map).
type jsonObject struct{ set bool }

func (o *jsonObject) UnmarshalJSON(b []byte) error { return o.take(b, '{') }

// jsonArray stands for a []any field: an array or null.
type jsonArray struct{ set bool }

func (a *jsonArray) UnmarshalJSON(b []byte) error { return (*jsonObject)(a).take(b, '[') }

// jsonString stands for a *string field: a string or null.
type jsonString struct{ set bool }

func (s *jsonString) UnmarshalJSON(b []byte) error { return (*jsonObject)(s).take(b, '"') }

// errScanType is a value of the wrong JSON type (where encoding/json
// would fail with an UnmarshalTypeError into the real field).
var errScanType = errors.New("value of the wrong JSON type")

func (o *jsonObject) take(b []byte, open byte) error {
	switch {
	case len(b) > 0 && b[0] == open:
		o.set = true
		return nil
	case string(b) == "null":
		o.set = false
		return nil
	}
	return errScanType
}

// scanCase is a case line's case as the stream checks read it: CaseResult
// with its metadata objects checked, not built, and its samples (which a
// case line must not have) checked for null only. Its trajectory is
// built: a comparison side digests it.
type scanCase struct {
	CaseID                  string           `json:"case_id"`
	Status                  string           `json:"status"`
	Passed                  bool             `json:"passed"`
	DurationMS              int64            `json:"duration_ms"`
	Trajectory              []TrajectoryItem `json:"trajectory"`
	Metadata                jsonObject       `json:"metadata"`
	Criteria                []scanMetric     `json:"criteria"`
	SampleCount             int              `json:"sample_count"`
	SuccessfulSampleCount   int              `json:"successful_sample_count"`
	PassedSampleCount       int              `json:"passed_sample_count"`
	ErrorSampleCount        int              `json:"error_sample_count"`
	SamplePassRate          float64          `json:"sample_pass_rate"`
	SamplePassRateThreshold float64          `json:"sample_pass_rate_threshold"`
	MinSuccessfulSamples    int              `json:"min_successful_samples"`
	SampleStatistics        Statistics       `json:"sample_statistics"`
	Samples                 jsonArray        `json:"samples"`
}

// scanSampleLine and scanCaseLine are the two lines as the checks read
// them (streamSample and caseLine).
type scanSampleLine struct {
	Type      string      `json:"type"`
	CaseIndex int         `json:"case_index"`
	Sample    *scanSample `json:"sample"`
}

type scanCaseLine struct {
	Type      string    `json:"type"`
	CaseIndex int       `json:"case_index"`
	Case      *scanCase `json:"case"`
}

// eachMetric calls fn with a scanned sample's metric results in document
// order (eachMetricResult's).
func (s *scanSample) eachMetric(fn func(m *scanMetric)) {
	for mi := range s.Criteria {
		fn(&s.Criteria[mi])
	}
	for ti := range s.Turns {
		for mi := range s.Turns[ti].Metrics {
			fn(&s.Turns[ti].Metrics[mi])
		}
	}
}

// check is Stream.checkSample of a scanned sample: index range, the
// deterministic sample id, and its derived status and verdict.
func (s *scanSample) check(h *StreamHeader, ci int) error {
	if ci < 0 || ci >= h.CaseCount || s.SampleIndex < 0 || s.SampleIndex >= h.SampleCount {
		return errors.New("sample_out_of_range")
	}
	if s.CaseID == "" || s.SampleID != SampleID(h.EvalSetID, h.EvalSetVersion, s.CaseID, s.SampleIndex) {
		return errors.New("sample_identity")
	}
	if s.Turns == nil || s.Trajectory == nil || s.Criteria == nil || !s.Metadata.set {
		return errors.New("invalid_sample")
	}
	if s.Error != "" && s.Status != SampleStatusError || s.Error == "" && s.Status == SampleStatusError {
		return errors.New("sample_status")
	}
	// finishSample's verdict.
	status, passed := SampleStatusError, false
	if s.Error == "" {
		passed = true
		for i := range s.Turns {
			passed = passed && s.Turns[i].Passed
		}
		for i := range s.Criteria {
			passed = passed && s.Criteria[i].Passed
		}
		status = SampleStatusFailed
		if passed {
			status = SampleStatusPassed
		}
	}
	if s.Status != status || s.Passed != passed {
		return errors.New("sample_status")
	}
	return nil
}
