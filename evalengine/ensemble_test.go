package evalengine_test

import (
	"encoding/json"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

func vote(id string, score, weight, confidence float64) evalengine.Vote {
	return evalengine.Vote{JudgeID: id, Score: score, Weight: weight, Confidence: confidence}
}

func TestEnsemble_WeightedAndReview(t *testing.T) {
	votes := []evalengine.Vote{vote("a", 0.9, 2, 1), vote("b", 0.3, 1, 0.5)}
	e, err := evalengine.AggregateVotes(votes, evalengine.DefaultEnsembleOptions())
	if err != nil {
		t.Fatal(err)
	}
	// (0.9·2·1 + 0.3·1·0.5) / (2 + 0.5) = 1.95/2.5 = 0.78
	near(t, "score", e.Score, 0.78, 1e-12)
	near(t, "disagreement", e.Disagreement, 0.6, 1e-12)
	if e.EnsembleType != "weighted_mean" || !e.Passed || !e.NeedsHumanReview || e.JudgeCount != 2 || e.MinimumJudges != 1 || len(e.Votes) != 2 {
		t.Fatalf("ensemble %+v", e)
	}
	calm, _ := evalengine.AggregateVotes([]evalengine.Vote{vote("a", 0.6, 1, 1), vote("b", 0.7, 1, 1)}, evalengine.DefaultEnsembleOptions())
	if calm.NeedsHumanReview || !calm.Passed {
		t.Fatalf("calm ensemble %+v", calm)
	}
	data, _ := json.Marshal(e)
	var doc map[string]any
	_ = json.Unmarshal(data, &doc)
	for _, k := range []string{"ensemble_type", "score", "threshold", "passed", "judge_count", "minimum_judges", "disagreement", "needs_human_review", "votes"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("missing %s", k)
		}
	}
}

func TestEnsemble_MajorityAndMinimum(t *testing.T) {
	o := evalengine.DefaultEnsembleOptions()
	o.Strategy = evalengine.EnsembleMajority
	o.MinJudges = 4
	e, err := evalengine.AggregateVotes([]evalengine.Vote{vote("a", 0.9, 1, 1), vote("b", 0.5, 1, 1), vote("c", 0.2, 1, 1)}, o)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "majority", e.Score, 2.0/3, 1e-12)
	if e.Passed || !e.NeedsHumanReview {
		t.Fatalf("too few judges must not pass and must ask for review: %+v", e)
	}
	o.MinJudges = 3
	o.ReviewDisagreementThreshold = 0.8
	e, _ = evalengine.AggregateVotes([]evalengine.Vote{vote("a", 0.9, 1, 1), vote("b", 0.5, 1, 1), vote("c", 0.2, 1, 1)}, o)
	if !e.Passed || e.NeedsHumanReview {
		t.Fatalf("ensemble %+v", e)
	}
	empty, _ := evalengine.AggregateVotes(nil, evalengine.DefaultEnsembleOptions())
	if empty.Passed || !empty.NeedsHumanReview || empty.Score != 0 {
		t.Fatalf("empty %+v", empty)
	}
}

func TestEnsemble_CalibrationIsDeterministic(t *testing.T) {
	ex := []evalengine.CalibrationExample{{Score: 0.1, Label: false}, {Score: 0.4, Label: false}, {Score: 0.7, Label: true}, {Score: 0.9, Label: true}}
	for i := 0; i < 3; i++ {
		c, err := evalengine.CalibrateThreshold(ex, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		if c.Threshold != 0.5 || c.CorrectCount != 4 || c.Accuracy != 1 || c.CalibrationType != "classification_threshold" || c.ExampleCount != 4 {
			t.Fatalf("calibration %+v", c)
		}
		ex[0], ex[3] = ex[3], ex[0] // input order must not matter
	}
	// Noisy labels: t=0.4 gets 3 of 4, as does 0.7; the lowest wins.
	c, _ := evalengine.CalibrateThreshold([]evalengine.CalibrationExample{{Score: 0.2, Label: false}, {Score: 0.4, Label: true}, {Score: 0.6, Label: false}, {Score: 0.8, Label: true}}, 0.9)
	if c.Threshold != 0.4 || c.CorrectCount != 3 {
		t.Fatalf("noisy calibration %+v", c)
	}
	cs, err := evalengine.ApplyCalibration(c, 0.45)
	if err != nil || !cs.Passed || cs.Threshold != 0.4 {
		t.Fatalf("apply %+v %v", cs, err)
	}
	big := make([]evalengine.CalibrationExample, evalengine.MaxCalibrationExamples)
	for i := range big {
		big[i] = evalengine.CalibrationExample{Score: float64(i%1000) / 1000, Label: i%1000 >= 600}
	}
	c, err = evalengine.CalibrateThreshold(big, 0.5)
	if err != nil || c.Threshold != 0.6 || c.Accuracy != 1 {
		t.Fatalf("large calibration %+v %v", c, err)
	}
}

func TestEnsemble_StrictBoundsAndDuplicates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		votes []evalengine.Vote
		opts  func(*evalengine.EnsembleOptions)
		code  string
	}{
		{"duplicate", []evalengine.Vote{vote("a", 1, 1, 1), vote("a", 0, 1, 1)}, nil, evalengine.CodeDuplicateEnsembleVote},
		{"score", []evalengine.Vote{vote("a", 1.5, 1, 1)}, nil, evalengine.CodeInvalidEnsembleVotes},
		{"zero weight", []evalengine.Vote{vote("a", 1, 0, 1)}, nil, evalengine.CodeInvalidEnsembleVotes},
		{"weight 101", []evalengine.Vote{vote("a", 1, 101, 1)}, nil, evalengine.CodeInvalidEnsembleVotes},
		{"confidence", []evalengine.Vote{vote("a", 1, 1, -0.1)}, nil, evalengine.CodeInvalidEnsembleVotes},
		{"empty id", []evalengine.Vote{vote("", 1, 1, 1)}, nil, evalengine.CodeInvalidEnsembleVotes},
		{"too many", make([]evalengine.Vote, 129), nil, evalengine.CodeInvalidEnsembleVotes},
		{"strategy", nil, func(o *evalengine.EnsembleOptions) { o.Strategy = "median" }, evalengine.CodeInvalidEnsembleOptions},
		{"min judges", nil, func(o *evalengine.EnsembleOptions) { o.MinJudges = 129 }, evalengine.CodeInvalidEnsembleOptions},
		{"threshold", nil, func(o *evalengine.EnsembleOptions) { o.Threshold = 2 }, evalengine.CodeInvalidEnsembleOptions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := evalengine.DefaultEnsembleOptions()
			if tc.opts != nil {
				tc.opts(&o)
			}
			_, err := evalengine.AggregateVotes(tc.votes, o)
			wantCode(t, err, tc.code)
		})
	}

	votes, err := evalengine.DecodeVotes([]byte(`[{"judge_id":"a","score":0.4},{"id":"b","score":1,"weight":3,"confidence":0.5}]`))
	if err != nil || votes[0].Weight != 1 || votes[0].Confidence != 1 || votes[1].JudgeID != "b" || votes[1].Weight != 3 {
		t.Fatalf("decoded %+v %v", votes, err)
	}
	_, err = evalengine.DecodeVotes([]byte(`[{"judge_id":"a","score":0.4,"model":"x"}]`))
	wantCode(t, err, evalengine.CodeInvalidEnsembleVotes)
	_, err = evalengine.DecodeVotes([]byte(`[{"judge_id":"a","score":0.4},{"judge_id":"a","score":0.5}]`))
	wantCode(t, err, evalengine.CodeDuplicateEnsembleVote)
	_, err = evalengine.CalibrateThreshold(nil, 0.5)
	wantCode(t, err, evalengine.CodeInvalidCalibration)
	_, err = evalengine.CalibrateThreshold([]evalengine.CalibrationExample{{Score: 2}}, 0.5)
	wantCode(t, err, evalengine.CodeInvalidCalibration)
}
