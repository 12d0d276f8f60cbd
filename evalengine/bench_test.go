package evalengine_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/observability"
)

// zeroAdapter answers every turn at once with a fixed response and one tool
// call: the engine's own overhead is all that is measured.
type zeroAdapter struct{}

type zeroSession struct{}

var zeroOutput = evalengine.TurnOutput{
	Output:     "ok",
	Trajectory: []evalengine.ToolStep{{Kind: evalengine.KindToolCall, Tool: "lookup", Args: map[string]any{"q": "x"}}},
}

func (zeroAdapter) NewSession(context.Context, evalengine.SampleInfo) (evalengine.Session, error) {
	return zeroSession{}, nil
}

func (zeroSession) Turn(context.Context, evalengine.TurnInput) (evalengine.TurnOutput, error) {
	return zeroOutput, nil
}

func (zeroSession) Close() error { return nil }

// benchSet has 100 single-turn cases; with 100 samples each that is the
// contract's ceiling of 10,000 samples.
func benchSet(b testing.TB) *evalengine.Set {
	var sb strings.Builder
	sb.WriteString(`{"id":"bench","version":"1","cases":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"id":"case-` + itoa(i) + `","expected_trajectory":["lookup"],"input":"question","expected":"ok"}`)
	}
	sb.WriteString(`]}`)
	return mustSet(b, sb.String())
}

// BenchmarkEngine10kSamples runs 10,000 zero-latency samples (100 cases ×
// 100 samples, two criteria, concurrency 64) per iteration and reports the
// engine overhead per sample.
func BenchmarkEngine10kSamples(b *testing.B) {
	set := benchSet(b)
	metrics := []evalengine.Metric{
		mustCriterion(b, "response", evalengine.CriterionExactResponse, 1, nil),
		mustCriterion(b, "trajectory", evalengine.CriterionToolTrajectory, 1, nil),
	}
	o := evalengine.DefaultOptions()
	o.Samples = 100
	o.Concurrency = 64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: zeroAdapter{}, Metrics: metrics, Options: o})
		if err != nil {
			b.Fatal(err)
		}
		if !r.Passed || r.CaseCount != 100 {
			b.Fatalf("unexpected verdict: %v", r.PassRate)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*10_000), "ns/sample")
	b.ReportMetric(float64(b.N*10_000)/time.Since(start).Seconds(), "samples/s")
}

// BenchmarkEngineTraced10kSamples is BenchmarkEngine10kSamples with every
// sample traced as a worker traces it (a tracer writing records for a
// record sink, which drops them here): the engine's share of a traced
// sample, beside the tracer's own.
func BenchmarkEngineTraced10kSamples(b *testing.B) {
	set := benchSet(b)
	metrics := []evalengine.Metric{
		mustCriterion(b, "response", evalengine.CriterionExactResponse, 1, nil),
		mustCriterion(b, "trajectory", evalengine.CriterionToolTrajectory, 1, nil),
	}
	tr, err := observability.New(observability.Config{Records: discardRecords{}})
	if err != nil {
		b.Fatal(err)
	}
	o := evalengine.DefaultOptions()
	o.Samples = 100
	o.Concurrency = 64
	ctx := observability.ContextWithEval(context.Background(), observability.EvalIDs{JobID: "job-0123456789abcdef", WorkerID: "w1"})
	b.ReportAllocs()
	for b.Loop() {
		r, err := evalengine.Run(ctx, set, evalengine.RunConfig{Adapter: zeroAdapter{}, Metrics: metrics, Options: o, Observer: tr})
		if err != nil {
			b.Fatal(err)
		}
		if !r.Passed || r.CaseCount != 100 {
			b.Fatalf("unexpected verdict: %v", r.PassRate)
		}
	}
}

type discardRecords struct{}

func (discardRecords) EnqueueSignalJSON(string, []byte) error { return nil }

// BenchmarkRenderHTML1kFailingSamples renders the HTML report of a 1,000-sample
// result whose samples all fail (the worst case: every sample is drawn
// with its diff and trajectory) and reports its size.
func BenchmarkRenderHTML1kFailingSamples(b *testing.B) {
	set := benchSet(b)
	metrics := []evalengine.Metric{
		mustCriterion(b, "response", evalengine.CriterionExactResponse, 1, nil),
		mustCriterion(b, "trajectory", evalengine.CriterionToolTrajectory, 1, map[string]any{"match": "exact"}),
	}
	o := evalengine.DefaultOptions()
	o.Samples = 10 // 10,000 failing samples exceed the result budget
	o.Concurrency = 64
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: failingAdapter{}, Metrics: metrics, Options: o})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	for i := 0; i < b.N; i++ {
		out, err := evalengine.RenderHTML(r, nil, evalengine.ExportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.ReportMetric(float64(n), "bytes")
}

// failingAdapter answers every turn wrongly with a different tool.
type failingAdapter struct{}

type failingSession struct{}

func (failingAdapter) NewSession(context.Context, evalengine.SampleInfo) (evalengine.Session, error) {
	return failingSession{}, nil
}

func (failingSession) Turn(context.Context, evalengine.TurnInput) (evalengine.TurnOutput, error) {
	return evalengine.TurnOutput{Output: "not the answer you expected",
		Trajectory: []evalengine.ToolStep{{Kind: evalengine.KindToolCall, Tool: "search"}}}, nil
}

func (failingSession) Close() error { return nil }

// BenchmarkReadStreamSide reads a 2,000-case × 1-sample stream as a
// comparison side (`adk eval compare`'s reader of a jsonl result): the
// stream checks' cost of a sample line and a case line, reported a case.
func BenchmarkReadStreamSide(b *testing.B) {
	const n = 2000
	data := sideStream(b, n, 1, false)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := evalengine.ReadStreamSide(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/case")
}
