package observability

import (
	"context"
	"time"
)

// PluginTraceEntry is one plugin's part in a Runner hook call: the
// pipeline's trace entry (plugin id, hook, mode, outcome word).
type PluginTraceEntry struct {
	PluginID string
	Hook     string
	Mode     string
	Outcome  string
}

// Lifecycle is one Runner hook phase: the hook, the pipeline's overall
// outcome (continue|amended|returned|halt|error), how long the plugins took
// and their trace.
type Lifecycle struct {
	Hook        string
	Outcome     string
	Duration    time.Duration
	PluginTrace []PluginTraceEntry
}

// LifecycleObserver is the optional part of an Observer that records Runner
// hook phases as v1 lifecycle envelopes (CONTRACTS §1.4). The runtime calls
// it only when plugins ran.
type LifecycleObserver interface {
	Lifecycle(ctx context.Context, l Lifecycle)
}

var _ LifecycleObserver = (*Tracer)(nil)

// kindLifecycle is the kind of the span a lifecycle envelope is written
// from: its operation, in delivery failures, is "lifecycle".
const kindLifecycle Kind = "lifecycle"

// Lifecycle emits the v1 envelope "adk.lifecycle.<hook>" correlated with the
// span in ctx, with measurement duration_ms and attributes hook, outcome and
// plugin_trace, beside the span's eval and workflow ids (as every envelope
// of the span has them). Delivery failures are reported like any other
// signal's.
func (t *Tracer) Lifecycle(ctx context.Context, l Lifecycle) {
	if !t.emitting {
		return
	}
	c, _ := FromContext(ctx)
	sp := &Span{t: t, corr: c, kind: kindLifecycle}
	sp.ids = newSpanIDs(&c, true)
	e := sp.envelope("adk.lifecycle."+safeTag(l.Hook), 3, time.Now().UnixMilli())
	e.Measurements = map[string]int64{"duration": int64(l.Duration), "duration_ms": l.Duration.Milliseconds()}
	trace := make([]any, len(l.PluginTrace))
	for i, p := range l.PluginTrace {
		trace[i] = map[string]any{"plugin_id": p.PluginID, "hook": p.Hook, "mode": p.Mode, "outcome": p.Outcome}
	}
	// Beside the eval and workflow ids envelope() set: a worker routes a
	// signal to its job's principal by adk.eval.job_id.
	a := e.Metadata.Attributes
	a["hook"], a["outcome"], a["plugin_trace"] = l.Hook, l.Outcome, trace
	_ = t.deliverOne(ctx, sp, PhaseLifecycle, e)
}
