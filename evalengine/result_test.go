package evalengine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixedResult runs a deterministic two-case set (one passing, one failing)
// and zeroes the timings, so its renderings are stable golden files.
func fixedResult(t *testing.T, failing bool) *evalengine.Result {
	t.Helper()
	set := mustSet(t, `{"id":"golden <&>","version":"1","metadata":{"suite":"core"},"cases":[
		{"id":"pass \"one\"","expected_trajectory":["lookup"],"turns":[{"input":"q1","expected_response":"a1"}]},
		{"id":"fail|two","expected_trajectory":[],"input":"q2","expected":"a2"}]}`)
	answer := "a2"
	if failing {
		answer = "wrong"
	}
	a := &fakeAdapter{script: map[string]evalengine.TurnOutput{
		"q1": {Output: "a1", Trajectory: []evalengine.ToolStep{{Tool: "lookup", CallID: "k1", Args: map[string]any{"q": "x"}}}},
		"q2": {Output: answer},
	}}
	if failing {
		// A wrong tool call as well, so the reports show a trajectory
		// mismatch next to the response mismatch.
		a.script["q2"] = evalengine.TurnOutput{Output: answer, Trajectory: []evalengine.ToolStep{{Tool: "search", CallID: "k2", Args: map[string]any{"q": "y", "api_key": "sk-secret"}}}}
	}
	metrics := []evalengine.Metric{
		mustCriterion(t, "response", evalengine.CriterionExactResponse, 1, nil),
		mustCriterion(t, "trajectory", evalengine.CriterionToolTrajectory, 1, nil),
	}
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: a, Metrics: metrics,
		Options: opts(func(o *evalengine.Options) {
			o.Samples = 2
			o.ResultMetadata = map[string]any{"build": "b1", "token": "x"}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := stripTimings(t, r)
	fixed, err := evalengine.DecodeResult([]byte(out))
	if err != nil {
		t.Fatalf("decode stripped result: %v", err)
	}
	return fixed
}

func TestResult_RoundTripIsExact(t *testing.T) {
	r := fixedResult(t, true)
	if _, ok := r.Metadata["token"]; ok {
		t.Fatal("result metadata secret not pruned")
	}
	first, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := evalengine.DecodeResult(first)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := json.Marshal(back)
	if !bytes.Equal(first, second) {
		t.Fatalf("round trip changed the result:\n%s\n%s", first, second)
	}
}

func TestResult_StrictCountValidation(t *testing.T) {
	r := fixedResult(t, true)
	good, _ := json.Marshal(r)
	forge := func(path []any, v any) []byte {
		var doc map[string]any
		_ = json.Unmarshal(good, &doc)
		var cur any = doc
		for i, p := range path {
			last := i == len(path)-1
			switch k := p.(type) {
			case string:
				m := cur.(map[string]any)
				if last {
					m[k] = v
				}
				cur = m[k]
			case int:
				l := cur.([]any)
				if last {
					l[k] = v
				}
				cur = l[k]
			}
		}
		out, _ := json.Marshal(doc)
		return out
	}
	cases := map[string][]byte{
		"case_count":           forge([]any{"case_count"}, 3),
		"passed":               forge([]any{"passed"}, true),
		"pass_rate":            forge([]any{"pass_rate"}, 1.0),
		"error_case_count":     forge([]any{"error_case_count"}, 1),
		"case passed":          forge([]any{"cases", 1, "passed"}, true),
		"case status":          forge([]any{"cases", 1, "status"}, "passed"),
		"sample passed":        forge([]any{"cases", 1, "samples", 0, "passed"}, true),
		"metric score":         forge([]any{"cases", 1, "samples", 0, "criteria", 0, "score"}, 1.0),
		"summary average":      forge([]any{"metrics", 0, "average_score"}, 1.0),
		"statistics":           forge([]any{"cases", 0, "sample_statistics", "mean"}, 0.5),
		"sample id":            forge([]any{"cases", 0, "samples", 0, "sample_id"}, "sample-000000000000000000000000"),
		"unknown key":          forge([]any{"extra"}, 1),
		"case trajectory":      forge([]any{"cases", 0, "trajectory"}, []any{}),
		"sample pass rate":     forge([]any{"cases", 1, "sample_pass_rate"}, 1.0),
		"turn passed":          forge([]any{"cases", 1, "samples", 0, "turns", 0, "passed"}, false),
		"metric threshold":     forge([]any{"cases", 1, "samples", 0, "criteria", 0, "threshold"}, 0.0),
		"missing sample_count": forge([]any{"sample_count"}, nil),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := evalengine.DecodeResult(doc)
			wantCode(t, err, evalengine.CodeInvalidEvalResult)
		})
	}
	t.Run("unsupported version", func(t *testing.T) {
		_, err := evalengine.DecodeResult(forge([]any{"result_schema_version"}, 3))
		wantCode(t, err, evalengine.CodeUnsupportedResultVersion)
	})
}

func TestResult_V1Readable(t *testing.T) {
	doc := `{"average_score":1,"cases":[{"id":"a","x":1}],"eval_set_id":"old","eval_set_version":"1","passed":true,"result_schema_version":1}`
	r, err := evalengine.DecodeResult([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if r.ResultSchemaVersion != 1 || !r.Passed || r.Legacy() == nil {
		t.Fatalf("%+v", r)
	}
	out, err := evalengine.Render(r, evalengine.FormatJSON, evalengine.ExportOptions{})
	if err != nil || strings.TrimSpace(string(out)) != doc {
		t.Fatalf("v1 result changed: %s %v", out, err)
	}
	md, err := evalengine.Render(r, evalengine.FormatMarkdown, evalengine.ExportOptions{})
	if err != nil || !strings.Contains(string(md), "Legacy result") {
		t.Fatalf("v1 markdown: %s %v", md, err)
	}
	_, err = evalengine.Render(r, evalengine.FormatJUnit, evalengine.ExportOptions{})
	wantCode(t, err, evalengine.CodeInvalidExportResult)
}

func TestCompare_BaselineRegression(t *testing.T) {
	base := fixedResult(t, false)
	cur := fixedResult(t, true)
	cmp, err := evalengine.Compare(base, cur, evalengine.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Passed || cmp.PassRateDrop != 0.5 || cmp.BaselinePassRate != 1 || cmp.CurrentPassRate != 0.5 {
		t.Fatalf("comparison: %+v", cmp)
	}
	var regressed []string
	for _, d := range cmp.CaseDiffs {
		if d.Regression {
			regressed = append(regressed, d.CaseID+":"+d.Reason)
		}
	}
	if strings.Join(regressed, ",") != "fail|two:case_no_longer_passes" {
		t.Fatalf("case diffs: %+v", cmp.CaseDiffs)
	}
	if cmp.MetricDiffs[0].MetricID != "response" || cmp.MetricDiffs[0].Reason != "score_drop" {
		t.Fatalf("metric diffs: %+v", cmp.MetricDiffs)
	}

	t.Run("tolerances allow the drop but not the case regression", func(t *testing.T) {
		cmp, err := evalengine.Compare(base, cur, evalengine.CompareOptions{MaxPassRateDrop: 0.5, MetricTolerances: map[string]float64{"response": 0.5}})
		if err != nil {
			t.Fatal(err)
		}
		if cmp.Passed || cmp.MetricDiffs[0].Regression {
			t.Fatalf("%+v", cmp)
		}
	})
	t.Run("failing against an equally failing baseline passes", func(t *testing.T) {
		cmp, err := evalengine.Compare(cur, cur, evalengine.CompareOptions{})
		if err != nil || !cmp.Passed {
			t.Fatalf("%+v %v", cmp, err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		_, err := evalengine.Compare(base, cur, evalengine.CompareOptions{MaxPassRateDrop: 2})
		wantCode(t, err, evalengine.CodeInvalidComparisonOptions)
		other := *cur
		other.EvalSetID = "other"
		_, err = evalengine.Compare(base, &other, evalengine.CompareOptions{})
		wantCode(t, err, evalengine.CodeInvalidCurrentResult) // the id is inside every sample id
		forged := *base
		forged.CaseCount = 7
		_, err = evalengine.Compare(&forged, cur, evalengine.CompareOptions{})
		wantCode(t, err, evalengine.CodeInvalidBaseline)
	})
	t.Run("document round trip and forgery", func(t *testing.T) {
		data, _ := json.Marshal(cmp)
		back, err := evalengine.DecodeComparison(data)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(back)
		if !bytes.Equal(data, again) {
			t.Fatal("comparison round trip changed")
		}
		forged := strings.Replace(string(data), `"passed":false`, `"passed":true`, 1)
		_, err = evalengine.DecodeComparison([]byte(forged))
		wantCode(t, err, evalengine.CodeInvalidComparison)
		extra := strings.Replace(string(data), `{"report_schema_version"`, `{"extra":1,"report_schema_version"`, 1)
		_, err = evalengine.DecodeComparison([]byte(extra))
		wantCode(t, err, evalengine.CodeInvalidComparison)
	})
}

func TestCompare_MissingMetricAndCase(t *testing.T) {
	base := fixedResult(t, false)
	set := mustSet(t, `{"id":"golden <&>","version":"1","cases":[{"id":"pass \"one\"","input":"q1","expected":"a1"}]}`)
	cur, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: &fakeAdapter{echo: true}, Metrics: evalengine.DefaultCriteria(), Options: opts(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := evalengine.Compare(base, cur, evalengine.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, d := range cmp.MetricDiffs {
		reasons[d.MetricID+":"+d.Reason] = true
	}
	for _, d := range cmp.CaseDiffs {
		reasons[d.CaseID+":"+d.Reason+":"+d.CurrentStatus] = true
	}
	for _, want := range []string{"trajectory:missing_current_metric", "fail|two:missing_current_case:missing"} {
		if !reasons[want] {
			t.Errorf("missing %s in %v", want, sortedKeys(reasons))
		}
	}
}

func TestRender_GoldenAndDeterministic(t *testing.T) {
	res := fixedResult(t, true)
	base := fixedResult(t, false)
	cmp, err := evalengine.Compare(base, res, evalengine.CompareOptions{MetricTolerances: map[string]float64{"trajectory": 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range evalengine.Formats() {
		for _, v := range []struct {
			name  string
			value any
		}{{"result", res}, {"comparison", cmp}} {
			if v.name == "comparison" && format != evalengine.FormatJSON && format != evalengine.FormatMarkdown && format != evalengine.FormatHTML {
				_, err := evalengine.Render(v.value, format, evalengine.ExportOptions{})
				wantCode(t, err, evalengine.CodeInvalidExportResult)
				continue
			}
			t.Run(format+"/"+v.name, func(t *testing.T) {
				out, err := evalengine.Render(v.value, format, evalengine.ExportOptions{})
				if err != nil {
					t.Fatal(err)
				}
				again, _ := evalengine.Render(v.value, format, evalengine.ExportOptions{})
				if !bytes.Equal(out, again) {
					t.Fatal("rendering is not deterministic")
				}
				if !bytes.HasSuffix(out, []byte("\n")) {
					t.Fatal("output must end with a newline")
				}
				if format != evalengine.FormatJSON && format != evalengine.FormatHTML && format != evalengine.FormatJSONL && bytes.Contains(out, []byte("q1")) {
					t.Fatal("content-minimal export contains a prompt")
				}
				golden := filepath.Join("testdata", "golden", v.name+"."+format)
				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, out, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to create)", err)
				}
				if !bytes.Equal(out, want) {
					t.Fatalf("%s differs from the golden file:\n%s", golden, out)
				}
				if c, ok := v.value.(*evalengine.Comparison); ok && format != evalengine.FormatHTML {
					// Written a case row at a time: the same bytes.
					var w bytes.Buffer
					if n, err := evalengine.WriteComparison(&w, c, format, evalengine.ExportOptions{}); err != nil || n != int64(w.Len()) || !bytes.Equal(w.Bytes(), want) {
						t.Fatalf("WriteComparison: %d bytes, %v; differs from %s:\n%s", n, err, golden, w.Bytes())
					}
				}
			})
		}
	}
}

func TestRender_BoundsAndOptions(t *testing.T) {
	res := fixedResult(t, true)
	_, err := evalengine.Render(res, evalengine.FormatJSON, evalengine.ExportOptions{MaxBytes: 10})
	wantCode(t, err, evalengine.CodeExportByteLimitExceeded)
	_, err = evalengine.Render(res, evalengine.FormatJSON, evalengine.ExportOptions{MaxBytes: 16<<20 + 1})
	wantCode(t, err, evalengine.CodeInvalidExportOptions)
	_, err = evalengine.Render(res, "pdf", evalengine.ExportOptions{})
	wantCode(t, err, evalengine.CodeInvalidReportFormat)
	_, err = evalengine.Render(res, evalengine.FormatJUnit, evalengine.ExportOptions{SuiteName: strings.Repeat("s", 257)})
	wantCode(t, err, evalengine.CodeInvalidSuiteName)
	out, err := evalengine.Render(res, evalengine.FormatJUnit, evalengine.ExportOptions{SuiteName: `a<b>&"c'`})
	if err != nil || !strings.Contains(string(out), `name="a&lt;b&gt;&amp;&quot;c&apos;"`) {
		t.Fatalf("suite escaping: %s %v", out, err)
	}
	forged := *res
	forged.PassedCaseCount = 2
	_, err = evalengine.Render(&forged, evalengine.FormatMarkdown, evalengine.ExportOptions{})
	wantCode(t, err, evalengine.CodeInvalidExportResult)
}

// TestResult_LargeRunRendersAndDecodes checks that a result of thousands of
// samples (past what the contract's input limits admit: about 1,500
// samples) renders in every format and reads back strictly, as the CLI's
// --baseline and `adk eval report` need.
func TestResult_LargeRunRendersAndDecodes(t *testing.T) {
	set := benchSet(t)
	metrics := []evalengine.Metric{
		mustCriterion(t, "response", evalengine.CriterionExactResponse, 1, nil),
		mustCriterion(t, "trajectory", evalengine.CriterionToolTrajectory, 1, nil),
	}
	o := evalengine.DefaultOptions()
	o.Samples = 30 // 3,000 samples
	o.Concurrency = 8
	o.CaptureEvents = false
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: zeroAdapter{}, Metrics: metrics, Options: o})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{evalengine.FormatJSON, evalengine.FormatMarkdown, evalengine.FormatJUnit} {
		if _, err := evalengine.Render(r, f, evalengine.ExportOptions{}); err != nil {
			t.Fatalf("render %s: %v", f, err)
		}
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := evalengine.DecodeResult(data)
	if err != nil {
		t.Fatalf("decode a %d-byte result: %v", len(data), err)
	}
	if back.CaseCount != 100 || back.SampleCount != 30 {
		t.Fatalf("decoded %d cases × %d samples", back.CaseCount, back.SampleCount)
	}
	cmp, err := evalengine.Compare(back, r, evalengine.CompareOptions{})
	if err != nil || !cmp.Passed {
		t.Fatalf("compare with itself: %+v %v", cmp, err)
	}
}
