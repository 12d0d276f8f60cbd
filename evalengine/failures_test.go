package evalengine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// runFailures runs set with a and returns the extracted reasons.
func runFailures(t *testing.T, set string, a *fakeAdapter, metrics []evalengine.Metric, mod func(*evalengine.Options)) []evalengine.CaseFailure {
	t.Helper()
	r, err := evalengine.Run(context.Background(), mustSet(t, set), evalengine.RunConfig{Adapter: a, Metrics: metrics, Options: opts(mod)})
	if err != nil {
		t.Fatal(err)
	}
	return evalengine.Failures(r)
}

func TestFailures_TrajectoryMismatchNamesExpectedAndActualCall(t *testing.T) {
	a := &fakeAdapter{script: map[string]evalengine.TurnOutput{
		"q": {Output: "ok", Trajectory: []evalengine.ToolStep{
			{Tool: "lookup", CallID: "1", Args: map[string]any{"q": "x"}},
			{Tool: "search", CallID: "2", Args: map[string]any{"q": "y", "api_key": "sk-live-secret"}},
		}},
	}}
	set := `{"id":"s","version":"1","cases":[{"id":"c","input":"q","expected_trajectory":[
		{"tool":"lookup","args":{"q":"x"}},{"tool":"fetch","args":{"url":"u","password":"hunter22"}}]}]}`
	metrics := []evalengine.Metric{mustCriterion(t, "traj", evalengine.CriterionToolTrajectory, 1, nil)}
	for _, capture := range []bool{false, true} {
		fs := runFailures(t, set, a, metrics, func(o *evalengine.Options) { o.CaptureToolContent = capture })
		if len(fs) != 1 || len(fs[0].Samples) != 1 {
			t.Fatalf("capture=%v: failures %+v", capture, fs)
		}
		tm := fs[0].Samples[0].Trajectory
		if tm == nil || tm.Index != 1 || tm.Expected != `fetch {"url":"u"}` {
			t.Fatalf("capture=%v: mismatch %+v", capture, tm)
		}
		wantActual := "search"
		if capture {
			wantActual = `search {"q":"y"}`
		}
		if tm.Actual != wantActual {
			t.Fatalf("capture=%v: actual %q, want %q", capture, tm.Actual, wantActual)
		}
		for _, f := range []string{fs[0].Details(), fs[0].Reason} {
			if strings.Contains(f, "hunter22") || strings.Contains(f, "sk-live") {
				t.Fatalf("secret in reasons: %s", f)
			}
		}
	}
}

func TestFailures_ErrorSampleCarriesTypedReason(t *testing.T) {
	a := &fakeAdapter{failTurn: errors.New("boom")}
	fs := runFailures(t, `{"id":"s","version":"1","cases":[{"id":"c","input":"q","expected":"a"}]}`, a, evalengine.DefaultCriteria(), nil)
	if len(fs) != 1 || fs[0].Status != evalengine.SampleStatusError {
		t.Fatalf("failures %+v", fs)
	}
	if e := fs[0].Samples[0].Error; e == "" || !strings.Contains(fs[0].Reason, e) {
		t.Fatalf("reason %q does not carry the sample error %q", fs[0].Reason, e)
	}
}

func TestFailures_ExcerptsAreBoundedAndSamplesCapped(t *testing.T) {
	long := strings.Repeat("é", 3*evalengine.MaxExcerptRunes)
	a := &fakeAdapter{script: map[string]evalengine.TurnOutput{"q": {Output: long}}}
	fs := runFailures(t, `{"id":"s","version":"1","cases":[{"id":"c","input":"q","expected":"short"}]}`, a,
		[]evalengine.Metric{mustCriterion(t, "r", evalengine.CriterionExactResponse, 1, nil)},
		func(o *evalengine.Options) { o.Samples = evalengine.MaxFailureSamples + 2 })
	f := fs[0]
	if len(f.Samples) != evalengine.MaxFailureSamples || f.OmittedSamples != 2 {
		t.Fatalf("samples %d omitted %d", len(f.Samples), f.OmittedSamples)
	}
	act := f.Samples[0].Response.Actual
	if n := len([]rune(act)); n > evalengine.MaxExcerptRunes+30 || !strings.Contains(act, "bytes)") {
		t.Fatalf("excerpt not bounded (%d runes): %q", n, act)
	}
	if f.Samples[0].Response.Expected != `"short"` {
		t.Fatalf("expected excerpt %q", f.Samples[0].Response.Expected)
	}
}
