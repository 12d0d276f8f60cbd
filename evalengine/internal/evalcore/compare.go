package evalcore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// Comparison document constants (CONTRACTS §5.9).
const (
	ComparisonSchemaVersion = 1
	ComparisonReportType    = "baseline_comparison"

	ReasonNone                 = "none"
	ReasonScoreDrop            = "score_drop"
	ReasonMissingCurrentMetric = "missing_current_metric"
	ReasonMissingCurrentCase   = "missing_current_case"
	ReasonCaseNoLongerPasses   = "case_no_longer_passes"
	CaseStatusMissing          = "missing"
)

// CompareOptions is the regression policy. The zero value allows no drop.
type CompareOptions struct {
	// MaxPassRateDrop is the allowed fall of the pass rate, 0..1.
	MaxPassRateDrop float64 `json:"max_pass_rate_drop"`
	// MetricTolerances is the allowed fall of a metric's average score,
	// by metric id, 0..1; a metric not named allows 0.
	MetricTolerances map[string]float64 `json:"metric_tolerances"`
}

// Comparison is the baseline comparison document. It does not include the
// current result's own verdict: a caller gating on both ANDs them.
type Comparison struct {
	ReportSchemaVersion int          `json:"report_schema_version"`
	ReportType          string       `json:"report_type"`
	EvalSetID           string       `json:"eval_set_id"`
	BaselineVersion     string       `json:"baseline_version"`
	CurrentVersion      string       `json:"current_version"`
	Passed              bool         `json:"passed"`
	BaselinePassRate    float64      `json:"baseline_pass_rate"`
	CurrentPassRate     float64      `json:"current_pass_rate"`
	PassRateDrop        float64      `json:"pass_rate_drop"`
	MaxPassRateDrop     float64      `json:"max_pass_rate_drop"`
	MetricDiffs         []MetricDiff `json:"metric_diffs"`
	CaseDiffs           []CaseDiff   `json:"case_diffs"`

	// checked points to the Comparison itself when CompareSides built it
	// or DecodeComparison verified it, so CheckComparison (every
	// renderer) does not verify it again through two generic trees of
	// the document (hundreds of MiB at 100,000 cases). As with a
	// Result, mutating a checked Comparison in place is the caller's
	// mistake; a copy is checked again.
	checked *Comparison
}

// CheckComparison is c verified (DecodeComparison of its encoding), or c
// itself when this package built or verified it.
func CheckComparison(c *Comparison) (*Comparison, error) {
	if c == nil {
		return nil, ReasonErr(CodeInvalidComparison, "nil", "")
	}
	if c.checked == c {
		return c, nil
	}
	data, err := c.MarshalJSON()
	if err != nil {
		return nil, ReasonErr(CodeInvalidComparison, "not_json", "")
	}
	return DecodeComparison(data)
}

// MetricDiff compares one baseline summary metric.
type MetricDiff struct {
	MetricID      string  `json:"metric_id"`
	BaselineScore float64 `json:"baseline_score"`
	CurrentScore  float64 `json:"current_score"`
	ScoreDrop     float64 `json:"score_drop"`
	Tolerance     float64 `json:"tolerance"`
	Regression    bool    `json:"regression"`
	Reason        string  `json:"reason"`
}

// CaseDiff compares one baseline case.
type CaseDiff struct {
	CaseID            string `json:"case_id"`
	BaselineStatus    string `json:"baseline_status"`
	CurrentStatus     string `json:"current_status"`
	TrajectoryChanged bool   `json:"trajectory_changed"`
	Regression        bool   `json:"regression"`
	Reason            string `json:"reason"`
}

func (o CompareOptions) validate() error {
	if !isFraction(o.MaxPassRateDrop) {
		return NewErr(CodeInvalidComparisonOptions, "max_pass_rate_drop")
	}
	for id, t := range o.MetricTolerances {
		if id == "" || !isFraction(t) {
			return NewErr(CodeInvalidComparisonOptions, "metric_tolerances")
		}
	}
	return nil
}

// Compare checks current against baseline (§5.9). Both results are
// re-validated; they must be schema 2 and of the same eval set id. New
// metrics and cases in current are ignored.
func Compare(baseline, current *Result, opts CompareOptions) (*Comparison, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	b, err := ResultSide(baseline)
	if err != nil {
		return nil, &Error{Code: CodeInvalidBaseline, Reason: ErrorCode(err), Err: err}
	}
	c, err := ResultSide(current)
	if err != nil {
		return nil, &Error{Code: CodeInvalidCurrentResult, Reason: ErrorCode(err), Err: err}
	}
	return CompareSides(b, c, opts)
}

// CompareSide is what a comparison reads of one result: its summary (the
// result without its cases) and, per case, its id, status, verdict and a
// digest of its trajectory. That is a few dozen bytes a case whatever the
// samples hold, so a result of any size is compared in memory O(cases):
// ReadStreamSide reads one from a sample stream without keeping a sample.
type CompareSide struct {
	summary *Result // Cases nil
	// cases are sorted by id (stably: equal ids keep their case order),
	// so that CompareSides merges two sides without an index.
	cases []sideCase
}

// sideCase is one case of a CompareSide.
type sideCase struct {
	id, status string
	passed     bool
	// traj is trajectoryKey's digest; trajOK false when the trajectory
	// is not JSON, which equals nothing.
	traj   [sha256.Size]byte
	trajOK bool
}

// Summary is the side's result without its cases (the summary line of
// its stream): the header, pass rate, its interval and the metric
// summaries.
func (s *CompareSide) Summary() *Result { return s.summary }

// ResultSide is r's side of a comparison, r re-validated first.
func ResultSide(r *Result) (*CompareSide, error) {
	checked, err := CheckResult(r)
	if err != nil {
		return nil, err
	}
	s := &CompareSide{cases: make([]sideCase, 0, len(checked.Cases))}
	for i := range checked.Cases {
		c := &checked.Cases[i]
		s.add(c.CaseID, c.Status, c.Passed, c.Trajectory)
	}
	sum := *checked
	sum.Cases, sum.sampleJSON, sum.checked = nil, nil, nil
	s.summary = &sum
	s.sort()
	return s, nil
}

// StreamSide is the side of a comparison of a checked stream (see
// OpenStreamFile): its summary and its case lines, never a sample.
func StreamSide(f *StreamFile) (*CompareSide, error) {
	s := &CompareSide{summary: f.Summary, cases: make([]sideCase, 0, f.Header.CaseCount)}
	err := f.Cases(func(*CaseResult) bool { return false }, func(_ int, c *CaseResult) error {
		s.add(c.CaseID, c.Status, c.Passed, c.Trajectory)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.sort()
	return s, nil
}

// ReadStreamSide is the side of a comparison of the stream r holds, read
// once from start to end with OpenStreamFile's checks (the same errors)
// but without its index: of the sample lines it keeps one bit a sample
// and one byte a case, to check each case line against its samples, and
// of the case lines their side records. Memory is the side (O(cases))
// whatever the samples hold, and r need not be seekable.
func ReadStreamSide(r io.Reader) (*CompareSide, error) {
	var bits sampleBits
	s := &CompareSide{}
	sc, err := scanStream(r, &bits, scanHooks{onCase: func(c *scanCaseLine) error {
		if s.cases == nil {
			s.cases = make([]sideCase, 0, len(bits.npass))
		}
		s.add(c.Case.CaseID, c.Case.Status, c.Case.Passed, c.Case.Trajectory)
		return nil
	}})
	if err != nil {
		return nil, err
	}
	s.summary = sc.summary
	s.sort()
	return s, nil
}

func (s *CompareSide) add(id, status string, passed bool, trajectory []TrajectoryItem) {
	k, ok := trajectoryKey(trajectory)
	// The few statuses there are share one string each.
	for _, known := range [...]string{SampleStatusPassed, SampleStatusFailed, SampleStatusError, CaseStatusPartial} {
		if status == known {
			status = known
		}
	}
	s.cases = append(s.cases, sideCase{id: strings.Clone(id), status: status, passed: passed, traj: k, trajOK: ok})
}

func (s *CompareSide) sort() {
	slices.SortStableFunc(s.cases, func(a, b sideCase) int { return strings.Compare(a.id, b.id) })
}

// CompareSides is Compare of two sides (ResultSide, StreamSide).
func CompareSides(b, c *CompareSide, opts CompareOptions) (*Comparison, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	bs, cs := b.summary, c.summary
	if bs.ResultSchemaVersion != ResultSchemaVersion {
		return nil, ReasonErr(CodeInvalidBaseline, CodeUnsupportedResultVersion, "")
	}
	if cs.ResultSchemaVersion != ResultSchemaVersion {
		return nil, ReasonErr(CodeInvalidCurrentResult, CodeUnsupportedResultVersion, "")
	}
	if bs.EvalSetID != cs.EvalSetID {
		return nil, NewErr(CodeEvalSetMismatch, "")
	}
	cmp := &Comparison{
		ReportSchemaVersion: ComparisonSchemaVersion,
		ReportType:          ComparisonReportType,
		EvalSetID:           bs.EvalSetID,
		BaselineVersion:     bs.EvalSetVersion,
		CurrentVersion:      cs.EvalSetVersion,
		BaselinePassRate:    bs.PassRate,
		CurrentPassRate:     cs.PassRate,
		PassRateDrop:        math.Max(0, bs.PassRate-cs.PassRate),
		MaxPassRateDrop:     opts.MaxPassRateDrop,
		MetricDiffs:         []MetricDiff{},
		CaseDiffs:           make([]CaseDiff, 0, len(b.cases)),
	}
	regression := cmp.PassRateDrop > opts.MaxPassRateDrop

	cur := make(map[string]*MetricSummary, len(cs.Metrics))
	for i := range cs.Metrics {
		cur[cs.Metrics[i].MetricID] = &cs.Metrics[i]
	}
	bm := append([]MetricSummary(nil), bs.Metrics...)
	sort.Slice(bm, func(i, j int) bool { return bm[i].MetricID < bm[j].MetricID })
	for _, m := range bm {
		d := MetricDiff{MetricID: m.MetricID, BaselineScore: m.AverageScore, Tolerance: opts.MetricTolerances[m.MetricID], Reason: ReasonNone}
		if cm, ok := cur[m.MetricID]; ok {
			d.CurrentScore = cm.AverageScore
			d.ScoreDrop = math.Max(0, m.AverageScore-cm.AverageScore)
			if d.ScoreDrop > d.Tolerance {
				d.Regression, d.Reason = true, ReasonScoreDrop
			}
		} else {
			d.ScoreDrop = m.AverageScore
			d.Regression, d.Reason = true, ReasonMissingCurrentMetric
		}
		regression = regression || d.Regression
		cmp.MetricDiffs = append(cmp.MetricDiffs, d)
	}

	// Both sides are sorted by id: one merge. A case id twice in current
	// (a result never has that) compares against its last case.
	cc := c.cases
	for i := range b.cases {
		bc := &b.cases[i]
		for len(cc) > 0 && cc[0].id < bc.id {
			cc = cc[1:]
		}
		d := CaseDiff{CaseID: bc.id, BaselineStatus: bc.status, Reason: ReasonNone}
		if len(cc) > 0 && cc[0].id == bc.id {
			cur := &cc[0]
			for j := 1; j < len(cc) && cc[j].id == bc.id; j++ {
				cur = &cc[j]
			}
			d.CurrentStatus = cur.status
			d.TrajectoryChanged = !(bc.trajOK && cur.trajOK && bc.traj == cur.traj)
			if bc.passed && !cur.passed {
				d.Regression, d.Reason = true, ReasonCaseNoLongerPasses
			}
		} else {
			d.CurrentStatus = CaseStatusMissing
			d.TrajectoryChanged = true
			d.Regression, d.Reason = true, ReasonMissingCurrentCase
		}
		regression = regression || d.Regression
		cmp.CaseDiffs = append(cmp.CaseDiffs, d)
	}
	cmp.Passed = !regression
	cmp.checked = cmp
	return cmp, nil
}

// trajectoryKey digests a trajectory so that two digests are equal
// exactly when the trajectories' generic forms are jsonEqual: objects by sorted key, arrays in
// order, numbers by their float64 value (-0 as 0), every value tagged
// with its kind. ok is false when the trajectory is not JSON or holds a
// number jsonEqual cannot compare (equal to nothing, itself included).
func trajectoryKey(t []TrajectoryItem) (key [sha256.Size]byte, ok bool) {
	g, plain := plainTrajectory(t)
	if !plain {
		var err error
		if g, err = ToGeneric(t); err != nil {
			return key, false
		}
	}
	h := sha256.New()
	if !hashGeneric(h, g) {
		return key, false
	}
	h.Sum(key[:0])
	return key, true
}

// plainTrajectory is ToGeneric(t) built without encoding t, when t's
// strings are valid UTF-8 and its args and results are generic values
// already (as the stream checks and strict decoding build them:
// map[string]any, []any, string, json.Number, bool, nil), so that the
// JSON round trip would give them back unchanged. Anything else (a Go
// value an adapter returned, invalid UTF-8 that encoding would replace, a
// nil map that would become null) is false: ToGeneric's.
func plainTrajectory(t []TrajectoryItem) (any, bool) {
	if t == nil {
		return nil, false
	}
	out := make([]any, len(t))
	for i := range t {
		s := &t[i]
		if !utf8.ValidString(s.TurnID) || !utf8.ValidString(s.Kind) || !utf8.ValidString(s.Tool) ||
			s.CallID != nil && !utf8.ValidString(*s.CallID) || !plainGeneric(s.Args) || !plainGeneric(s.Result) {
			return nil, false
		}
		m := make(map[string]any, 6)
		m["turn_id"], m["kind"], m["tool"], m["call_id"] = s.TurnID, s.Kind, s.Tool, nil
		if s.CallID != nil {
			m["call_id"] = *s.CallID
		}
		// omitempty: a nil interface is left out.
		if s.Args != nil {
			m["args"] = s.Args
		}
		if s.Result != nil {
			m["result"] = s.Result
		}
		out[i] = m
	}
	return out, true
}

// plainGeneric reports whether v is a generic JSON value that encoding
// and decoding (with UseNumber) give back unchanged.
func plainGeneric(v any) bool {
	switch x := v.(type) {
	case nil, bool:
		return true
	case string:
		return utf8.ValidString(x)
	case json.Number:
		end, ok := jsonlimit.ScanNumber([]byte(x), 0)
		return ok && end == len(x)
	case map[string]any:
		if x == nil {
			return false
		}
		for k, e := range x {
			if !utf8.ValidString(k) || !plainGeneric(e) {
				return false
			}
		}
		return true
	case []any:
		if x == nil {
			return false
		}
		for _, e := range x {
			if !plainGeneric(e) {
				return false
			}
		}
		return true
	}
	return false
}

func hashGeneric(h hash.Hash, v any) bool {
	var b []byte
	str := func(tag byte, s string) {
		b = append(b[:0], tag)
		b = binary.AppendUvarint(b, uint64(len(s)))
		h.Write(b)
		io.WriteString(h, s)
	}
	switch x := v.(type) {
	case nil:
		h.Write([]byte{'n'})
	case string:
		str('s', x)
	case bool:
		if x {
			h.Write([]byte{'t'})
		} else {
			h.Write([]byte{'f'})
		}
	case map[string]any:
		b = binary.AppendUvarint(append(b[:0], 'o'), uint64(len(x)))
		h.Write(b)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			str('k', k)
			if !hashGeneric(h, x[k]) {
				return false
			}
		}
	case []any:
		b = binary.AppendUvarint(append(b[:0], 'a'), uint64(len(x)))
		h.Write(b)
		for _, e := range x {
			if !hashGeneric(h, e) {
				return false
			}
		}
	default:
		f, ok := toFloat(v)
		if !ok {
			return false
		}
		b = binary.BigEndian.AppendUint64(append(b[:0], 'd'), math.Float64bits(f+0))
		h.Write(b)
	}
	return true
}

// DecodeComparison reads a comparison document strictly: exact key set
// and every verdict, drop and reason re-checked, so a forged comparison is
// invalid_eval_comparison.
func DecodeComparison(data []byte) (*Comparison, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.OwnDocumentLimits())
	if err != nil {
		return nil, LimitErr(CodeInvalidComparison, err)
	}
	var c Comparison
	if err := jsonlimit.Unmarshal(data, jsonlimit.OwnDocumentLimits(), &c); err != nil {
		return nil, LimitErr(CodeInvalidComparison, err)
	}
	if err := c.verify(v); err != nil {
		return nil, err
	}
	c.checked = &c
	return &c, nil
}

func (c *Comparison) verify(doc any) error {
	bad := func(reason string) error { return ReasonErr(CodeInvalidComparison, reason, "") }
	if reason := c.headerReason(); reason != "" {
		return bad(reason)
	}
	regression := c.PassRateDrop > c.MaxPassRateDrop
	for i := range c.MetricDiffs {
		var prev *MetricDiff
		if i > 0 {
			prev = &c.MetricDiffs[i-1]
		}
		if reason := metricDiffReason(prev, &c.MetricDiffs[i]); reason != "" {
			return bad(reason)
		}
		regression = regression || c.MetricDiffs[i].Regression
	}
	for i := range c.CaseDiffs {
		var prev *CaseDiff
		if i > 0 {
			prev = &c.CaseDiffs[i-1]
		}
		if reason := caseDiffReason(prev, &c.CaseDiffs[i]); reason != "" {
			return bad(reason)
		}
		regression = regression || c.CaseDiffs[i].Regression
	}
	if c.Passed == regression {
		return bad("passed")
	}
	gen, err := ToGeneric(c)
	if err != nil {
		return bad("not_json")
	}
	if _, ok := jsonClose(gen, doc, "$"); !ok {
		return bad("inconsistent")
	}
	return nil
}

// headerReason checks a comparison's fields outside its rows: the reason
// it is invalid, or "".
func (c *Comparison) headerReason() string {
	if c.ReportSchemaVersion != ComparisonSchemaVersion || c.ReportType != ComparisonReportType {
		return "report_type"
	}
	if c.EvalSetID == "" || !isFraction(c.BaselinePassRate) || !isFraction(c.CurrentPassRate) || !isFraction(c.MaxPassRateDrop) {
		return "header"
	}
	if math.Abs(c.PassRateDrop-math.Max(0, c.BaselinePassRate-c.CurrentPassRate)) > floatTolerance {
		return "pass_rate_drop"
	}
	return ""
}

// metricDiffReason checks a metric row after prev (nil for the first):
// the reason it is invalid, or "".
func metricDiffReason(prev, d *MetricDiff) string {
	if prev != nil && prev.MetricID >= d.MetricID {
		return "metric_order"
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= floatTolerance }
	ok := isFraction(d.Tolerance) && isFraction(d.BaselineScore) && isFraction(d.CurrentScore)
	switch d.Reason {
	case ReasonMissingCurrentMetric:
		ok = ok && d.Regression && d.CurrentScore == 0 && near(d.ScoreDrop, d.BaselineScore)
	case ReasonScoreDrop, ReasonNone:
		drop := math.Max(0, d.BaselineScore-d.CurrentScore)
		ok = ok && near(d.ScoreDrop, drop) && d.Regression == (drop > d.Tolerance) && d.Regression == (d.Reason == ReasonScoreDrop)
	default:
		ok = false
	}
	if !ok {
		return "metric_diff"
	}
	return ""
}

// caseDiffReason checks a case row after prev (nil for the first): the
// reason it is invalid, or "".
func caseDiffReason(prev, d *CaseDiff) string {
	if prev != nil && prev.CaseID >= d.CaseID {
		return "case_order"
	}
	ok := d.CaseID != ""
	switch d.Reason {
	case ReasonMissingCurrentCase:
		ok = ok && d.Regression && d.TrajectoryChanged && d.CurrentStatus == CaseStatusMissing
	case ReasonCaseNoLongerPasses:
		ok = ok && d.Regression && d.CurrentStatus != CaseStatusMissing
	case ReasonNone:
		ok = ok && !d.Regression && d.CurrentStatus != CaseStatusMissing
	default:
		ok = false
	}
	if !ok {
		return "case_diff"
	}
	return ""
}

// MarshalJSON keeps nil diff lists as [] so the document has one shape.
func (c Comparison) MarshalJSON() ([]byte, error) {
	type plain Comparison
	p := plain(c)
	if p.MetricDiffs == nil {
		p.MetricDiffs = []MetricDiff{}
	}
	if p.CaseDiffs == nil {
		p.CaseDiffs = []CaseDiff{}
	}
	return json.Marshal(p)
}
