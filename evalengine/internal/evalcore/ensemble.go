package evalcore

import (
	"math"
	"sort"
	"strconv"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// Ensemble and calibration error codes.
const (
	CodeInvalidEnsembleVotes   = "invalid_eval_ensemble_votes"
	CodeDuplicateEnsembleVote  = "duplicate_eval_ensemble_vote"
	CodeInvalidEnsembleOptions = "invalid_eval_ensemble_options"
	CodeInvalidCalibration     = "invalid_eval_calibration"
)

// Ensemble strategies, bounds and document types (CONTRACTS §5.13).
const (
	EnsembleWeightedMean = "weighted_mean"
	EnsembleMajority     = "majority"

	MaxEnsembleVotes       = 128
	MaxVoteWeight          = 100
	MaxCalibrationExamples = 100_000
	CalibrationType        = "classification_threshold"
)

// Vote is one judge's persisted verdict. Weight is in (0, 100] and
// Confidence in 0..1; DecodeVotes fills both with 1 when absent.
type Vote struct {
	JudgeID    string  `json:"judge_id"` // 1..256 bytes, unique
	Score      float64 `json:"score"`    // 0..1
	Weight     float64 `json:"weight"`
	Confidence float64 `json:"confidence"`
}

// EnsembleOptions configure AggregateVotes. Start from
// DefaultEnsembleOptions.
type EnsembleOptions struct {
	Strategy                    string  `json:"strategy"`                      // weighted_mean | majority
	Threshold                   float64 `json:"threshold"`                     // 0..1
	MinJudges                   int     `json:"min_judges"`                    // 1..128
	ReviewDisagreementThreshold float64 `json:"review_disagreement_threshold"` // 0..1
}

// DefaultEnsembleOptions are weighted mean, threshold 0.5, one judge,
// review at a disagreement of 0.5.
func DefaultEnsembleOptions() EnsembleOptions {
	return EnsembleOptions{Strategy: EnsembleWeightedMean, Threshold: 0.5, MinJudges: 1, ReviewDisagreementThreshold: 0.5}
}

// Ensemble is the aggregate of a set of votes.
type Ensemble struct {
	EnsembleType     string  `json:"ensemble_type"`
	Score            float64 `json:"score"`
	Threshold        float64 `json:"threshold"`
	Passed           bool    `json:"passed"`
	JudgeCount       int     `json:"judge_count"`
	MinimumJudges    int     `json:"minimum_judges"`
	Disagreement     float64 `json:"disagreement"`
	NeedsHumanReview bool    `json:"needs_human_review"`
	Votes            []Vote  `json:"votes"`
}

// DecodeVotes reads persisted votes: a JSON array of {judge_id (or id),
// score, weight?, confidence?}, unknown keys refused, weight and
// confidence defaulting to 1. It checks bounds like AggregateVotes.
func DecodeVotes(data []byte) ([]Vote, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.Limits{MaxBytes: 1 << 20})
	if err != nil {
		return nil, LimitErr(CodeInvalidEnsembleVotes, err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, ReasonErr(CodeInvalidEnsembleVotes, "not_an_array", "")
	}
	if len(list) > MaxEnsembleVotes {
		return nil, ReasonErr(CodeInvalidEnsembleVotes, "too_many_votes", strconv.Itoa(len(list)))
	}
	allowed := KeySet("judge_id", "id", "score", "weight", "confidence")
	out := make([]Vote, 0, len(list))
	for i, item := range list {
		idx := strconv.Itoa(i + 1)
		m, ok := item.(map[string]any)
		if !ok || len(UnknownKeys(m, allowed)) > 0 {
			return nil, NewErr(CodeInvalidEnsembleVotes, idx)
		}
		id, _ := m["judge_id"].(string)
		if alt, ok := m["id"].(string); ok && id == "" {
			id = alt
		}
		vote := Vote{JudgeID: id, Weight: 1, Confidence: 1}
		var ok1, ok2, ok3 bool
		vote.Score, ok1 = toFloat(m["score"])
		ok2, ok3 = true, true
		if w, present := m["weight"]; present {
			vote.Weight, ok2 = toFloat(w)
		}
		if c, present := m["confidence"]; present {
			vote.Confidence, ok3 = toFloat(c)
		}
		if !ok1 || !ok2 || !ok3 {
			return nil, NewErr(CodeInvalidEnsembleVotes, idx)
		}
		out = append(out, vote)
	}
	if err := checkVotes(out); err != nil {
		return nil, err
	}
	return out, nil
}

func checkVotes(votes []Vote) error {
	if len(votes) > MaxEnsembleVotes {
		return ReasonErr(CodeInvalidEnsembleVotes, "too_many_votes", strconv.Itoa(len(votes)))
	}
	seen := make(map[string]bool, len(votes))
	for i, v := range votes {
		idx := strconv.Itoa(i + 1)
		if v.JudgeID == "" || len(v.JudgeID) > 256 {
			return ReasonErr(CodeInvalidEnsembleVotes, "judge_id", idx)
		}
		if seen[v.JudgeID] {
			return NewErr(CodeDuplicateEnsembleVote, v.JudgeID)
		}
		seen[v.JudgeID] = true
		if !isFraction(v.Score) || !isFraction(v.Confidence) || math.IsNaN(v.Weight) || v.Weight <= 0 || v.Weight > MaxVoteWeight {
			return ReasonErr(CodeInvalidEnsembleVotes, "vote_value", idx)
		}
	}
	return nil
}

// AggregateVotes combines persisted votes (§5.13); it never calls a
// provider. weighted_mean = Σ s·w·c / Σ w·c (0 when every vote has zero
// confidence); majority = the share of votes with score ≥ threshold.
// disagreement = max − min score. passed needs MinJudges votes and score ≥
// threshold; needs_human_review is set when there are too few votes or
// disagreement ≥ ReviewDisagreementThreshold.
func AggregateVotes(votes []Vote, opts EnsembleOptions) (*Ensemble, error) {
	if opts.Strategy != EnsembleWeightedMean && opts.Strategy != EnsembleMajority {
		return nil, NewErr(CodeInvalidEnsembleOptions, "strategy")
	}
	if !isFraction(opts.Threshold) || !isFraction(opts.ReviewDisagreementThreshold) || opts.MinJudges < 1 || opts.MinJudges > MaxEnsembleVotes {
		return nil, NewErr(CodeInvalidEnsembleOptions, "bounds")
	}
	if err := checkVotes(votes); err != nil {
		return nil, err
	}
	e := &Ensemble{
		EnsembleType:  opts.Strategy,
		Threshold:     opts.Threshold,
		JudgeCount:    len(votes),
		MinimumJudges: opts.MinJudges,
		Votes:         append([]Vote{}, votes...),
	}
	if len(votes) > 0 {
		lo, hi := votes[0].Score, votes[0].Score
		var num, den float64
		above := 0
		for _, v := range votes {
			lo, hi = math.Min(lo, v.Score), math.Max(hi, v.Score)
			num += v.Score * v.Weight * v.Confidence
			den += v.Weight * v.Confidence
			if v.Score >= opts.Threshold {
				above++
			}
		}
		e.Disagreement = hi - lo
		if opts.Strategy == EnsembleMajority {
			e.Score = float64(above) / float64(len(votes))
		} else if den > 0 {
			e.Score = clamp01(num / den)
		}
	}
	enough := len(votes) >= opts.MinJudges
	e.Passed = enough && e.Score >= opts.Threshold
	e.NeedsHumanReview = !enough || e.Disagreement >= opts.ReviewDisagreementThreshold
	return e, nil
}

// CalibrationExample is one labelled score.
type CalibrationExample struct {
	Score float64 `json:"score"`
	Label bool    `json:"label"`
}

// Calibration is a chosen classification threshold.
type Calibration struct {
	CalibrationType string  `json:"calibration_type"`
	Threshold       float64 `json:"threshold"`
	ExampleCount    int     `json:"example_count"`
	CorrectCount    int     `json:"correct_count"`
	Accuracy        float64 `json:"accuracy"`
}

// CalibrateThreshold picks the threshold that classifies the most examples
// correctly (score ≥ t ⇔ label) among {0, 1, defaultThreshold, every
// example score}, the lowest on ties. It needs 1..100 000 examples. The
// sweep is O(n log n): candidates and examples are sorted once.
func CalibrateThreshold(examples []CalibrationExample, defaultThreshold float64) (*Calibration, error) {
	if len(examples) == 0 || len(examples) > MaxCalibrationExamples {
		return nil, ReasonErr(CodeInvalidCalibration, "example_count", strconv.Itoa(len(examples)))
	}
	if !isFraction(defaultThreshold) {
		return nil, ReasonErr(CodeInvalidCalibration, "default_threshold", "")
	}
	sorted := make([]CalibrationExample, len(examples))
	copy(sorted, examples)
	positives := 0
	cands := []float64{0, 1, defaultThreshold}
	for i, ex := range sorted {
		if !isFraction(ex.Score) {
			return nil, ReasonErr(CodeInvalidCalibration, "score", strconv.Itoa(i+1))
		}
		if ex.Label {
			positives++
		}
		cands = append(cands, ex.Score)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Score < sorted[j].Score })
	sort.Float64s(cands)
	// For threshold t, examples below t are predicted negative: correct =
	// negatives below t + positives at or above t.
	best, bestCorrect := 0.0, -1
	i, negBelow, posBelow := 0, 0, 0
	for k, t := range cands {
		if k > 0 && t == cands[k-1] {
			continue
		}
		for i < len(sorted) && sorted[i].Score < t {
			if sorted[i].Label {
				posBelow++
			} else {
				negBelow++
			}
			i++
		}
		if correct := negBelow + positives - posBelow; correct > bestCorrect {
			best, bestCorrect = t, correct
		}
	}
	return &Calibration{
		CalibrationType: CalibrationType,
		Threshold:       best,
		ExampleCount:    len(examples),
		CorrectCount:    bestCorrect,
		Accuracy:        float64(bestCorrect) / float64(len(examples)),
	}, nil
}

// CalibratedScore is a score classified by a calibration.
type CalibratedScore struct {
	Score     float64 `json:"score"`
	Threshold float64 `json:"threshold"`
	Passed    bool    `json:"passed"`
}

// ApplyCalibration classifies score with c's threshold.
func ApplyCalibration(c *Calibration, score float64) (CalibratedScore, error) {
	if c == nil || c.CalibrationType != CalibrationType || !isFraction(c.Threshold) {
		return CalibratedScore{}, ReasonErr(CodeInvalidCalibration, "calibration", "")
	}
	if !isFraction(score) {
		return CalibratedScore{}, ReasonErr(CodeInvalidCalibration, "score", "")
	}
	return CalibratedScore{Score: score, Threshold: c.Threshold, Passed: score >= c.Threshold}, nil
}
