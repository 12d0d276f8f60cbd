package observability

import (
	"context"
	"math/rand/v2"
)

// Correlation is the correlation context of one span (CONTRACTS §2.1): W3C
// identity plus the run lineage and the operation's agent/model/tool. It is
// carried in a context.Context; see FromContext.
type Correlation struct {
	TraceID TraceID
	SpanID  SpanID
	// ParentID is the parent span, zero for a root.
	ParentID SpanID
	// Flags are the W3C trace flags; new roots get 1 (sampled).
	Flags byte
	// TraceState is a canonical tracestate, or "".
	TraceState string
	// Remote reports that ParentID came from inbound headers. FromContext on
	// a context holding only a remote parent sets it with SpanID being the
	// remote span itself.
	Remote bool

	RunID        string
	InvocationID string
	SessionID    string
	Agent        string
	Model        string
	Tool         string
	CallID       string
	// Eval ties the span to an eval job, case and sample; children
	// inherit it (shared, read-only).
	Eval *EvalIDs
}

// NewRoot returns a root correlation with a random trace id, a fresh span
// id, no parent and flags 1.
func NewRoot() Correlation {
	return Correlation{TraceID: newTraceID(), SpanID: newSpanID(), Flags: 1}
}

// Child returns the correlation of a child span: same trace, flags and
// tracestate, parent := c.SpanID, a fresh span id. Run lineage
// (run/invocation/session) and agent/model/tool/call are inherited; the
// caller may then override the per-operation fields, never the lineage.
func (c Correlation) Child() Correlation {
	child := c
	child.ParentID = c.SpanID
	child.SpanID = newSpanID()
	child.Remote = false
	return child
}

// Traceparent returns c's outbound traceparent: the local span is the parent
// the next hop sees.
func (c Correlation) Traceparent() Traceparent {
	return Traceparent{TraceID: c.TraceID, SpanID: c.SpanID, Flags: c.Flags}
}

// FromRemote continues a remote trace with a fresh local span: same trace id,
// flags and tracestate; the remote span becomes the parent.
func FromRemote(rc RemoteContext) Correlation {
	return Correlation{
		TraceID:    rc.TraceID,
		SpanID:     newSpanID(),
		ParentID:   rc.SpanID,
		Flags:      rc.Flags,
		TraceState: rc.Tracestate,
		Remote:     true,
	}
}

type correlationKey struct{}

// remoteParent is what ContextWithRemoteParent stores: the next span started
// in that context becomes the remote span's child.
type remoteParent struct{ rc RemoteContext }

// ContextWithCorrelation returns ctx carrying c as the current span: spans
// started in it become c's children.
func ContextWithCorrelation(ctx context.Context, c Correlation) context.Context {
	return &correlationContext{Context: ctx, c: c}
}

// correlationContext is context.WithValue(ctx, correlationKey{}, &c) in
// one allocation instead of two (the engine makes one for every turn).
type correlationContext struct {
	context.Context
	c Correlation
}

// Value answers the correlation key with the context's correlation.
func (c *correlationContext) Value(key any) any {
	if key == (correlationKey{}) {
		return &c.c
	}
	return c.Context.Value(key)
}

// ContextWithRemoteParent returns ctx carrying a remote parent: the next span
// started in it keeps the remote trace id, flags and tracestate, takes the
// remote span as its parent and gets a fresh span id.
func ContextWithRemoteParent(ctx context.Context, rc RemoteContext) context.Context {
	return context.WithValue(ctx, correlationKey{}, &remoteParent{rc})
}

// ContextFromHeaders extracts a remote parent from inbound headers (see
// Extract) and returns ctx carrying it. ErrTraceparentNotFound and every
// rejection return ctx unchanged with the error; the caller decides whether
// to start a new root.
func ContextFromHeaders(ctx context.Context, h map[string][]string) (context.Context, error) {
	rc, err := Extract(h)
	if err != nil {
		return ctx, err
	}
	return ContextWithRemoteParent(ctx, rc), nil
}

// FromContext returns the correlation of the current span in ctx. For a
// context that carries only a remote parent it returns the remote span's
// identity (Remote set) so an outbound call can still propagate it.
func FromContext(ctx context.Context) (Correlation, bool) {
	switch v := ctx.Value(correlationKey{}).(type) {
	case *Correlation:
		return *v, true
	case *remoteParent:
		return Correlation{TraceID: v.rc.TraceID, SpanID: v.rc.SpanID, Flags: v.rc.Flags,
			TraceState: v.rc.Tracestate, Remote: true}, true
	}
	return Correlation{}, false
}

// childOf derives the correlation for a new span in ctx: a child of the
// current span, a local child of a remote parent, or a new root. ownEval
// reports that c.Eval is the new root's own copy of ctx's eval ids (not
// shared with anything).
func childOf(ctx context.Context) (c Correlation, ownEval bool) {
	switch v := ctx.Value(correlationKey{}).(type) {
	case *Correlation:
		return v.Child(), false
	case *remoteParent:
		return FromRemote(v.rc), false
	}
	c = NewRoot()
	if ids, ok := EvalFromContext(ctx); ok {
		own := new(EvalIDs)
		*own = ids
		c.Eval = own
		return c, true
	}
	return c, false
}

func newTraceID() TraceID {
	var t TraceID
	for t.IsZero() {
		putUint64(t[:8], rand.Uint64())
		putUint64(t[8:], rand.Uint64())
	}
	return t
}

func newSpanID() SpanID {
	var s SpanID
	for s.IsZero() {
		putUint64(s[:], rand.Uint64())
	}
	return s
}

func putUint64(b []byte, v uint64) {
	_ = b[7]
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}
