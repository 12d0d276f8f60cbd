package evalengine_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

func near(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.12f, want %.12f (±%g)", name, got, want, tol)
	}
}

func repeat(x float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = x
	}
	return out
}

func TestStatistics_SummaryAndConfidence(t *testing.T) {
	st, err := evalengine.Summarize([]float64{0, 0.5, 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.Count != 3 || st.Mean != 0.5 || st.Minimum != 0 || st.Maximum != 1 {
		t.Fatalf("summary %+v", st)
	}
	near(t, "sample σ", st.StandardDeviation, 0.5, 1e-12) // population σ would be 0.408
	one, _ := evalengine.Summarize([]float64{0.7})
	if one.StandardDeviation != 0 {
		t.Fatalf("σ of one sample = %v", one.StandardDeviation)
	}

	ci, err := evalengine.ConfidenceInterval([]float64{0, 0.5, 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "margin", ci.Margin, 0.565793, 1e-6)
	if ci.ConfidenceLevel != 0.95 || ci.Lower != 0 || ci.Upper != 1 || ci.Lower > 0.5 || ci.Upper < 0.5 {
		t.Fatalf("interval %+v", ci)
	}
}

func TestStatistics_WilsonInterval(t *testing.T) {
	for _, tc := range []struct {
		passed, total int
		level         float64
		lower, upper  float64
	}{
		{80, 100, 0.95, 0.711170834, 0.866633067},
		{0, 10, 0.95, 0, 0.277532800},
		{10, 10, 0.95, 0.722467200, 1.0},
		{5, 10, 0.90, 0.269271821, 0.730728179},
	} {
		iv, err := evalengine.WilsonInterval(tc.passed, tc.total, tc.level)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "lower", iv.Lower, tc.lower, 1e-9)
		near(t, "upper", iv.Upper, tc.upper, 1e-9)
		if iv.Passed != tc.passed || iv.Total != tc.total || iv.ConfidenceLevel != tc.level {
			t.Fatalf("interval %+v", iv)
		}
	}
	iv, _ := evalengine.WilsonInterval(80, 100, 0)
	if iv.Rate != 0.8 || !(iv.Lower < 0.8 && 0.8 < iv.Upper) {
		t.Fatalf("80/100: %+v", iv)
	}
	for _, bad := range [][2]int{{1, 0}, {-1, 10}, {11, 10}, {0, 100_001}} {
		if _, err := evalengine.WilsonInterval(bad[0], bad[1], 0.95); evalengine.ErrorCode(err) != evalengine.CodeInvalidPassRateSamples {
			t.Errorf("%v: err %v", bad, err)
		}
	}
}

func TestStatistics_LongitudinalGate(t *testing.T) {
	t.Run("vector", func(t *testing.T) {
		g, err := evalengine.LongitudinalGate([]float64{1, .9, .8, 1}, []float64{.7, .8, .6, .9}, evalengine.DefaultGateOptions())
		if err != nil {
			t.Fatal(err)
		}
		near(t, "drop", g.MeanDrop, 0.175, 1e-12)
		near(t, "margin", g.MeanDropMargin, 0.157510, 1e-6)
		near(t, "lower", g.MeanDropLowerBound, 0.017490, 1e-6)
		if g.ReportType != "longitudinal_regression" || !g.Regression || g.Passed {
			t.Fatalf("gate %+v", g)
		}
	})
	t.Run("large drop regresses", func(t *testing.T) {
		opts := evalengine.DefaultGateOptions()
		opts.MaxMeanDrop = 0.1
		g, err := evalengine.LongitudinalGate(repeat(1, 30), repeat(0.5, 30), opts)
		if err != nil || !g.Regression || g.Passed {
			t.Fatalf("gate %+v, %v", g, err)
		}
	})
	t.Run("small drop within tolerance passes", func(t *testing.T) {
		opts := evalengine.DefaultGateOptions()
		opts.MaxMeanDrop = 0.1
		g, err := evalengine.LongitudinalGate(repeat(0.8, 30), repeat(0.75, 30), opts)
		if err != nil || g.Regression || !g.Passed {
			t.Fatalf("gate %+v, %v", g, err)
		}
	})
	t.Run("significance off compares the observed drop", func(t *testing.T) {
		opts := evalengine.GateOptions{ConfidenceLevel: 0.99, MaxMeanDrop: 0.1}
		g, err := evalengine.LongitudinalGate([]float64{1, 0}, []float64{0.4, 0.2}, opts)
		if err != nil || !g.Regression || g.MeanDropLowerBound != 0 {
			t.Fatalf("gate %+v, %v", g, err)
		}
	})
	t.Run("document keys", func(t *testing.T) {
		g, _ := evalengine.LongitudinalGate([]float64{1}, []float64{1}, evalengine.DefaultGateOptions())
		data, _ := json.Marshal(g)
		for _, k := range []string{"report_type", "confidence_level", "baseline", "current", "mean_drop", "mean_drop_lower_bound", "mean_drop_margin", "max_mean_drop", "require_significance", "regression", "passed"} {
			if !strings.Contains(string(data), `"`+k+`"`) {
				t.Errorf("missing %s in %s", k, data)
			}
		}
	})
}

func TestStatistics_BoundedValidation(t *testing.T) {
	_, err := evalengine.Summarize([]float64{0.5, 2.0})
	if evalengine.ErrorCode(err) != evalengine.CodeInvalidEvaluationSample || !strings.Contains(err.Error(), "(2)") {
		t.Fatalf("2.0: %v", err)
	}
	if _, err := evalengine.Summarize([]float64{math.NaN()}); evalengine.ErrorCode(err) != evalengine.CodeInvalidEvaluationSample {
		t.Fatalf("NaN: %v", err)
	}
	if _, err := evalengine.ConfidenceInterval([]float64{0.5}, 0.975); evalengine.ErrorCode(err) != evalengine.CodeInvalidConfidenceLevel {
		t.Fatalf("0.975: %v", err)
	}
	if _, err := evalengine.WilsonInterval(1, 2, 0.975); evalengine.ErrorCode(err) != evalengine.CodeInvalidConfidenceLevel {
		t.Fatalf("0.975: %v", err)
	}
	if _, err := evalengine.Summarize(make([]float64, evalengine.MaxStatisticsSamples+1)); evalengine.ErrorCode(err) != evalengine.CodeInvalidEvaluationStatistic {
		t.Fatalf("too many: %v", err)
	}
	if _, err := evalengine.ConfidenceInterval(nil, 0.95); evalengine.ErrorCode(err) != evalengine.CodeInvalidEvaluationStatistic {
		t.Fatalf("empty: %v", err)
	}
	if _, err := evalengine.LongitudinalGate([]float64{1}, nil, evalengine.DefaultGateOptions()); evalengine.ErrorCode(err) != evalengine.CodeInvalidEvaluationStatistic {
		t.Fatalf("empty current: %v", err)
	}
	if _, err := evalengine.LongitudinalGate([]float64{1}, []float64{1}, evalengine.GateOptions{MaxMeanDrop: 1.5}); evalengine.ErrorCode(err) != evalengine.CodeInvalidEvaluationStatistic {
		t.Fatalf("max drop: %v", err)
	}
}

func TestResult_PassRateIntervalIsDecodeValidated(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"a","input":"x","expected":"x"},{"id":"b","input":"y","expected":"z"}]}`)
	res, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &fakeAdapter{echo: true}, Metrics: evalengine.DefaultCriteria(), Options: opts(nil)})
	if err != nil {
		t.Fatal(err)
	}
	iv := res.PassRateInterval
	want, _ := evalengine.WilsonInterval(1, 2, 0.95)
	if iv != want {
		t.Fatalf("interval %+v, want %+v", iv, want)
	}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evalengine.DecodeResult(data); err != nil {
		t.Fatalf("round trip: %v", err)
	}
	var doc map[string]any
	_ = json.Unmarshal(data, &doc)
	doc["pass_rate_interval"].(map[string]any)["upper"] = 0.99
	forged, _ := json.Marshal(doc)
	if _, err := evalengine.DecodeResult(forged); evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalResult {
		t.Fatalf("forged upper: %v", err)
	}
	delete(doc, "pass_rate_interval")
	missing, _ := json.Marshal(doc)
	if _, err := evalengine.DecodeResult(missing); evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalResult {
		t.Fatalf("missing interval: %v", err)
	}
}
