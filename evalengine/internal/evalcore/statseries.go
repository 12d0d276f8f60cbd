package evalcore

import (
	"io"
	"strconv"
)

// StatsSeries is what the statistics of `adk eval stats` read of one
// result: its identity, case counts and metric ids, every case's pass
// outcome in case order, and every ok score of each metric in document
// order (case, sample, the sample's criteria, then its turns' metrics),
// which is the order the statistics sum them in. It is the same for a
// result document (SeriesOfResult) and for its JSON Lines stream
// (ReadStreamSeries), so the report is the same bytes either way.
type StatsSeries struct {
	EvalSetID, EvalSetVersion  string
	CaseCount, PassedCaseCount int
	// MetricIDs are the result's metric descriptors' ids, in order.
	MetricIDs []string
	// Scores holds, by metric id, every ok score in document order; a
	// metric without one maps to nil.
	Scores map[string][]float64
	// outcomes is one bit a case (1 passed), in case order, of cases
	// cases.
	outcomes []uint64
	cases    int
}

// Cases is the number of case outcomes (Outcomes).
func (s *StatsSeries) Cases() int { return s.cases }

// Outcomes appends the cases' pass outcomes (1 passed, 0 not), in case
// order, from the first'th case on, to dst.
func (s *StatsSeries) Outcomes(dst []float64, first int) []float64 {
	for i := max(first, 0); i < s.cases; i++ {
		x := 0.0
		if s.outcomes[i/64]&(1<<(i%64)) != 0 {
			x = 1
		}
		dst = append(dst, x)
	}
	return dst
}

func (s *StatsSeries) setOutcome(i int, passed bool) {
	if passed {
		s.outcomes[i/64] |= 1 << (i % 64)
	}
}

// SeriesOfResult is r's statistics series; r must be checked
// (CheckResult).
func SeriesOfResult(r *Result) *StatsSeries {
	s := &StatsSeries{
		EvalSetID: r.EvalSetID, EvalSetVersion: r.EvalSetVersion,
		CaseCount: r.CaseCount, PassedCaseCount: r.PassedCaseCount,
		Scores:   make(map[string][]float64, len(r.Metrics)),
		outcomes: make([]uint64, (len(r.Cases)+63)/64),
		cases:    len(r.Cases),
	}
	for _, m := range r.Metrics {
		s.MetricIDs = append(s.MetricIDs, m.MetricID)
		s.Scores[m.MetricID] = nil
	}
	for ci := range r.Cases {
		s.setOutcome(ci, r.Cases[ci].Passed)
		for si := range r.Cases[ci].Samples {
			eachMetricResult(&r.Cases[ci].Samples[si], func(m *MetricResult) {
				if m.Status == StatusOK {
					s.Scores[m.MetricID] = append(s.Scores[m.MetricID], m.Score)
				}
			})
		}
	}
	return s
}

// eachMetricResult calls fn with a sample's metric results in document
// order: its criteria, then each turn's metrics.
func eachMetricResult(s *SampleResult, fn func(m *MetricResult)) {
	for mi := range s.Criteria {
		fn(&s.Criteria[mi])
	}
	for ti := range s.Turns {
		for mi := range s.Turns[ti].Metrics {
			fn(&s.Turns[ti].Metrics[mi])
		}
	}
}

// Bounds of a stream's statistics series.
const (
	// MaxStreamStatsScores bounds the ok scores ReadStreamSeries holds
	// (about 18 bytes each at the peak: see scoreArena).
	MaxStreamStatsScores = 1 << 24
	// maxStreamStatsMetrics bounds the distinct metric ids of a stream's
	// samples while it is read (before its summary says which exist).
	maxStreamStatsMetrics = 4096
)

// ReadStreamSeries is the statistics series of the stream r holds, read
// once from start to end with OpenStreamFile's checks (the same errors),
// plus: every metric id of a sample is one of the summary's metrics
// (invalid_eval_stream unknown_metric) and at most MaxStreamStatsScores ok
// scores (too_many_scores). Samples come in finish order, so the scores
// are held until the summary, then put in document order: memory is 8
// bytes a sample, 10 bytes an ok score while reading and 8 bytes an ok
// score after (the series), and one bit a case; never a sample.
func ReadStreamSeries(r io.Reader) (*StatsSeries, error) {
	var bits sampleBits
	var a scoreArena
	s := &StatsSeries{}
	sc, err := scanStream(r, &bits, scanHooks{
		onHeader: func(h *StreamHeader) {
			a.start(h)
			s.outcomes = make([]uint64, (h.CaseCount+63)/64)
			s.cases = h.CaseCount
		},
		onSample: a.add,
		onCase: func(c *scanCaseLine) error {
			s.setOutcome(c.CaseIndex, c.Case.Passed)
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	sum := sc.summary
	s.EvalSetID, s.EvalSetVersion = sum.EvalSetID, sum.EvalSetVersion
	s.CaseCount, s.PassedCaseCount = sum.CaseCount, sum.PassedCaseCount
	s.Scores = make(map[string][]float64, len(sum.Metrics))
	for _, m := range sum.Metrics {
		if _, dup := s.Scores[m.MetricID]; dup || m.MetricID == "" {
			return nil, ReasonErr(CodeInvalidEvalStream, "metric_descriptor", Bound(m.MetricID))
		}
		s.MetricIDs = append(s.MetricIDs, m.MetricID)
		s.Scores[m.MetricID] = nil
	}
	for _, id := range a.ids {
		if _, ok := s.Scores[id]; !ok {
			return nil, ReasonErr(CodeInvalidEvalStream, "unknown_metric", Bound(id))
		}
	}
	a.series(s.Scores)
	return s, nil
}

// scoreArena holds a stream's ok scores in file order until they can be
// put in document order: a sample's scores are one run of vals (with
// each score's metric in slots), found through runs by (case, sample).
type scoreArena struct {
	S     int
	slot  map[string]uint16
	ids   []string // by slot
	vals  []float64
	slots []uint16
	runs  []scoreRun // by case*S + sample
}

// scoreRun is where a sample's scores are in the arena.
type scoreRun struct{ off, n uint32 }

func (a *scoreArena) start(h *StreamHeader) {
	a.S = h.SampleCount
	a.slot = map[string]uint16{}
	a.runs = make([]scoreRun, h.CaseCount*h.SampleCount)
}

// add records a checked sample's ok scores (scanStream has put its case
// and sample index in range and rejects a duplicate after this call).
func (a *scoreArena) add(ci int, smp *scanSample) error {
	var err error
	off := len(a.vals)
	smp.eachMetric(func(m *scanMetric) {
		if err != nil {
			return
		}
		k, ok := a.slot[m.MetricID]
		if !ok {
			if len(a.ids) == maxStreamStatsMetrics {
				err = ReasonErr(CodeInvalidEvalStream, "too_many_metrics", strconv.Itoa(maxStreamStatsMetrics))
				return
			}
			k = uint16(len(a.ids))
			a.ids = append(a.ids, m.MetricID)
			a.slot[m.MetricID] = k
		}
		if m.Status != StatusOK {
			return
		}
		if len(a.vals) == MaxStreamStatsScores {
			err = ReasonErr(CodeInvalidEvalStream, "too_many_scores", strconv.Itoa(MaxStreamStatsScores))
			return
		}
		a.vals = append(a.vals, m.Score)
		a.slots = append(a.slots, k)
	})
	if err != nil {
		return err
	}
	a.runs[ci*a.S+smp.SampleIndex] = scoreRun{off: uint32(off), n: uint32(len(a.vals) - off)}
	return nil
}

// series appends every metric's scores to into in document order, then
// lets the arena go.
func (a *scoreArena) series(into map[string][]float64) {
	counts := make([]int, len(a.ids))
	for _, k := range a.slots {
		counts[k]++
	}
	out := make([][]float64, len(a.ids))
	for k, n := range counts {
		if n > 0 {
			out[k] = make([]float64, 0, n)
		}
	}
	for _, run := range a.runs {
		for i := run.off; i < run.off+run.n; i++ {
			k := a.slots[i]
			out[k] = append(out[k], a.vals[i])
		}
	}
	for k, id := range a.ids {
		if out[k] != nil {
			into[id] = out[k]
		}
	}
	*a = scoreArena{}
}
