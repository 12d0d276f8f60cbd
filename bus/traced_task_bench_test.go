package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/observability"
)

// BenchmarkTracedTask is the signal side of one traced fleet task, as a
// worker runs it (BenchmarkClusterEval_10kTasks/signals=on in testcluster
// is the whole-fleet figure): the sample's eval span, one
// gen_ai.evaluation.result event and the span's end, five signals,
// through a high-rate Publisher into ADK_SIGNALS on an embedded
// JetStream server, drained at the end. "tracer" stops at a sink that
// drops every signal: the tracer's own share.
func BenchmarkTracedTask(b *testing.B) {
	run := func(b *testing.B, sink observability.AsyncSink) {
		tr, err := observability.New(observability.Config{Async: sink})
		if err != nil {
			b.Fatal(err)
		}
		base := observability.ContextWithEval(context.Background(), observability.EvalIDs{JobID: "job-0123456789abcdef", WorkerID: "w1"})
		b.ReportAllocs()
		for b.Loop() {
			ctx, end := tr.Start(base, observability.Observation{Kind: observability.KindEval,
				Eval: &observability.EvalIDs{CaseID: "case-0042", SampleID: "case-0042#3"}})
			tr.EvaluationResult(ctx, observability.EvaluationResult{Name: "exact_match", Score: 1, Label: "pass"})
			end(observability.Outcome{})
		}
	}
	b.Run("tracer", func(b *testing.B) { run(b, discard{}) })
	b.Run("publisher", func(b *testing.B) {
		s := bustest.Start(b, bus.ServerConfig{})
		s.SignalStream(b, bus.SignalStreamConfig{})
		cfg := bus.HighRatePublisherConfig(nil)
		cfg.Principal = "p1"
		p, err := bus.NewPublisher(s.NC, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		run(b, p)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		if st := p.Stats(); st.Exported != st.Accepted {
			b.Fatalf("not all exported: %+v", st)
		}
	})
}

type discard struct{}

func (discard) Enqueue(observability.Signal) error { return nil }
