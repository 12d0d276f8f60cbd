package evalcore

import (
	"encoding/json"
	"math"
	"sort"

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
	b, err := CheckResult(baseline)
	if err != nil {
		return nil, &Error{Code: CodeInvalidBaseline, Reason: ErrorCode(err), Err: err}
	}
	c, err := CheckResult(current)
	if err != nil {
		return nil, &Error{Code: CodeInvalidCurrentResult, Reason: ErrorCode(err), Err: err}
	}
	if b.ResultSchemaVersion != ResultSchemaVersion {
		return nil, ReasonErr(CodeInvalidBaseline, CodeUnsupportedResultVersion, "")
	}
	if c.ResultSchemaVersion != ResultSchemaVersion {
		return nil, ReasonErr(CodeInvalidCurrentResult, CodeUnsupportedResultVersion, "")
	}
	if b.EvalSetID != c.EvalSetID {
		return nil, NewErr(CodeEvalSetMismatch, "")
	}
	cmp := &Comparison{
		ReportSchemaVersion: ComparisonSchemaVersion,
		ReportType:          ComparisonReportType,
		EvalSetID:           b.EvalSetID,
		BaselineVersion:     b.EvalSetVersion,
		CurrentVersion:      c.EvalSetVersion,
		BaselinePassRate:    b.PassRate,
		CurrentPassRate:     c.PassRate,
		PassRateDrop:        math.Max(0, b.PassRate-c.PassRate),
		MaxPassRateDrop:     opts.MaxPassRateDrop,
		MetricDiffs:         []MetricDiff{},
		CaseDiffs:           []CaseDiff{},
	}
	regression := cmp.PassRateDrop > opts.MaxPassRateDrop

	cur := make(map[string]*MetricSummary, len(c.Metrics))
	for i := range c.Metrics {
		cur[c.Metrics[i].MetricID] = &c.Metrics[i]
	}
	bm := append([]MetricSummary(nil), b.Metrics...)
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

	curCases := make(map[string]*CaseResult, len(c.Cases))
	for i := range c.Cases {
		curCases[c.Cases[i].CaseID] = &c.Cases[i]
	}
	for _, bc := range sortedCases(b.Cases) {
		d := CaseDiff{CaseID: bc.CaseID, BaselineStatus: bc.Status, Reason: ReasonNone}
		if cc, ok := curCases[bc.CaseID]; ok {
			d.CurrentStatus = cc.Status
			d.TrajectoryChanged = !sameTrajectory(bc.Trajectory, cc.Trajectory)
			if bc.Passed && !cc.Passed {
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
	return cmp, nil
}

func sameTrajectory(a, b []TrajectoryItem) bool {
	ga, err1 := ToGeneric(a)
	gb, err2 := ToGeneric(b)
	return err1 == nil && err2 == nil && jsonEqual(ga, gb)
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
	return &c, nil
}

func (c *Comparison) verify(doc any) error {
	bad := func(reason string) error { return ReasonErr(CodeInvalidComparison, reason, "") }
	if c.ReportSchemaVersion != ComparisonSchemaVersion || c.ReportType != ComparisonReportType {
		return bad("report_type")
	}
	if c.EvalSetID == "" || !isFraction(c.BaselinePassRate) || !isFraction(c.CurrentPassRate) || !isFraction(c.MaxPassRateDrop) {
		return bad("header")
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= floatTolerance }
	if !near(c.PassRateDrop, math.Max(0, c.BaselinePassRate-c.CurrentPassRate)) {
		return bad("pass_rate_drop")
	}
	regression := c.PassRateDrop > c.MaxPassRateDrop
	for i, d := range c.MetricDiffs {
		if i > 0 && c.MetricDiffs[i-1].MetricID >= d.MetricID {
			return bad("metric_order")
		}
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
			return bad("metric_diff")
		}
		regression = regression || d.Regression
	}
	for i, d := range c.CaseDiffs {
		if i > 0 && c.CaseDiffs[i-1].CaseID >= d.CaseID {
			return bad("case_order")
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
			return bad("case_diff")
		}
		regression = regression || d.Regression
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
