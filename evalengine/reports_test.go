package evalengine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// passResult runs a set of n single-turn cases of which the first k pass.
func passResult(t *testing.T, setID, version string, n, k int) *evalengine.Result {
	t.Helper()
	var cases []string
	for i := 0; i < n; i++ {
		exp := fmt.Sprintf("q%d", i)
		if i >= k {
			exp = "other"
		}
		cases = append(cases, fmt.Sprintf(`{"id":"c%02d","input":"q%d","expected":%q}`, i, i, exp))
	}
	set := mustSet(t, fmt.Sprintf(`{"id":%q,"version":%q,"cases":[%s]}`, setID, version, strings.Join(cases, ",")))
	o := opts(func(o *evalengine.Options) { o.PassRateThreshold = 0 })
	res, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &fakeAdapter{echo: true}, Metrics: evalengine.DefaultCriteria(), Options: o})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestCompareReport_IntervalsAnswerTheQuestion(t *testing.T) {
	base := passResult(t, "suite", "v1", 20, 16) // 0.80
	cur := passResult(t, "suite", "v2", 20, 15)  // 0.75
	md, cmp, err := evalengine.CompareReport(base, cur, evalengine.CompareOptions{MaxPassRateDrop: 0.1}, evalengine.FormatMarkdown, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The comparison is strict (case c15 no longer passes) while the
	// intervals say the rates are statistically indistinguishable.
	if cmp.Passed {
		t.Fatalf("comparison %+v", cmp)
	}
	plain, _ := evalengine.Render(cmp, evalengine.FormatMarkdown, evalengine.ExportOptions{})
	if !bytes.HasPrefix(md, plain) {
		t.Fatal("the comparison markdown must start with the canonical rendering")
	}
	text := string(md)
	for _, want := range []string{"## Pass-rate intervals", "| baseline | v1 | 0.8000 | 16/20 | 0.5840–0.9193 |", "| current | v2 | 0.7500 | 15/20 |", "not significant"} {
		if !strings.Contains(text, want) {
			t.Errorf("markdown lacks %q:\n%s", want, text)
		}
	}
	js, _, err := evalengine.CompareReport(base, cur, evalengine.CompareOptions{}, evalengine.FormatJSON, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	canon, _ := evalengine.Render(cmp2(t, base, cur), evalengine.FormatJSON, evalengine.ExportOptions{})
	if !bytes.Equal(js, canon) {
		t.Fatalf("json is not the canonical comparison:\n%s\n%s", js, canon)
	}
	far := passResult(t, "suite", "v3", 20, 2)
	md, _, _ = evalengine.CompareReport(base, far, evalengine.CompareOptions{}, evalengine.FormatMarkdown, evalengine.ExportOptions{})
	if !strings.Contains(string(md), "is significant") {
		t.Fatalf("0.80 vs 0.10 must be significant:\n%s", md)
	}
	_, _, err = evalengine.CompareReport(base, cur, evalengine.CompareOptions{}, evalengine.FormatJUnit, evalengine.ExportOptions{})
	wantCode(t, err, evalengine.CodeInvalidReportFormat)
	_, _, err = evalengine.CompareReport(base, passResult(t, "other", "v1", 1, 1), evalengine.CompareOptions{}, evalengine.FormatJSON, evalengine.ExportOptions{})
	wantCode(t, err, evalengine.CodeEvalSetMismatch)
}

func cmp2(t *testing.T, b, c *evalengine.Result) *evalengine.Comparison {
	t.Helper()
	cmp, err := evalengine.Compare(b, c, evalengine.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cmp
}

func TestStatsReport_IntervalsAndLongitudinalGate(t *testing.T) {
	r1 := passResult(t, "suite", "v1", 30, 30)
	r2 := passResult(t, "suite", "v2", 30, 29)
	r3 := passResult(t, "suite", "v3", 30, 28)

	out, doc, err := evalengine.StatsReport([]*evalengine.Result{r1, r2, r3}, evalengine.DefaultStatsOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !doc.Passed || doc.Gate == nil || doc.Gate.BaselineResults != 2 || doc.Gate.PassRate.Baseline.Count != 60 || len(doc.Results) != 3 {
		t.Fatalf("doc %+v", doc)
	}
	text := string(out)
	for _, want := range []string{"Evaluation statistics (95% confidence)", "pass rate 0.9333 (28/30 cases, 95% Wilson CI", "metric response: mean", "Longitudinal gate: result 3 vs results 1-2 pooled", "Status: PASS"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}

	bad := passResult(t, "suite", "v4", 30, 15)
	o := evalengine.DefaultStatsOptions()
	o.Format = evalengine.FormatMarkdown
	o.Gate.MaxMeanDrop = 0.1
	md, doc, err := evalengine.StatsReport([]*evalengine.Result{r1, bad}, o)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Passed || len(doc.Gate.Regressions) != 2 || doc.Gate.Regressions[0] != "pass_rate" {
		t.Fatalf("regression not gated: %+v", doc.Gate)
	}
	if !strings.Contains(string(md), "**Status: FAIL**") || !strings.Contains(string(md), "REGRESSION") {
		t.Fatalf("markdown:\n%s", md)
	}

	o.Format = evalengine.FormatJSON
	js, _, err := evalengine.StatsReport([]*evalengine.Result{r1, bad}, o)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(js, &generic); err != nil || generic["report_type"] != "evaluation_statistics" || generic["passed"] != false {
		t.Fatalf("json %s (%v)", js, err)
	}
	again, _, _ := evalengine.StatsReport([]*evalengine.Result{r1, bad}, o)
	if !bytes.Equal(js, again) {
		t.Fatal("stats json is not deterministic")
	}

	single, doc, err := evalengine.StatsReport([]*evalengine.Result{r1}, evalengine.DefaultStatsOptions())
	if err != nil || doc.Gate != nil || !doc.Passed || strings.Contains(string(single), "Longitudinal") {
		t.Fatalf("single result: %v %+v", err, doc)
	}

	_, _, err = evalengine.StatsReport(nil, evalengine.DefaultStatsOptions())
	wantCode(t, err, evalengine.CodeInvalidEvaluationStatistic)
	_, _, err = evalengine.StatsReport([]*evalengine.Result{r1, passResult(t, "other", "v1", 1, 1)}, evalengine.DefaultStatsOptions())
	wantCode(t, err, evalengine.CodeEvalSetMismatch)
	o = evalengine.DefaultStatsOptions()
	o.Gate.ConfidenceLevel = 0.975
	_, _, err = evalengine.StatsReport([]*evalengine.Result{r1}, o)
	wantCode(t, err, evalengine.CodeInvalidConfidenceLevel)
	o = evalengine.DefaultStatsOptions()
	o.Format = "sarif"
	_, _, err = evalengine.StatsReport([]*evalengine.Result{r1}, o)
	wantCode(t, err, evalengine.CodeInvalidReportFormat)
	forged := *r1
	forged.PassedCaseCount = 3
	_, _, err = evalengine.StatsReport([]*evalengine.Result{&forged}, evalengine.DefaultStatsOptions())
	wantCode(t, err, evalengine.CodeInvalidEvalResult)
}
