package evalcore

import (
	"context"
	"strconv"

	"github.com/fadcedab/adk/observability"
)

// sampleTrace is one traced sample: its KindEval span (the root of the
// sample's trace) and what each turn needs to join it. A nil *sampleTrace
// is an untraced sample; its methods do nothing.
type sampleTrace struct {
	evals   observability.EvaluationObserver // nil when the observer records none
	traceID string
	endFn   func(observability.Outcome)
	// ids are the span's case and sample ids (one allocation with the
	// sampleTrace; the span may keep a pointer to them).
	ids observability.EvalIDs
}

// startSampleTrace starts the sample's span. Job and worker ids come from
// ctx (observability.ContextWithEval, set by a worker); case and sample
// are the engine's.
func (e *engine) startSampleTrace(ctx context.Context, caseID, sampleID string) (context.Context, *sampleTrace) {
	t := &sampleTrace{ids: observability.EvalIDs{CaseID: caseID, SampleID: sampleID}}
	ctx, t.endFn = e.observer.Start(ctx, observability.Observation{Kind: observability.KindEval, Eval: &t.ids})
	t.evals, _ = e.observer.(observability.EvaluationObserver)
	if c, _ := observability.FromContext(ctx); !c.TraceID.IsZero() {
		t.traceID = c.TraceID.String()
	}
	return ctx, t
}

// turn returns the context a turn runs in and the turn's run id: the
// sample's span (ctx is the context startSampleTrace returned) with a run
// id of its own, which the Runner's run span inherits (lineage from the
// parent wins), so the run id is unique per trace and turn, and envelopes
// carry it.
func (t *sampleTrace) turn(ctx context.Context, ti int) (context.Context, string) {
	if t == nil || t.traceID == "" {
		return ctx, ""
	}
	c, _ := observability.FromContext(ctx)
	c.RunID = "run-" + t.traceID + "-" + strconv.Itoa(ti)
	return observability.ContextWithCorrelation(ctx, c), c.RunID
}

// scores emits one gen_ai.evaluation.result per metric verdict on the
// sample's span.
func (t *sampleTrace) scores(ctx context.Context, ms []MetricResult) {
	if t == nil || t.evals == nil {
		return
	}
	for i := range ms {
		label := "fail"
		if ms[i].Passed {
			label = "pass"
		}
		t.evals.EvaluationResult(ctx, observability.EvaluationResult{Name: ms[i].MetricID, Score: ms[i].Score, Label: label})
	}
}

// end ends the sample's span with the sample's error tag, if any.
func (t *sampleTrace) end(res *SampleResult) {
	out := observability.Outcome{}
	if res.Error != "" {
		out.Err = sampleError(res.Error)
		out.ErrorType = res.Error
	}
	t.endFn(out)
}

// sampleError is a sample's error tag as an error (the tag is the span's
// error.type; the text is never exported).
type sampleError string

func (e sampleError) Error() string { return string(e) }
