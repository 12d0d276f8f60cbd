package observability

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/internal/secrets"
)

// Delivery phases reported in DeliveryFailure.Phase.
const (
	PhaseStartSpan  = "start_span"
	PhaseFinishSpan = "finish_span"
	PhaseLifecycle  = "lifecycle"
)

// MaxCapturedContentBytes bounds captured content (serialized); larger
// content degrades the envelope to metadata-only.
const MaxCapturedContentBytes = 256 << 10

// AsyncSink is the bounded async delivery path (the signal bus): Enqueue
// admits a signal or fails fast (queue full); it never blocks on export.
type AsyncSink interface {
	Enqueue(s Signal) error
}

// Config configures a Tracer. The zero Config records metrics only.
type Config struct {
	// Exporters run synchronously, in order, for every signal. The whole
	// list is validated by New, before any export.
	Exporters []ExporterDescriptor
	// Async, when set, receives every signal instead of sync exporters
	// (setting both is ErrAsyncWithExporters).
	Async AsyncSink
	// Records, when set, receives every signal as its JSON record
	// instead (exactly json.Marshal's bytes of the Signal), which the
	// tracer writes without building the Signal: the path of a process
	// that only publishes. Exclusive with Async and Exporters.
	Records RecordSink
	// AsyncFailurePolicy decides an admission failure of Async or
	// Records: FailOpen (default) counts it as dropped, FailClosed makes
	// it a delivery error.
	AsyncFailurePolicy FailurePolicy
	// CaptureContent enables secret-pruned content capture in v1
	// envelopes. Off by default; content never becomes a span attribute.
	CaptureContent bool
	// Metrics receives the operation metrics; nil creates a private one.
	Metrics *Metrics
	// OnDeliveryFailure, when set, is called for every failed delivery,
	// with structural fields only. It must not block.
	OnDeliveryFailure func(DeliveryFailure)
}

// DeliveryFailure reports a signal that did not reach an exporter or the
// async sink. It is a diagnostic, never the operation's error.
type DeliveryFailure struct {
	Phase      string // PhaseStartSpan or PhaseFinishSpan
	Operation  string // gen-ai operation
	ExporterID string // "" for the async sink
	Reason     string // structural tag
	TraceID    string
	SpanID     string
}

// Tracer is the Observer that emits correlated v1 envelopes and v2 spans
// and records the operation metrics. It owns the goroutines that run sync
// exporters; Close waits for them.
type Tracer struct {
	cfg      Config
	metrics  *Metrics
	sync     *syncDelivery
	emitting bool
	// direct: the tracer writes its spans' records itself (Records set,
	// no content to capture).
	direct bool
	// recycled is Records when it gives records back (their chunks are
	// then written again).
	recycled RecycledRecordSink
	epoch    time.Time
	wg       sync.WaitGroup
}

var _ Observer = (*Tracer)(nil)

// New validates cfg and returns a Tracer.
func New(cfg Config) (*Tracer, error) {
	if (cfg.Async != nil || cfg.Records != nil) && len(cfg.Exporters) > 0 {
		return nil, ErrAsyncWithExporters
	}
	if cfg.Async != nil && cfg.Records != nil {
		return nil, ErrTwoSinks
	}
	if p := cfg.AsyncFailurePolicy; p != "" && p != FailOpen && p != FailClosed {
		return nil, &DescriptorError{Index: -1, Reason: "invalid_failure_policy"}
	}
	if err := ValidateExporters(cfg.Exporters); err != nil {
		return nil, err
	}
	t := &Tracer{cfg: cfg, metrics: cfg.Metrics, epoch: time.Now()}
	t.cfg.Exporters = append([]ExporterDescriptor(nil), cfg.Exporters...)
	if t.metrics == nil {
		m, err := NewMetrics(MetricsConfig{})
		if err != nil {
			return nil, err
		}
		t.metrics = m
	}
	t.sync = &syncDelivery{exporters: t.cfg.Exporters, wg: &t.wg}
	t.emitting = cfg.Async != nil || cfg.Records != nil || len(cfg.Exporters) > 0
	t.direct = cfg.Records != nil && !cfg.CaptureContent
	t.recycled, _ = cfg.Records.(RecycledRecordSink)
	return t, nil
}

// Metrics returns the tracer's metrics registry.
func (t *Tracer) Metrics() *Metrics { return t.metrics }

// Close waits until every exporter goroutine the tracer started has
// returned (an abandoned, timed-out export runs on a cancelled context), or
// ctx ends. It does not close the exporters: their builder owns them.
func (t *Tracer) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Span is one observed operation. End it exactly once.
//
// Its fields are what every span needs, its operation derived from its
// kind (operation): a tracer that emits nothing (a local eval run without
// an exporter traces every sample for its trace ids and metrics) starts
// four spans a sample, and a Span in the 288-byte size class rather than
// the 416-byte one was 0.5 KB less fresh memory per sample.
type Span struct {
	ctx      spanContext
	t        *Tracer
	corr     Correlation
	kind     Kind
	provider string
	start    time.Time
	ended    atomic.Bool
	stream   bool
	ids      *spanIDs // only when emitting
}

// newEmittingSpanAlloc is a Span with its formatted ids, which only an
// emitting tracer's signals use, in one allocation.
type newEmittingSpanAlloc struct {
	sp  Span
	ids spanIDs
}

// operation is the span's gen-ai operation name and span kind.
func (s *Span) operation() (op, spanKind string) {
	if op, spanKind = operationOf(s.kind); op == "" {
		op, spanKind = string(s.kind), SpanKindInternal
	}
	return op, spanKind
}

// spanIDs is what every signal of an emitting span repeats, formatted
// once per span rather than once per signal: a traced sample emits five
// signals, and formatting the ids and boxing the eval ids for each was
// most of a fleet worker's tracing allocations.
type spanIDs struct {
	trace, span, parent string // hex; parent "" for a root
	// evalIDs are the mapped eval ids ("": not mapped), in evalKeys'
	// order; eval the same as attribute values, boxed only for the
	// struct path (the record writers take the strings).
	evalIDs [4]string
	eval    evalValues
	// The observation's workflow metadata (v1 attributes).
	workflowID, workflowKind, nodeID string
	// attrs are the start attributes (the struct path only).
	attrs Attributes
}

// evalValues are a span's eval ids as attribute values, boxed once; a nil
// slot is an id that is not mapped (empty or oversized).
type evalValues [4]any

// evalKeys are the attribute keys of evalValues' slots.
var evalKeys = [4]string{AttrEvalJobID, AttrEvalCaseID, AttrEvalSampleID, AttrEvalWorkerID}

// mappedEvalIDs are the eval ids a span's attributes carry: not empty,
// not oversized.
func mappedEvalIDs(ids *EvalIDs) (v [4]string) {
	if ids == nil {
		return v
	}
	for i, s := range [4]string{ids.JobID, ids.CaseID, ids.SampleID, ids.WorkerID} {
		if s != "" && len(s) <= maxAttrValueBytes {
			v[i] = s
		}
	}
	return v
}

func newEvalValues(ids *[4]string) (v evalValues) {
	for i, s := range ids {
		if s != "" {
			v[i] = s
		}
	}
	return v
}

// len is the number of mapped ids.
func (v *evalValues) len() (n int) {
	for _, x := range v {
		if x != nil {
			n++
		}
	}
	return n
}

// set puts the mapped ids into a (EvalIDs.setAttributes, without boxing).
func (v *evalValues) set(a Attributes) {
	for i, x := range v {
		if x != nil {
			a[evalKeys[i]] = x
		}
	}
}

// newSpanIDs formats c's ids; boxed also boxes the eval ids (the struct
// path's attribute values).
func newSpanIDs(c *Correlation, boxed bool) *spanIDs {
	ids := new(spanIDs)
	ids.fill(c, boxed)
	return ids
}

// fill formats c's ids into ids (newSpanIDs).
func (ids *spanIDs) fill(c *Correlation, boxed bool) {
	// The three ids are formatted into one string (one allocation, not
	// three) and sliced.
	var b [64]byte
	hexEncode(b[:32], c.TraceID[:])
	hexEncode(b[32:48], c.SpanID[:])
	n := 48
	if !c.ParentID.IsZero() {
		hexEncode(b[48:], c.ParentID[:])
		n = 64
	}
	hex := string(b[:n])
	ids.trace, ids.span, ids.parent = hex[:32], hex[32:48], hex[48:]
	ids.evalIDs = mappedEvalIDs(c.Eval)
	if boxed {
		ids.eval = newEvalValues(&ids.evalIDs)
	}
}

// spanContext is the context a span returns: it lives inside the Span so
// starting a span costs one allocation for both.
type spanContext struct {
	context.Context
	sp *Span
}

// spanKey finds the Span that started a context (EvaluationResult reuses
// its formatted ids).
type spanKey struct{}

// Value answers the correlation key with the span's correlation.
func (c *spanContext) Value(key any) any {
	switch key {
	case correlationKey{}:
		return &c.sp.corr
	case spanKey{}:
		return c.sp
	}
	return c.Context.Value(key)
}

// Start implements Observer. A delivery failure of the start signal cannot
// reach the runtime through this interface; it is reported through
// OnDeliveryFailure and the delivery-failure counter. Callers that want to
// fail closed before running the operation use Begin.
func (t *Tracer) Start(ctx context.Context, o Observation) (context.Context, func(Outcome)) {
	sp := t.newSpan(ctx, &o)
	_ = sp.emitStart(ctx, o.Content)
	return &sp.ctx, sp.end
}

// Begin starts a span as a child of the span (or remote parent) in ctx, or
// as a new root. It returns the span's context, the span, and a non-nil
// error only when a fail-closed exporter or a closed async admission refused
// the start signal: the span is live regardless, and a caller that fails
// closed ends it with the error instead of running the operation.
func (t *Tracer) Begin(ctx context.Context, o Observation) (context.Context, *Span, error) {
	sp := t.newSpan(ctx, &o)
	err := sp.emitStart(ctx, o.Content)
	return &sp.ctx, sp, err
}

// newSpan makes the span Begin starts. It is not inlined so that its
// frame is gone before the start records are written: a worker's runner
// goroutines run those at the deepest point of a task, and every
// goroutine stack the GC shrank grows back there.
//
//go:noinline
func (t *Tracer) newSpan(ctx context.Context, o *Observation) *Span {
	var sp *Span
	var ids *spanIDs
	if t.emitting {
		e := new(newEmittingSpanAlloc)
		sp, ids = &e.sp, &e.ids
	} else {
		sp = new(Span)
	}
	*sp = Span{t: t, kind: o.Kind, provider: o.Provider, stream: o.Stream, start: o.Start}
	var ownEval bool
	sp.corr, ownEval = childOf(ctx)
	applyObservation(&sp.corr, o, ownEval)
	if sp.start.IsZero() {
		sp.start = time.Now()
	}
	sp.ctx = spanContext{Context: ctx, sp: sp}
	if t.emitting {
		sp.ids = ids
		sp.ids.fill(&sp.corr, !t.direct)
		sp.ids.workflowID, sp.ids.workflowKind, sp.ids.nodeID = o.WorkflowID, o.WorkflowKind, o.NodeID
	}
	return sp
}

// emitStart delivers the start signals of a span newSpan made.
func (s *Span) emitStart(ctx context.Context, content any) error {
	switch t := s.t; {
	case !t.emitting:
		return nil
	case t.direct:
		return s.startRecords()
	}
	return s.startSignals(ctx, content)
}

// startRecords writes and delivers the start records (the direct path).
func (s *Span) startRecords() error {
	r := takeRecordBuf()
	err := s.t.deliverRecord(s, PhaseStartSpan, r.done(s.appendStartEnvelopeRecord(r.a)))
	if err == nil {
		r = takeRecordBuf()
		err = s.t.deliverRecord(s, PhaseStartSpan, r.done(s.appendStartSpanRecord(r.a)))
	}
	return err
}

// startSignals builds and delivers the start signals (the struct path).
func (s *Span) startSignals(ctx context.Context, content any) error {
	op, _ := s.operation()
	s.ids.attrs = startAttributes(op, s.kind, &s.corr, s.provider, &s.ids.eval)
	return s.t.deliver(ctx, s, PhaseStartSpan, s.startEnvelope(content), s.startSignal())
}

// Correlation returns the span's correlation context.
func (s *Span) Correlation() Correlation { return s.corr }

func (s *Span) end(out Outcome) { _ = s.End(out) }

// End finishes the span: records the operation metrics and delivers the end
// signals. A second call does nothing. The returned error is a fail-closed
// delivery failure, already reported; the operation's own result stands.
func (s *Span) End(out Outcome) error {
	if !s.ended.CompareAndSwap(false, true) {
		return nil
	}
	e := spanEnd{out: out, now: time.Now(), status: StatusOK}
	e.dur = e.now.Sub(s.start)
	if e.dur < 0 {
		e.dur = 0
	}
	if out.Err != nil {
		e.status, e.errType = StatusError, errorType(&out)
	}
	s.t.metrics.RecordOperation(s.labels(e.status, e.errType), e.dur)
	if !s.t.emitting {
		return nil
	}
	if s.t.direct {
		return s.endRecords(&e)
	}
	return s.endSignals(e)
}

// endRecords writes and delivers the end records (the direct path).
func (s *Span) endRecords(e *spanEnd) error {
	r := takeRecordBuf()
	err := s.t.deliverRecord(s, PhaseFinishSpan, r.done(s.appendEndSpanRecord(r.a, e)))
	if err == nil {
		r = takeRecordBuf()
		err = s.t.deliverRecord(s, PhaseFinishSpan, r.done(s.appendEndEnvelopeRecord(r.a, e)))
	}
	return err
}

// endSignals builds and delivers the end signals (the struct path).
func (s *Span) endSignals(e spanEnd) error {
	return s.t.deliver(context.Background(), s, PhaseFinishSpan, s.endSignal(&e), s.endEnvelope(&e))
}

// spanEnd is how a span ended, as End measured it.
type spanEnd struct {
	out             Outcome
	now             time.Time
	dur             time.Duration
	status, errType string
}

func (s *Span) labels(status, errType string) OperationLabels {
	op, _ := s.operation()
	l := OperationLabels{Operation: op, ErrorType: errType, Status: status, Stream: "false"}
	switch s.kind {
	case KindModel:
		if len(s.provider) <= maxProviderBytes {
			l.Provider = s.provider
		}
		if len(s.corr.Model) <= maxAttrValueBytes {
			l.Model = s.corr.Model
		}
		if s.stream {
			l.Stream = "true"
		}
	case KindTool:
		if len(s.corr.Tool) <= maxAttrValueBytes {
			l.Tool = s.corr.Tool
		}
	}
	return l
}

// applyObservation fills the child's correlation from the observation. Run
// lineage already inherited from the parent is never overridden; agent and
// model may be; a tool span names exactly its own tool call. ownEval: c.Eval
// is c's own (a new root's), filled in place rather than copied.
func applyObservation(c *Correlation, o *Observation, ownEval bool) {
	if c.RunID == "" {
		c.RunID = o.RunID
	}
	if c.InvocationID == "" {
		c.InvocationID = o.InvocationID
	}
	if c.SessionID == "" {
		c.SessionID = o.SessionID
	}
	if o.Agent != "" {
		c.Agent = o.Agent
	}
	if o.Model != "" {
		c.Model = o.Model
	}
	if o.Kind == KindTool {
		c.Tool, c.CallID = o.Tool, o.CallID
	}
	if o.Eval != nil {
		if c.Eval == nil {
			c.Eval = o.Eval
		} else { // fill what the parent (a worker's context) left empty
			e := c.Eval
			if !ownEval {
				cp := *c.Eval
				e = &cp
			}
			if e.CaseID == "" {
				e.CaseID = o.Eval.CaseID
			}
			if e.SampleID == "" {
				e.SampleID = o.Eval.SampleID
			}
			if e.JobID == "" {
				e.JobID = o.Eval.JobID
			}
			if e.WorkerID == "" {
				e.WorkerID = o.Eval.WorkerID
			}
			c.Eval = e
		}
	}
}

// errorType derives the stable error.type tag: the outcome's own, the
// error's Code(), timeout/cancelled for context errors, else "unknown".
// The error's text is never used.
func errorType(out *Outcome) string {
	if out.ErrorType != "" {
		return safeTag(out.ErrorType)
	}
	var c coder
	switch {
	case errors.Is(out.Err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(out.Err, context.Canceled):
		return "cancelled"
	case errors.As(out.Err, &c):
		return safeTag(c.Code())
	}
	return unknownErrorType
}

// safeTag keeps tags that look like identifiers; anything else (a message,
// a path, a secret) becomes "unknown".
func safeTag(s string) string {
	if len(s) == 0 || len(s) > maxErrorTypeBytes {
		return unknownErrorType
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == ':') {
			return unknownErrorType
		}
	}
	return s
}

// deliver sends the signals of one boundary in order, stopping at the first
// fail-closed failure. Every failure is reported.
func (t *Tracer) deliver(ctx context.Context, sp *Span, phase string, sigs ...Signal) error {
	for _, sig := range sigs {
		if err := t.deliverOne(ctx, sp, phase, sig); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tracer) deliverOne(ctx context.Context, sp *Span, phase string, sig Signal) error {
	if t.cfg.Records != nil {
		r, err := encodeRecord(sig)
		if err != nil {
			return t.asyncFailure(sp, phase, err)
		}
		return t.enqueueRecord(sp, phase, SignalJobID(sig), r)
	}
	if t.cfg.Async != nil {
		if err := t.cfg.Async.Enqueue(sig); err != nil {
			return t.asyncFailure(sp, phase, err)
		}
		return nil
	}
	statuses, err := t.sync.deliver(ctx, sig)
	for _, st := range statuses {
		if !st.OK {
			t.reportFailure(sp, phase, st.ID, st.Reason)
		}
	}
	return err
}

// deliverRecord hands a record the tracer wrote to the record sink; every
// such record carries the span's eval ids.
func (t *Tracer) deliverRecord(sp *Span, phase string, r Record) error {
	return t.enqueueRecord(sp, phase, sp.ids.evalIDs[0], r)
}

// enqueueRecord hands r to the record sink: as a Record to a
// RecycledRecordSink (which releases it once it is read; a refused one is
// released here), else as bytes that are never released.
func (t *Tracer) enqueueRecord(sp *Span, phase, jobID string, r Record) error {
	var err error
	if t.recycled != nil {
		if err = t.recycled.EnqueueSignalRecord(jobID, r); err != nil {
			r.Release()
		}
	} else {
		err = t.cfg.Records.EnqueueSignalJSON(jobID, r.Data)
	}
	if err != nil {
		return t.asyncFailure(sp, phase, err)
	}
	return nil
}

// asyncFailure reports a signal the async or record sink refused and
// returns the error a fail-closed policy makes of it.
func (t *Tracer) asyncFailure(sp *Span, phase string, err error) error {
	reason, _ := exportReason(err)
	if reason == exportReasonFailed {
		reason = deliveryReasonDropped
	}
	t.reportFailure(sp, phase, "", reason)
	if t.cfg.AsyncFailurePolicy == FailClosed {
		return &ExporterFailedError{ID: "async", Reason: reason}
	}
	return nil
}

func (t *Tracer) reportFailure(sp *Span, phase, exporterID, reason string) {
	t.metrics.RecordDeliveryFailure(reason)
	if t.cfg.OnDeliveryFailure != nil {
		op, _ := sp.operation()
		t.cfg.OnDeliveryFailure(DeliveryFailure{
			Phase: phase, Operation: op, ExporterID: exporterID, Reason: reason,
			TraceID: sp.corr.TraceID.String(), SpanID: sp.corr.SpanID.String(),
		})
	}
}

// spanHead is a span signal's fields but its end and attributes: the
// struct path and the record writers share it.
func (s *Span) spanHead(phase string) SpanSignal {
	op, spanKind := s.operation()
	return SpanSignal{
		Schema:            SpanSchemaVersion,
		Signal:            "span",
		Phase:             phase,
		Name:              spanName(op),
		Kind:              spanKind,
		TraceID:           s.ids.trace,
		SpanID:            s.ids.span,
		ParentSpanID:      s.ids.parent,
		TraceFlags:        int(s.corr.Flags),
		TraceState:        s.corr.TraceState,
		StartTimeUnixNano: s.start.UnixNano(),
	}
}

func (s *Span) startSignal() *SpanSignal {
	sig := new(SpanSignal)
	*sig = s.spanHead(PhaseStart)
	sig.Attributes = s.ids.attrs
	return sig
}

func (s *Span) endSignal(e *spanEnd) *SpanSignal {
	sig := new(SpanSignal)
	*sig = s.spanHead(PhaseEnd)
	d := int64(e.dur)
	sig.EndTimeUnixNano = sig.StartTimeUnixNano + d
	sig.DurationNano = &d
	sig.Status = e.status
	sig.Attributes = endAttributes(s.ids.attrs, s.kind, &e.out, e.errType)
	return sig
}

// envelopeHead is a v1 envelope's fields but its measurements and
// attributes: the struct path and the record writers share it.
func (s *Span) envelopeHead(event string, tsMS int64) Envelope {
	c, ids := &s.corr, s.ids
	return Envelope{
		Schema:      EnvelopeSchemaVersion,
		Event:       event,
		TimestampMS: tsMS,
		Metadata: EnvelopeMetadata{
			RunID: c.RunID, InvocationID: c.InvocationID, Session: c.SessionID,
			Agent: c.Agent, Model: c.Model, Tool: c.Tool, CallID: c.CallID,
			TraceID: ids.trace, SpanID: ids.span, ParentID: ids.parent,
			TraceFlags: int(c.Flags), TraceState: c.TraceState,
		},
	}
}

// envelope builds the span's v1 envelope; extra is the room its caller
// needs in the attributes beyond the workflow and eval ids.
func (s *Span) envelope(event string, extra int, tsMS int64) *Envelope {
	ids := s.ids
	e := new(Envelope)
	*e = s.envelopeHead(event, tsMS)
	n := ids.eval.len() + extra
	for _, v := range [3]string{ids.workflowID, ids.workflowKind, ids.nodeID} {
		if v != "" {
			n++
		}
	}
	if n == 0 {
		return e
	}
	attrs := make(Attributes, n)
	if ids.workflowID != "" {
		attrs["workflow_id"] = ids.workflowID
	}
	if ids.workflowKind != "" {
		attrs["workflow_kind"] = ids.workflowKind
	}
	if ids.nodeID != "" {
		attrs["node_id"] = ids.nodeID
	}
	ids.eval.set(attrs)
	e.Metadata.Attributes = attrs
	return e
}

func (s *Span) startEnvelope(content any) *Envelope {
	e := s.envelope(lifecycleEvent(s.kind, "start"), 0, s.start.UnixMilli())
	e.Measurements = map[string]int64{"system_time": s.start.UnixNano(), "monotonic_time": int64(s.start.Sub(s.t.epoch))}
	s.t.capture(e, content)
	return e
}

func (s *Span) endEnvelope(end *spanEnd) *Envelope {
	event := lifecycleEvent(s.kind, "stop")
	if end.status == StatusError {
		event = lifecycleEvent(s.kind, "exception")
	}
	extra := 1
	if end.errType != "" {
		extra++
	}
	e := s.envelope(event, extra, end.now.UnixMilli())
	e.Measurements = map[string]int64{"duration": int64(end.dur), "duration_ms": end.dur.Milliseconds()}
	if e.Metadata.Attributes == nil {
		e.Metadata.Attributes = make(Attributes, extra)
	}
	e.Metadata.Attributes["status"] = constValue(end.status)
	if end.errType != "" {
		e.Metadata.Attributes[AttrErrorType] = end.errType
	}
	s.t.capture(e, end.out.Content)
	return e
}

// lifecycleEvent is "adk.<kind>.<what>", interned for the tracer's own
// kinds (every span emits two).
func lifecycleEvent(k Kind, what string) string {
	switch what {
	case "start":
		switch k {
		case KindRun:
			return "adk.run.start"
		case KindAgent:
			return "adk.agent.start"
		case KindModel:
			return "adk.model.start"
		case KindTool:
			return "adk.tool.start"
		case KindWorkflow:
			return "adk.workflow.start"
		case KindEval:
			return "adk.eval.start"
		}
	case "stop":
		switch k {
		case KindRun:
			return "adk.run.stop"
		case KindAgent:
			return "adk.agent.stop"
		case KindModel:
			return "adk.model.stop"
		case KindTool:
			return "adk.tool.stop"
		case KindWorkflow:
			return "adk.workflow.stop"
		case KindEval:
			return "adk.eval.stop"
		}
	}
	return "adk." + string(k) + "." + what
}

// capture puts secret-pruned content into e when capture is enabled. Content
// that is not plain JSON data (channels, functions, cycles, ...) or is too
// large degrades the envelope to metadata-only with capture_error.
func (t *Tracer) capture(e *Envelope, content any) {
	if !t.cfg.CaptureContent || content == nil {
		return
	}
	b, err := json.Marshal(content)
	if err == nil && len(b) > MaxCapturedContentBytes {
		err = errors.New("too large")
	}
	var plain any
	if err == nil {
		err = json.Unmarshal(b, &plain)
	}
	if err != nil {
		if e.Metadata.Attributes == nil {
			e.Metadata.Attributes = Attributes{}
		}
		e.Metadata.Attributes[captureErrorKey] = unsupportedContent
		return
	}
	e.Content = secrets.Prune(plain)
	e.ContentCaptured = true
}
