package evalengine_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestSampleID_ContractVector(t *testing.T) {
	if got := evalengine.SampleID("single", "1", "case", 0); got != "sample-f4a3bae4e30d84defef89b91" {
		t.Fatalf("index 0: %s", got)
	}
	if got := evalengine.SampleID("single", "1", "case", 1); got != "sample-ac664b37bedf9aad79107a66" {
		t.Fatalf("index 1: %s", got)
	}
}

func TestOptions_Bounds(t *testing.T) {
	bad := map[string]func(*evalengine.Options){
		"concurrency":                func(o *evalengine.Options) { o.Concurrency = 257 },
		"sample_concurrency":         func(o *evalengine.Options) { o.SampleConcurrency = 257 },
		"timeout_ms":                 func(o *evalengine.Options) { o.TimeoutMS = 3_600_001 },
		"case_timeout_ms":            func(o *evalengine.Options) { o.CaseTimeoutMS = 0 },
		"sample_count":               func(o *evalengine.Options) { o.Samples = 101 },
		"pass_rate_threshold":        func(o *evalengine.Options) { o.PassRateThreshold = 1.1 },
		"sample_pass_rate_threshold": func(o *evalengine.Options) { o.SamplePassRateThreshold = -0.1 },
		"min_successful_samples":     func(o *evalengine.Options) { o.Samples = 2; o.MinSuccessfulSamples = 3 },
		"empty_criteria":             func(o *evalengine.Options) { o.EmptyCriteria = "ignore" },
		"max_report_bytes":           func(o *evalengine.Options) { o.MaxReportBytes = 16<<20 + 1 },
	}
	for name, mod := range bad {
		o := evalengine.DefaultOptions()
		mod(&o)
		_, err := o.Normalize()
		wantCode(t, err, evalengine.CodeInvalidEvalOptions)
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error does not name the option: %v", name, err)
		}
	}
	o, err := evalengine.DefaultOptions().Normalize()
	if err != nil || o.SampleConcurrency != 1 || o.MinSuccessfulSamples != 1 || !o.CaptureEvents || o.CaptureToolContent {
		t.Fatalf("defaults: %+v %v", o, err)
	}
}

func TestRun_SampleLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"id":"s","version":"1","cases":[`)
	for i := 0; i < evalengine.MaxTotalSamples/100+1; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"id":"c` + itoa(i) + `","input":"x"}`)
	}
	b.WriteString(`]}`)
	set := mustSet(t, b.String())
	_, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: &fakeAdapter{}, Metrics: evalengine.DefaultCriteria(),
		Options: opts(func(o *evalengine.Options) { o.Samples = 100 }),
	})
	wantCode(t, err, evalengine.CodeSampleLimitExceeded)
	if !strings.Contains(err.Error(), "1000100") {
		t.Fatalf("error should carry the total: %v", err)
	}
}

func TestRun_EmptyCriteriaRequiresExplicitPolicy(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"a","input":"x"}]}`)
	_, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &fakeAdapter{}, Options: opts(nil)})
	wantCode(t, err, evalengine.CodeEmptyCriteria)
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: &fakeAdapter{}, Options: opts(func(o *evalengine.Options) { o.EmptyCriteria = evalengine.EmptyCriteriaPass }),
	})
	if err != nil || !r.Passed || r.PassRate != 1 {
		t.Fatalf("empty criteria with pass: %+v %v", r, err)
	}
}

const fullCaseSet = `{"id":"weather","version":"7","metadata":{"suite":"core"},"cases":[{"id":"pune","metadata":{"owner":"a","password":"p"},
  "expected_trajectory":[{"tool":"weather","args":{"city":"Pune"}}],"expected_final_response":"Sunny",
  "turns":[{"id":"ask","input":"Weather in Pune?"},{"id":"thanks","input":"thanks"}]}]}`

func weatherAdapter() *fakeAdapter {
	return &fakeAdapter{script: map[string]evalengine.TurnOutput{
		"Weather in Pune?": {
			Output:     "checking",
			Trajectory: []evalengine.ToolStep{{Kind: evalengine.KindToolCall, Tool: "weather", CallID: "c1", Args: map[string]any{"city": "Pune", "api_token": "t"}}, {Kind: evalengine.KindToolResponse, Tool: "weather", CallID: "c1", Result: map[string]any{"sky": "sun"}}},
			Events:     []any{map[string]any{"author": "agent", "secret": "x"}},
			Metadata:   map[string]any{"usage": map[string]any{"input_tokens": 3}, "authorization": "Bearer z"},
		},
		"thanks": {Output: "Sunny"},
	}}
}

func TestRun_FullCaseBuiltinsAndRepeatedSamples(t *testing.T) {
	set := mustSet(t, fullCaseSet)
	metrics := []evalengine.Metric{
		mustCriterion(t, "response", evalengine.CriterionExactResponse, 1, nil),
		mustCriterion(t, "trajectory", evalengine.CriterionToolTrajectory, 1, map[string]any{"args": "subset"}),
	}
	run := func() (*evalengine.Result, *fakeAdapter) {
		a := weatherAdapter()
		r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
			Adapter: a, Metrics: metrics,
			Options: opts(func(o *evalengine.Options) { o.Samples = 3; o.Concurrency = 2 }),
		})
		if err != nil {
			t.Fatal(err)
		}
		return r, a
	}
	r, a := run()
	if !r.Passed || r.PassRate != 1 || r.CaseCount != 1 || r.SampleCount != 3 {
		t.Fatalf("verdict: passed=%v rate=%v", r.Passed, r.PassRate)
	}
	c := r.Cases[0]
	if c.SuccessfulSampleCount != 3 || c.PassedSampleCount != 3 || c.SamplePassRate != 1 || c.Status != "passed" {
		t.Fatalf("case: %+v", c)
	}
	if a.inits.Load() != 3 || a.closes.Load() != 3 {
		t.Fatalf("one session per sample: inits %d closes %d", a.inits.Load(), a.closes.Load())
	}
	ids := map[string]bool{}
	for i, s := range c.Samples {
		if s.SampleIndex != i || s.SampleID != evalengine.SampleID("weather", "7", "pune", i) {
			t.Fatalf("sample %d identity: %+v", i, s)
		}
		ids[s.SampleID] = true
	}
	if len(ids) != 3 {
		t.Fatal("sample ids not unique")
	}
	for _, m := range r.Metrics {
		if !m.Passed || m.EvaluatedCount != 3 || m.AverageScore != 1 {
			t.Fatalf("summary metric: %+v", m)
		}
	}
	r2, _ := run()
	for i := range c.Samples {
		if r2.Cases[0].Samples[i].SampleID != c.Samples[i].SampleID {
			t.Fatal("sample ids differ across runs")
		}
	}

	// Public trajectory hides tool content by default; secrets are pruned.
	s0 := c.Samples[0]
	if len(s0.Trajectory) != 2 || s0.Trajectory[0].Args != nil || s0.Trajectory[1].Result != nil || *s0.Trajectory[0].CallID != "c1" {
		t.Fatalf("public trajectory: %+v", s0.Trajectory)
	}
	if _, ok := s0.Metadata["password"]; ok {
		t.Fatal("case metadata secret in result")
	}
	am := s0.Turns[0].AdapterMetadata
	if _, ok := am["authorization"]; ok {
		t.Fatal("adapter metadata secret in result")
	}
	if am["usage"].(map[string]any)["input_tokens"] != 3 || am["runtime_latency_ms"] == nil {
		t.Fatalf("adapter metadata: %v", am)
	}
	if ev := s0.Turns[0].Events[0].(map[string]any); ev["secret"] != nil || ev["author"] != "agent" {
		t.Fatalf("events: %v", ev)
	}
}

func TestRun_CaptureToolContent(t *testing.T) {
	set := mustSet(t, fullCaseSet)
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: weatherAdapter(), Metrics: evalengine.DefaultCriteria(),
		Options: opts(func(o *evalengine.Options) { o.CaptureToolContent = true; o.CaptureEvents = false }),
	})
	if err != nil {
		t.Fatal(err)
	}
	s0 := r.Cases[0].Samples[0]
	args := s0.Trajectory[0].Args.(map[string]any)
	if args["city"] != "Pune" || args["api_token"] != nil {
		t.Fatalf("captured args: %v", args)
	}
	if s0.Trajectory[1].Result == nil {
		t.Fatal("tool result not captured")
	}
	if s0.Turns[0].Events != nil {
		t.Fatal("events captured with capture_events false")
	}
}

// constScorer is a custom metric with a fixed answer.
type constScorer struct {
	score evalengine.Score
	panic bool
}

func (c constScorer) ScoreCase(_ context.Context, e evalengine.CaseEval) evalengine.Score {
	if c.panic {
		panic("metric crashed")
	}
	s := c.score
	if s.Metadata == nil {
		s.Metadata = map[string]any{"trajectory_count": len(e.Trajectory())}
	}
	return s
}

func (c constScorer) ScoreTurn(_ context.Context, _ evalengine.TurnEval) evalengine.Score {
	return c.score
}

func TestRun_CustomMetricAndErrorAccounting(t *testing.T) {
	set := mustSet(t, fullCaseSet)
	good := evalengine.Metric{ID: "quality", Threshold: 0.5, Case: constScorer{score: evalengine.OK(0.75, nil)}}
	crash := evalengine.Metric{ID: "crash", Threshold: 0, Case: constScorer{panic: true}}
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: weatherAdapter(), Metrics: []evalengine.Metric{good, crash}, Options: opts(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	crit := r.Cases[0].Samples[0].Criteria
	if crit[0].Score != 0.75 || !crit[0].Passed || crit[0].Metadata["trajectory_count"] != 2 {
		t.Fatalf("custom metric: %+v", crit[0])
	}
	if crit[1].Status != evalengine.StatusError || crit[1].Score != 0 || crit[1].Passed {
		t.Fatalf("crashing metric: %+v", crit[1])
	}
	if r.Passed || r.Metrics[1].ErrorCount != 1 || r.Metrics[1].Passed {
		t.Fatalf("error accounting: passed=%v %+v", r.Passed, r.Metrics[1])
	}
	t.Run("turn scope", func(t *testing.T) {
		turn := evalengine.Metric{ID: "turny", Threshold: 0.9, Turn: constScorer{score: evalengine.OK(0.5, nil)}}
		r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: weatherAdapter(), Metrics: []evalengine.Metric{turn}, Options: opts(nil)})
		if err != nil {
			t.Fatal(err)
		}
		tr := r.Cases[0].Samples[0].Turns[0]
		if len(tr.Metrics) != 1 || tr.Passed || tr.Metrics[0].Scope != evalengine.ScopeTurn {
			t.Fatalf("turn metric: %+v", tr)
		}
		if r.Metrics[0].EvaluatedCount != 2 || r.Cases[0].Criteria[0].Metadata["sample_count"] != 2 {
			t.Fatalf("turn metric pooling: %+v", r.Metrics[0])
		}
	})
}

func TestRun_AdapterFailureIsStructured(t *testing.T) {
	set := mustSet(t, fullCaseSet)
	cases := []struct {
		name string
		a    *fakeAdapter
		tag  string
	}{
		{"tagged turn error", &fakeAdapter{failTurn: &evalengine.AdapterError{Tag: "deliberately_failed"}}, "deliberately_failed"},
		{"raw turn error", &fakeAdapter{failTurn: errors.New("dial tcp 10.0.0.1: secret")}, evalengine.TagAdapterFailed},
		{"init error", &fakeAdapter{failInit: errors.New("x")}, evalengine.TagAdapterInitFailed},
		{"bad tag", &fakeAdapter{failTurn: &evalengine.AdapterError{Tag: "Has Spaces"}}, evalengine.TagAdapterFailed},
		{"panic", &fakeAdapter{panicTurn: true}, evalengine.TagAdapterException},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: tc.a, Metrics: evalengine.DefaultCriteria(), Options: opts(nil)})
			if err != nil {
				t.Fatal(err)
			}
			c := r.Cases[0]
			s := c.Samples[0]
			if s.Status != "error" || s.Error != tc.tag || len(s.Turns) != 0 || len(s.Criteria) != 0 {
				t.Fatalf("sample: %+v", s)
			}
			if c.Status != "error" || c.Passed || r.ErrorCaseCount != 1 || r.Passed {
				t.Fatalf("case: %+v", c)
			}
			if tc.a.failInit == nil && tc.a.closes.Load() != 1 {
				t.Fatal("session not closed after a failed turn")
			}
		})
	}
}

func TestRun_PartialCaseAndMinSuccessfulSamples(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"a","input":"x","expected":"x"}]}`)
	flaky := &flakyAdapter{failEvery: 2}
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: flaky, Metrics: evalengine.DefaultCriteria(),
		Options: opts(func(o *evalengine.Options) { o.Samples = 4; o.MinSuccessfulSamples = 2 }),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Cases[0]
	if c.Status != "partial" || !c.Passed || c.ErrorSampleCount != 2 || c.SuccessfulSampleCount != 2 || r.PartialCaseCount != 1 {
		t.Fatalf("partial case: status=%s passed=%v errs=%d ok=%d", c.Status, c.Passed, c.ErrorSampleCount, c.SuccessfulSampleCount)
	}
}

// flakyAdapter fails the sessions of odd sample indices.
type flakyAdapter struct{ failEvery int }

func (f *flakyAdapter) NewSession(_ context.Context, info evalengine.SampleInfo) (evalengine.Session, error) {
	if info.SampleIndex%f.failEvery == 1 {
		return nil, &evalengine.AdapterError{Tag: "flaky"}
	}
	return &fakeSession{a: &fakeAdapter{echo: true}}, nil
}

func TestRun_CaseDeadlineIsEnforced(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"slow","input":"x","expected":"x"}]}`)
	a := &fakeAdapter{block: true, release: make(chan struct{})}
	start := time.Now()
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: a, Metrics: evalengine.DefaultCriteria(),
		Options: opts(func(o *evalengine.Options) { o.CaseTimeoutMS = 20 }),
	})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("run took %v", took)
	}
	if s := r.Cases[0].Samples[0]; s.Error != evalengine.TagTimeout || s.Status != "error" {
		t.Fatalf("sample: %+v", s)
	}
	if a.closes.Load() != 1 {
		t.Fatal("timed-out session not closed")
	}
}

func TestRun_RunDeadlineRecordsRemainingSamplesAsTimeout(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"a","input":"x"},{"id":"b","input":"x"},{"id":"c","input":"x"}]}`)
	a := &fakeAdapter{block: true, release: make(chan struct{})}
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: a, Metrics: evalengine.DefaultCriteria(),
		Options: opts(func(o *evalengine.Options) { o.TimeoutMS = 30 }),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Cases {
		if c.Samples[0].Error != evalengine.TagTimeout {
			t.Fatalf("case %s: %+v", c.CaseID, c.Samples[0])
		}
	}
	if a.inits.Load() != 1 {
		t.Fatalf("samples started after the run deadline: %d", a.inits.Load())
	}
}

func TestRun_CallerCancellationStopsSamples(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"a","input":"x"},{"id":"b","input":"x"}]}`)
	a := &fakeAdapter{block: true, release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := evalengine.Run(ctx, set, evalengine.RunConfig{Adapter: a, Metrics: evalengine.DefaultCriteria(), Options: opts(func(o *evalengine.Options) { o.Concurrency = 2 })})
		done <- err
	}()
	testutil.WaitFor(t, 5*time.Second, "both samples in flight", func() bool { return a.inits.Load() == 2 })
	cancel()
	select {
	case err := <-done:
		wantCode(t, err, evalengine.CodeEvaluationCancelled)
	case <-time.After(5 * time.Second):
		t.Fatal("run did not stop after cancellation")
	}
	if a.closes.Load() != 2 {
		t.Fatalf("sessions not closed: %d", a.closes.Load())
	}
}

func TestRun_ConcurrencyIsBounded(t *testing.T) {
	for _, tc := range []struct{ concurrency, sampleConc, samples, cases, want int }{
		{2, 0, 1, 8, 2},
		{4, 1, 4, 1, 1}, // one case: its sample limit binds
		{4, 2, 4, 1, 2}, // one case, two samples at a time
		{3, 1, 2, 6, 3}, // many cases: the pool size binds
		{64, 0, 1, 10, 10},
	} {
		var b strings.Builder
		b.WriteString(`{"id":"s","version":"1","cases":[`)
		for i := 0; i < tc.cases; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"id":"c` + itoa(i) + `","input":"x"}`)
		}
		b.WriteString(`]}`)
		set := mustSet(t, b.String())
		a := &fakeAdapter{block: true, release: make(chan struct{})}
		done := make(chan struct{})
		var res *evalengine.Result
		go func() {
			defer close(done)
			res, _ = evalengine.Run(context.Background(), set, evalengine.RunConfig{
				Adapter: a, Metrics: evalengine.DefaultCriteria(),
				Options: opts(func(o *evalengine.Options) {
					o.Concurrency, o.SampleConcurrency, o.Samples = tc.concurrency, tc.sampleConc, tc.samples
				}),
			})
		}()
		testutil.WaitFor(t, 5*time.Second, "the pool to fill", func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.inFlight == tc.want
		})
		close(a.release)
		<-done
		a.mu.Lock()
		got := a.maxInFlight
		a.mu.Unlock()
		if got != tc.want {
			t.Errorf("%+v: max in flight %d, want %d", tc, got, tc.want)
		}
		if res == nil || len(a.sampleIDs) != tc.cases*tc.samples {
			t.Errorf("%+v: not every sample ran", tc)
		}
	}
}

func TestRun_SampleMajorOrder(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"a","input":"x"},{"id":"b","input":"x"}]}`)
	a := &fakeAdapter{echo: true}
	_, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: a, Metrics: evalengine.DefaultCriteria(), Options: opts(func(o *evalengine.Options) { o.Samples = 2 }),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		evalengine.SampleID("s", "1", "a", 0), evalengine.SampleID("s", "1", "b", 0),
		evalengine.SampleID("s", "1", "a", 1), evalengine.SampleID("s", "1", "b", 1),
	}
	if strings.Join(a.sampleIDs, ",") != strings.Join(want, ",") {
		t.Fatalf("order: %v", a.sampleIDs)
	}
}

func TestRun_ReportBudget(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"a","input":"x"},{"id":"b","input":"x"},{"id":"c","input":"x"}]}`)
	a := &fakeAdapter{script: map[string]evalengine.TurnOutput{"x": {Output: strings.Repeat("y", 4000)}}}
	_, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: a, Metrics: evalengine.DefaultCriteria(),
		Options: opts(func(o *evalengine.Options) { o.MaxReportBytes = 16000 }),
	})
	wantCode(t, err, evalengine.CodeReportBudgetExceeded)
	if n := a.inits.Load(); n >= 3 {
		t.Fatalf("samples kept starting after the budget ran out: %d", n)
	}
}

func TestRunSampleAndAggregate_MatchRun(t *testing.T) {
	set := mustSet(t, fullCaseSet)
	metrics := evalengine.DefaultCriteria()
	o := opts(func(o *evalengine.Options) { o.Samples = 2 })
	local, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: weatherAdapter(), Metrics: metrics, Options: o})
	if err != nil {
		t.Fatal(err)
	}
	var samples []evalengine.SampleResult
	for s := 1; s >= 0; s-- { // any order
		sr, err := evalengine.RunSample(context.Background(), set, evalengine.RunConfig{Adapter: weatherAdapter(), Metrics: metrics, Options: o}, 0, s)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, sr)
	}
	dist, err := evalengine.Aggregate(set, metrics, o, samples, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := stripTimings(t, local), stripTimings(t, dist); a != b {
		t.Fatalf("local and distributed differ:\n%s\n%s", a, b)
	}
	_, err = evalengine.Aggregate(set, metrics, o, samples[:1], 0)
	wantCode(t, err, evalengine.CodeInvalidSampleResults)
	_, err = evalengine.Aggregate(set, metrics, o, []evalengine.SampleResult{samples[0], samples[0]}, 0)
	wantCode(t, err, evalengine.CodeInvalidSampleResults)
	lost := evalengine.ErrorSample(set, 0, 1, evalengine.TagWorkerLost)
	r, err := evalengine.Aggregate(set, metrics, o, []evalengine.SampleResult{samples[1], lost}, 0)
	if err != nil || r.Cases[0].Status != "partial" {
		t.Fatalf("worker_lost sample: %v %+v", err, r)
	}
}

func TestSampleRunner_ConcurrentRunsMatchRun(t *testing.T) {
	set := mustSet(t, fullCaseSet)
	metrics := evalengine.DefaultCriteria()
	o := opts(func(o *evalengine.Options) { o.Samples = 8 })
	local, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: weatherAdapter(), Metrics: metrics, Options: o})
	if err != nil {
		t.Fatal(err)
	}
	r, err := evalengine.NewSampleRunner(set, metrics, o)
	if err != nil {
		t.Fatal(err)
	}
	// One runner, many concurrent samples, each with its own adapter: the
	// way a worker runs the tasks of one job.
	samples := make([]evalengine.SampleResult, o.Samples)
	errs := make([]error, o.Samples)
	var wg sync.WaitGroup
	for s := range samples {
		wg.Go(func() {
			samples[s], errs[s] = r.Run(context.Background(), weatherAdapter(), 0, s)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	dist, err := evalengine.Aggregate(set, metrics, o, samples, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := stripTimings(t, local), stripTimings(t, dist); a != b {
		t.Fatalf("local and runner differ:\n%s\n%s", a, b)
	}
	t.Run("rejects", func(t *testing.T) {
		_, err := r.Run(context.Background(), nil, 0, 0)
		wantCode(t, err, evalengine.CodeInvalidAdapter)
		_, err = r.Run(context.Background(), weatherAdapter(), 0, o.Samples)
		wantCode(t, err, evalengine.CodeInvalidSampleResults)
		_, err = r.Run(context.Background(), weatherAdapter(), len(set.Cases), 0)
		wantCode(t, err, evalengine.CodeInvalidSampleResults)
		_, err = evalengine.NewSampleRunner(set, nil, o)
		wantCode(t, err, evalengine.CodeEmptyCriteria)
	})
}

// stripTimings renders a result with every duration and latency zeroed.
func stripTimings(t *testing.T, r *evalengine.Result) string {
	t.Helper()
	cp := *r
	cp.DurationMS = 0
	cp.Cases = append([]evalengine.CaseResult(nil), r.Cases...)
	for i := range cp.Cases {
		c := &cp.Cases[i]
		c.DurationMS = 0
		c.Samples = append([]evalengine.SampleResult(nil), c.Samples...)
		for j := range c.Samples {
			s := &c.Samples[j]
			s.DurationMS = 0
			s.Turns = append([]evalengine.TurnResult(nil), s.Turns...)
			for k := range s.Turns {
				m := map[string]any{}
				for key, v := range s.Turns[k].AdapterMetadata {
					if key != "runtime_latency_ms" {
						m[key] = v
					}
				}
				s.Turns[k].AdapterMetadata = m
			}
		}
	}
	out, err := evalengine.Render(&cp, evalengine.FormatJSON, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestRun_CapturedOutputPrunedNotCopied: what a sample keeps of its
// adapter's output (events, captured tool content, metadata) has its
// secrets removed at any depth, the adapter's own values are left as they
// were (the same maps are returned to every sample, concurrently), and
// what holds no secret is kept as it is rather than copied.
func TestRun_CapturedOutputPrunedNotCopied(t *testing.T) {
	clean := map[string]any{"author": "agent", "content": map[string]any{"type": "text", "text": "Sunny"}}
	secret := map[string]any{"author": "agent", "content": map[string]any{"type": "tool_calls",
		"calls": []any{map[string]any{"name": "weather", "args": map[string]any{"city": "Pune", "api_key": "k"}}}}}
	args := map[string]any{"city": "Pune", "nested": map[string]any{"password": "p", "keep": 1}}
	usage := map[string]any{"input_tokens": 3, "output_tokens": 1}
	out := evalengine.TurnOutput{
		Output:     "Sunny",
		Trajectory: []evalengine.ToolStep{{Kind: evalengine.KindToolCall, Tool: "weather", CallID: "c1", Args: args}},
		Events:     []any{clean, secret},
		Metadata:   map[string]any{"usage": usage, "token": "t"},
	}
	before := fmt.Sprint(out)
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"a","input":"Weather?","expected":"Sunny"}]}`)
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: &fakeAdapter{script: map[string]evalengine.TurnOutput{"Weather?": out}}, Metrics: evalengine.DefaultCriteria(),
		Options: opts(func(o *evalengine.Options) { o.Samples = 8; o.Concurrency = 4; o.CaptureToolContent = true }),
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != before {
		t.Fatalf("the adapter's output changed:\n%s\nwas\n%s", fmt.Sprint(out), before)
	}
	for _, s := range r.Cases[0].Samples {
		tr := s.Turns[0]
		if reflect.ValueOf(tr.Events[0]).Pointer() != reflect.ValueOf(clean).Pointer() {
			t.Fatal("an event without a secret was copied")
		}
		calls := tr.Events[1].(map[string]any)["content"].(map[string]any)["calls"].([]any)
		if a := calls[0].(map[string]any)["args"].(map[string]any); a["api_key"] != nil || a["city"] != "Pune" {
			t.Fatalf("event args %v", a)
		}
		if a := s.Trajectory[0].Args.(map[string]any); a["nested"].(map[string]any)["password"] != nil || a["nested"].(map[string]any)["keep"] != 1 {
			t.Fatalf("captured args %v", a)
		}
		if m := tr.AdapterMetadata; m["token"] != nil || m["usage"].(map[string]any)["input_tokens"] != 3 || m["runtime_latency_ms"] == nil {
			t.Fatalf("adapter metadata %v", m)
		}
	}
}
