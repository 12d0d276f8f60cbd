package observability

import (
	"context"
	"math"
	"time"
)

// KindEval is one evaluated (case, sample): the root span of the sample's
// trace, so every turn's run, agent, model and tool span is its
// descendant and one sample is one trace.
const KindEval Kind = "eval"

// EventEvaluationResult is the gen-ai semconv event that carries a score.
const EventEvaluationResult = "gen_ai.evaluation.result"

// Evaluation result attribute keys (gen-ai semconv).
const (
	AttrEvaluationName       = "gen_ai.evaluation.name"
	AttrEvaluationScoreValue = "gen_ai.evaluation.score.value"
	AttrEvaluationScoreLabel = "gen_ai.evaluation.score.label"
)

// EvalIDs tie spans to the eval that ran them. They are identifiers, never
// content; each is bounded like any attribute value (512 bytes; longer is
// left out).
type EvalIDs struct {
	JobID    string
	CaseID   string
	SampleID string
	WorkerID string
}

type evalKey struct{}

// ContextWithEval returns ctx carrying eval ids for the spans started in
// it that have none from their parent (a worker sets job and worker; the
// engine adds case and sample on the sample's span).
func ContextWithEval(ctx context.Context, ids EvalIDs) context.Context {
	return context.WithValue(ctx, evalKey{}, ids)
}

// EvalFromContext returns the eval ids ContextWithEval set, if any.
func EvalFromContext(ctx context.Context) (EvalIDs, bool) {
	ids, ok := ctx.Value(evalKey{}).(EvalIDs)
	return ids, ok
}

// EvaluationResult is one metric's verdict on a sample, emitted as a
// gen_ai.evaluation.result event on the sample's span.
type EvaluationResult struct {
	Name  string  // the metric id
	Score float64 // non-finite scores are left out
	Label string  // "pass" or "fail"
}

// The usual scores as attribute values, boxed once.
var scoreZero, scoreOne any = 0.0, 1.0

// EvaluationObserver is the optional part of an Observer that records
// evaluation results (the Tracer implements it).
type EvaluationObserver interface {
	EvaluationResult(ctx context.Context, r EvaluationResult)
}

var _ EvaluationObserver = (*Tracer)(nil)

// EvaluationResult emits a v1 envelope named gen_ai.evaluation.result on
// the current span of ctx (the sample's), with the metric name, score and
// label as attributes. Nothing is emitted without a current span or with
// no exporter.
func (t *Tracer) EvaluationResult(ctx context.Context, r EvaluationResult) {
	c, ok := FromContext(ctx)
	if !ok || !t.emitting || c.Remote {
		return
	}
	sp := &Span{t: t, corr: c, kind: KindEval}
	if cur, _ := ctx.Value(spanKey{}).(*Span); cur != nil && cur.ids != nil && cur.t.direct == t.direct && ctx.Value(correlationKey{}) == &cur.corr {
		// ctx's current span is one this process started: its ids are
		// formatted already (its workflow metadata is not the event's).
		sp.ids = cur.ids
	} else {
		sp.ids = newSpanIDs(&c, !t.direct)
	}
	now := time.Now()
	if t.direct {
		rb := takeRecordBuf()
		_ = t.deliverRecord(sp, PhaseLifecycle, rb.done(sp.appendEvaluationRecord(rb.a, &r, now)))
		return
	}
	_ = t.deliver(ctx, sp, PhaseLifecycle, sp.evaluationEnvelope(&r, now))
}

// evaluationEnvelope builds EvaluationResult's envelope.
func (s *Span) evaluationEnvelope(r *EvaluationResult, now time.Time) *Envelope {
	e := new(Envelope)
	*e = s.envelopeHead(EventEvaluationResult, now.UnixMilli())
	attrs := make(Attributes, s.ids.eval.len()+3)
	s.ids.eval.set(attrs)
	e.Metadata.Attributes = attrs
	setText(attrs, AttrEvaluationName, r.Name, maxAttrValueBytes)
	if r.Label != "" && len(r.Label) <= maxAttrValueBytes {
		attrs[AttrEvaluationScoreLabel] = constValue(r.Label)
	}
	switch {
	case r.Score == 0 && !math.Signbit(r.Score):
		attrs[AttrEvaluationScoreValue] = scoreZero
	case r.Score == 1:
		attrs[AttrEvaluationScoreValue] = scoreOne
	case !math.IsNaN(r.Score) && !math.IsInf(r.Score, 0):
		attrs[AttrEvaluationScoreValue] = r.Score
	}
	return e
}
