package observability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordFunc is a RecordSink of a test.
type recordFunc func(jobID string, data []byte) error

func (f recordFunc) EnqueueSignalJSON(jobID string, data []byte) error { return f(jobID, data) }

// recordCase is one span and how it ended, from which both paths write.
type recordCase struct {
	sp   *Span
	end  spanEnd
	eval EvaluationResult
	now  time.Time
}

// checkRecords fails unless every record writer writes exactly
// json.Marshal's bytes of the Signal its struct builder makes (which is
// also what EncodeSignal, the struct path's encoder, writes).
func checkRecords(t *testing.T, c *recordCase) {
	t.Helper()
	sp := c.sp
	sp.ids.eval = newEvalValues(&sp.ids.evalIDs) // as a struct-path tracer's
	op, _ := sp.operation()
	sp.ids.attrs = startAttributes(op, sp.kind, &sp.corr, sp.provider, &sp.ids.eval)
	for _, p := range []struct {
		name   string
		sig    Signal
		record []byte
	}{
		{"start envelope", sp.startEnvelope(nil), sp.appendStartEnvelopeRecord(nil)},
		{"start span", sp.startSignal(), sp.appendStartSpanRecord(nil)},
		{"end span", sp.endSignal(&c.end), sp.appendEndSpanRecord(nil, &c.end)},
		{"end envelope", sp.endEnvelope(&c.end), sp.appendEndEnvelopeRecord(nil, &c.end)},
		{"evaluation", sp.evaluationEnvelope(&c.eval, c.now), sp.appendEvaluationRecord(nil, &c.eval, c.now)},
	} {
		want, err := json.Marshal(p.sig)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if !bytes.Equal(p.record, want) {
			t.Fatalf("%s:\nrecord %s\nstruct %s", p.name, p.record, want)
		}
		enc, err := EncodeSignal(p.sig)
		if err != nil || !bytes.Equal(enc, want) {
			t.Fatalf("%s: EncodeSignal %v\n got %s\nwant %s", p.name, err, enc, want)
		}
		if job, _ := sp.ids.eval[0].(string); job != SignalJobID(p.sig) {
			t.Fatalf("%s: job %q, the signal's %q", p.name, job, SignalJobID(p.sig))
		}
	}
}

// beginRecordCase starts a span the way Begin does for an emitting tracer.
func beginRecordCase(t *testing.T, tr *Tracer, ctx context.Context, o Observation, out Outcome, dur time.Duration, ev EvaluationResult) *recordCase {
	t.Helper()
	_, sp, err := tr.Begin(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	c := &recordCase{sp: sp, eval: ev, now: sp.start.Add(dur)}
	c.end = spanEnd{out: out, now: c.now, dur: max(dur, 0), status: StatusOK}
	if out.Err != nil {
		c.end.status, c.end.errType = StatusError, errorType(&out)
	}
	return c
}

var recordAwkward = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\nret\rbs\bff\f",
	"\x00\x01\x1f\x7f", "caf\u00e9 \u65e5\u672c", "\u2028\u2029", "bad \xff\xfe utf8", "emoji \U0001F600",
	"gpt-4o-mini", "stop", "case-0042#3",
}

func randRecordString(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0: // past the 256- and 512-byte bounds, or just at them
		return strings.Repeat("m", []int{255, 256, 257, 511, 512, 513, 2000}[r.IntN(7)])
	case 1, 2, 3:
		return recordAwkward[r.IntN(len(recordAwkward))]
	}
	b := make([]byte, r.IntN(20))
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
		if r.IntN(6) == 0 {
			b[i] = byte(r.IntN(256))
		}
	}
	return string(b)
}

func randRecordCase(t *testing.T, tr *Tracer, r *rand.Rand) *recordCase {
	s := func() string { return randRecordString(r) }
	kinds := []Kind{KindRun, KindAgent, KindModel, KindTool, KindWorkflow, KindEval, "custom"}
	o := Observation{Kind: kinds[r.IntN(len(kinds))], RunID: s(), InvocationID: s(), SessionID: s(), Agent: s(),
		Provider: s(), Model: s(), Tool: s(), CallID: s(), WorkflowID: s(), WorkflowKind: s(), NodeID: s(),
		Stream: r.IntN(2) == 0, Start: time.Unix(0, r.Int64N(4e18)-1e18)}
	if r.IntN(2) == 0 {
		o.Eval = &EvalIDs{JobID: s(), CaseID: s(), SampleID: s(), WorkerID: s()}
	}
	ctx := context.Background()
	switch r.IntN(4) {
	case 1:
		c := NewRoot()
		c.Flags = byte(r.IntN(256))
		c.TraceState, c.RunID, c.Model, c.Tool = s(), s(), s(), s()
		if r.IntN(2) == 0 {
			c.Eval = &EvalIDs{JobID: s(), WorkerID: s()}
		}
		ctx = ContextWithCorrelation(ctx, c)
	case 2:
		ctx = ContextWithRemoteParent(ctx, RemoteContext{Traceparent: Traceparent{TraceID: newTraceID(), SpanID: newSpanID(), Flags: byte(r.IntN(256))}, Tracestate: s()})
	case 3:
		ctx = ContextWithEval(ctx, EvalIDs{JobID: s(), CaseID: s(), SampleID: s(), WorkerID: s()})
	}
	var out Outcome
	switch r.IntN(5) {
	case 1:
		out.Err = errors.New("boom: " + s())
	case 2:
		out.Err = codedErr{}
	case 3:
		out.Err, out.ErrorType = context.DeadlineExceeded, s()
	}
	out.ResponseModel, out.ResponseID = s(), s()
	if r.IntN(3) > 0 {
		out.Usage = &Usage{InputTokens: r.Int64N(1e6) - 10, OutputTokens: r.Int64N(1e9), CacheReadTokens: r.Int64N(3) - 1,
			CacheCreationTokens: 9, ReasoningTokens: r.Int64() - r.Int64()}
	}
	for range r.IntN(4) * r.IntN(8) {
		out.FinishReasons = append(out.FinishReasons, s())
	}
	scores := []float64{0, math.Copysign(0, -1), 1, 0.25, math.NaN(), math.Inf(-1), 1e-7, 1e21, -3.5e-300, r.NormFloat64()}
	ev := EvaluationResult{Name: s(), Label: []string{"pass", "fail", "", s()}[r.IntN(4)], Score: scores[r.IntN(len(scores))]}
	dur := time.Duration(r.Int64N(1e12))
	if r.IntN(8) == 0 {
		dur = -time.Duration(r.Int64N(1e9))
	}
	return beginRecordCase(t, tr, ctx, o, out, dur, ev)
}

// TestRecords_AreTheStructPathsBytes: for random spans (every kind, ids
// past their bounds, every escape class, remote and local parents, every
// outcome), the direct path's five records are byte for byte the struct
// path's signals as json.Marshal writes them.
func TestRecords_AreTheStructPathsBytes(t *testing.T) {
	tr := newTracer(t, Config{Records: recordFunc(func(string, []byte) error { return nil })})
	r := rand.New(rand.NewPCG(13, 13))
	for i := range 5000 {
		c := randRecordCase(t, tr, r)
		if i%1000 == 0 {
			t.Logf("sample end span %s", c.sp.appendEndSpanRecord(nil, &c.end))
		}
		checkRecords(t, c)
	}
}

// FuzzRecords holds the direct path to the struct path for inputs the
// fuzzer picks.
func FuzzRecords(f *testing.F) {
	f.Add(uint8(2), "gpt-4o<mini>", "job-1", "case\u2028", "stop", int64(1234567), 0.5, uint16(0))
	f.Add(uint8(6), "", "\xff", "", "", int64(-1), math.Inf(1), uint16(0xffff))
	f.Fuzz(func(t *testing.T, kind uint8, a, b, c, d string, n int64, score float64, shape uint16) {
		tr := newTracer(t, Config{Records: recordFunc(func(string, []byte) error { return nil })})
		kinds := []Kind{KindRun, KindAgent, KindModel, KindTool, KindWorkflow, KindEval, Kind(a)}
		o := Observation{Kind: kinds[int(kind)%len(kinds)], RunID: a, InvocationID: b, SessionID: c, Agent: d,
			Provider: a, Model: b, Tool: c, CallID: d, Start: time.Unix(0, n)}
		if shape&1 != 0 {
			o.WorkflowID, o.WorkflowKind, o.NodeID = a, b, c
		}
		if shape&2 != 0 {
			o.Eval = &EvalIDs{JobID: a, CaseID: b, SampleID: c, WorkerID: d}
		}
		ctx := context.Background()
		if shape&4 != 0 {
			ctx = ContextWithRemoteParent(ctx, RemoteContext{Traceparent: Traceparent{TraceID: newTraceID(), SpanID: newSpanID(), Flags: byte(n)}, Tracestate: d})
		}
		if shape&8 != 0 {
			ctx = ContextWithEval(ctx, EvalIDs{JobID: d, WorkerID: c})
		}
		out := Outcome{ResponseModel: c, ResponseID: d}
		if shape&16 != 0 {
			out.Err, out.ErrorType = errors.New(a), b
		}
		if shape&32 != 0 {
			out.Usage = &Usage{InputTokens: n, OutputTokens: -n, CacheReadTokens: n / 2, ReasoningTokens: n % 7}
		}
		if shape&64 != 0 {
			out.FinishReasons = []string{a, b, c, d, "", a}
		}
		ev := EvaluationResult{Name: a, Label: b, Score: score}
		checkRecords(t, beginRecordCase(t, tr, ctx, o, out, time.Duration(n%1e12), ev))
	})
}

// TestTracer_RecordSinkGetsEachSignalOnce: a tracer with a record sink
// hands it each signal of a traced sample once, in the struct path's
// order, with the sample's job id; every record is canonical JSON of a
// Signal (it decodes and re-encodes to the same bytes). Lifecycle and
// captured content take the struct path into the same sink.
func TestTracer_RecordSinkGetsEachSignalOnce(t *testing.T) {
	for _, capture := range []bool{false, true} {
		var mu sync.Mutex
		type rec struct {
			job  string
			data []byte
		}
		var got []rec
		tr := newTracer(t, Config{CaptureContent: capture, Records: recordFunc(func(job string, data []byte) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, rec{job, data})
			return nil
		})})
		if tr.direct == capture {
			t.Fatalf("capture %v: direct %v", capture, tr.direct)
		}
		base := ContextWithEval(context.Background(), EvalIDs{JobID: "job-1", WorkerID: "w1"})
		ctx, end := tr.Start(base, Observation{Kind: KindEval, Eval: &EvalIDs{CaseID: "c1", SampleID: "c1#0"}, Content: "in"})
		syntheticRun(&childObserver{tr, ctx})
		tr.EvaluationResult(ctx, EvaluationResult{Name: "exact_match", Score: 1, Label: "pass"})
		tr.Lifecycle(ctx, Lifecycle{Hook: "before_run", Outcome: "continue"})
		end(Outcome{Content: "out"})
		// eval start ×2, four spans ×4, evaluation, lifecycle, eval end ×2
		if len(got) != 22 {
			t.Fatalf("capture %v: %d records", capture, len(got))
		}
		events := []string{}
		for i, r := range got {
			var probe struct {
				Signal string `json:"signal"`
				Phase  string `json:"phase"`
				Event  string `json:"event"`
			}
			if err := json.Unmarshal(r.data, &probe); err != nil {
				t.Fatal(err)
			}
			var sig Signal = &Envelope{}
			if probe.Signal == "span" {
				sig = &SpanSignal{}
			}
			if err := json.Unmarshal(r.data, sig); err != nil {
				t.Fatal(err)
			}
			again, err := json.Marshal(sig)
			if err != nil || !bytes.Equal(again, r.data) {
				t.Fatalf("record %d is not canonical: %v\n%s\n%s", i, err, r.data, again)
			}
			if want := SignalJobID(sig); r.job != want {
				t.Fatalf("record %d: job %q, attribute %q", i, r.job, want)
			}
			if r.job != "job-1" {
				t.Fatalf("record %d (%s): job %q", i, r.data, r.job)
			}
			events = append(events, probe.Event+probe.Phase)
		}
		want := "adk.eval.start start adk.run.start start adk.agent.start start adk.model.start start end adk.model.stop " +
			"adk.tool.start start end adk.tool.stop end adk.agent.stop end adk.run.stop gen_ai.evaluation.result adk.lifecycle.before_run end adk.eval.stop"
		if g := strings.Join(events, " "); g != want {
			t.Fatalf("capture %v: order\n got %s\nwant %s", capture, g, want)
		}
	}
}

// childObserver starts every span in ctx unless given a child context.
type childObserver struct {
	tr  *Tracer
	ctx context.Context
}

func (c *childObserver) Start(ctx context.Context, o Observation) (context.Context, func(Outcome)) {
	if ctx == context.Background() {
		ctx = c.ctx
	}
	return c.tr.Start(ctx, o)
}

// TestTracer_RecordSinkRefusalIsCounted: a refused record is reported and
// counted like an async admission failure, and fails closed on request.
func TestTracer_RecordSinkRefusalIsCounted(t *testing.T) {
	full := errors.New("queue_full")
	var failures []DeliveryFailure
	open := newTracer(t, Config{Records: recordFunc(func(string, []byte) error { return full }),
		OnDeliveryFailure: func(f DeliveryFailure) { failures = append(failures, f) }})
	if _, _, err := open.Begin(context.Background(), Observation{Kind: KindRun}); err != nil {
		t.Fatalf("open admission failure returned %v", err)
	}
	if len(failures) != 2 || failures[0].Reason != deliveryReasonDropped || failures[1].Phase != PhaseStartSpan {
		t.Fatalf("failures %+v, snapshot %+v", failures, open.Metrics().Snapshot())
	}
	closed := newTracer(t, Config{Records: recordFunc(func(string, []byte) error { return full }), AsyncFailurePolicy: FailClosed})
	if _, _, err := closed.Begin(context.Background(), Observation{Kind: KindRun}); err == nil {
		t.Fatal("closed admission failure not returned")
	}
	if _, err := New(Config{Records: recordFunc(nil), Async: asyncFunc(nil)}); !errors.Is(err, ErrTwoSinks) {
		t.Fatalf("two sinks: %v", err)
	}
	if _, err := New(Config{Records: recordFunc(nil), Exporters: []ExporterDescriptor{{ID: "a", Exporter: &recorder{}}}}); !errors.Is(err, ErrAsyncWithExporters) {
		t.Fatalf("records with exporters: %v", err)
	}
}
