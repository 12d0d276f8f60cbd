package bus_test

import (
	"context"
	"syscall"
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
// JetStream server, drained at the end. The tracer writes each signal's
// record straight into the publisher (the Publisher is its RecordSink,
// as a worker's publisher is). "tracer" stops at a sink that drops every
// record: the tracer's own share. "publisher_structs" is the struct path
// (Signal values encoded by Enqueue), what a tracer with an OTLP
// exporter beside the bus takes.
func BenchmarkTracedTask(b *testing.B) {
	run := func(b *testing.B, sink any) {
		var cfg observability.Config
		switch x := sink.(type) {
		case observability.RecordSink:
			cfg.Records = x
		case observability.AsyncSink:
			cfg.Async = x
		}
		tr, err := observability.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		base := observability.ContextWithEval(context.Background(), observability.EvalIDs{JobID: "job-0123456789abcdef", WorkerID: "w1"})
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			ctx, end := tr.Start(base, observability.Observation{Kind: observability.KindEval,
				Eval: &observability.EvalIDs{CaseID: "case-0042", SampleID: "case-0042#3"}})
			tr.EvaluationResult(ctx, observability.EvaluationResult{Name: "exact_match", Score: 1, Label: "pass"})
			end(observability.Outcome{})
		}
		if d, ok := sink.(interface{ Drain(context.Context) error }); ok {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := d.Drain(ctx); err != nil {
				b.Fatal(err)
			}
		}
		// Process CPU (the embedded server's included) per task, drain
		// included: on a shared machine the figure to compare.
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/task")
	}
	b.Run("tracer", func(b *testing.B) { run(b, discard{}) })
	publisher := func(b *testing.B, structs bool) {
		s := bustest.Start(b, bus.ServerConfig{})
		s.SignalStream(b, bus.SignalStreamConfig{})
		cfg := bus.HighRatePublisherConfig(nil)
		cfg.Principal = "p1"
		p, err := bus.NewPublisher(s.NC, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		if structs {
			run(b, structSink{p})
		} else {
			run(b, p)
		}
		if st := p.Stats(); st.Exported != st.Accepted || st.Accepted != uint64(5*b.N) {
			b.Fatalf("not all exported: %+v", st)
		}
	}
	b.Run("publisher", func(b *testing.B) { publisher(b, false) })
	b.Run("publisher_structs", func(b *testing.B) { publisher(b, true) })
}

// structSink hides the publisher's RecordSink side.
type structSink struct{ p *bus.Publisher }

func (s structSink) Enqueue(sig observability.Signal) error { return s.p.Enqueue(sig) }

func (s structSink) Drain(ctx context.Context) error { return s.p.Drain(ctx) }

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type discard struct{}

func (discard) EnqueueSignalJSON(string, []byte) error { return nil }
