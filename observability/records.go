package observability

import (
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"time"
)

// RecordSink is the async delivery path of a process that only publishes
// signals as their JSON records (a worker or `adk eval run --trace-to`
// into ADK_SIGNALS, with no OTLP exporter that needs Signal values). The
// Tracer writes each of its spans' records straight into a pooled buffer,
// without building the Signal, its attribute maps or its measurements:
// exactly the bytes json.Marshal writes for the Signal the struct path
// builds (TestRecords_AreTheStructPathsBytes and FuzzRecords hold it to
// that). Signals it does not write itself (Lifecycle, captured content)
// arrive encoded by EncodeSignal.
type RecordSink interface {
	// EnqueueSignalJSON admits one signal's record or fails fast, never
	// blocking on export. jobID is the record's adk.eval.job_id attribute
	// ("" when it has none). data is never modified afterwards, and the
	// sink may keep it.
	EnqueueSignalJSON(jobID string, data []byte) error
}

// Encoded records are appended straight into 64 KiB chunks shared through
// a pool (per P, so concurrent tracers rarely meet): one allocation per
// ~100 records and no copy. A record's capacity ends with it, so no later
// append can reach into it; a chunk is freed once its records are.
const (
	recordChunk    = 64 << 10
	recordChunkMin = 2 << 10 // start a new chunk below this much room
)

var recordChunks = sync.Pool{New: func() any { return new([]byte) }}

// recordBuf is a chunk taken from the pool to append one record to.
type recordBuf struct {
	ap *[]byte
	a  []byte // the chunk's used part; appends start at len(a)
}

func takeRecordBuf() recordBuf {
	ap := recordChunks.Get().(*[]byte)
	a := *ap
	if cap(a)-len(a) < recordChunkMin {
		a = make([]byte, 0, recordChunk)
	}
	return recordBuf{ap: ap, a: a}
}

// done returns the record b (r.a with one record appended) and gives the
// chunk back. A record that outgrew the chunk is copied out of b's new
// array, and the chunk is kept as it was.
func (r recordBuf) done(b []byte) []byte {
	var out []byte
	a := r.a
	if cap(b) == cap(a) { // in the chunk
		out, a = b[len(a):len(b):len(b)], b
	} else {
		out = append([]byte(nil), b[len(a):]...)
	}
	*r.ap = a
	recordChunks.Put(r.ap)
	return out
}

// giveBack returns the chunk unchanged (the record was not kept).
func (r recordBuf) giveBack() {
	*r.ap = r.a
	recordChunks.Put(r.ap)
}

// EncodeSignal returns json.Marshal(s): spans and envelopes through
// AppendSpanJSON and AppendEnvelopeJSON into the shared record chunks,
// anything they decline (and other Signal types) through json.Marshal.
// The result is never modified afterwards.
func EncodeSignal(s Signal) ([]byte, error) {
	switch x := s.(type) {
	case *SpanSignal:
		if x == nil {
			return json.Marshal(s)
		}
	case *Envelope:
		if x == nil {
			return json.Marshal(s)
		}
	default:
		return json.Marshal(s)
	}
	r := takeRecordBuf()
	var b []byte
	var ok bool
	switch x := s.(type) {
	case *SpanSignal:
		b, ok = AppendSpanJSON(r.a, x)
	case *Envelope:
		b, ok = AppendEnvelopeJSON(r.a, x)
	}
	if !ok {
		r.giveBack()
		return json.Marshal(s)
	}
	return r.done(b), nil
}

// SignalJobID is s's adk.eval.job_id attribute, "" when it has none.
func SignalJobID(s Signal) string {
	var a Attributes
	switch x := s.(type) {
	case *SpanSignal:
		if x != nil {
			a = x.Attributes
		}
	case *Envelope:
		if x != nil {
			a = x.Metadata.Attributes
		}
	}
	id, _ := a[AttrEvalJobID].(string)
	return id
}

// The direct path. Each writer below mirrors one struct builder of
// tracer.go (the head fields come from the same spanHead/envelopeHead;
// the attribute choice is spelled a second time, over recAttrs instead of
// a map) and writes the bytes AppendSpanJSON or AppendEnvelopeJSON writes
// for that builder's Signal.

// recAttr is one attribute of a record: the value types a tracer's own
// attributes have, kept small (recAttrs lives on the traced goroutine's
// stack).
type recAttr struct {
	k string
	s string // recString
	n int64  // recInt; recFloat: the float's bits
	t recAttrType
}

type recAttrType uint8

const (
	recString recAttrType = iota
	recInt
	recFloat
	recFinishReasons
)

// maxRecordAttrs bounds a record's attributes: an ended model span's are
// the most (operation, mapping version, provider, request model, four eval
// ids, response model and id, four usage counters, finish reasons,
// error.type).
const maxRecordAttrs = 16

// recAttrs collects a record's attributes on the stack.
type recAttrs struct {
	a [maxRecordAttrs]recAttr
	n int
	// finishReasons of recFinishReasons, filtered as they are written.
	finishReasons []string
}

func (l *recAttrs) str(k, v string) {
	l.a[l.n] = recAttr{k: k, s: v}
	l.n++
}

// text is setText.
func (l *recAttrs) text(k, v string, limit int) {
	if v != "" && len(v) <= limit {
		l.str(k, v)
	}
}

// count is setCount.
func (l *recAttrs) count(k string, n int64) {
	if n >= 0 {
		l.a[l.n] = recAttr{k: k, n: n, t: recInt}
		l.n++
	}
}

func (l *recAttrs) float(k string, f float64) {
	l.a[l.n] = recAttr{k: k, n: int64(math.Float64bits(f)), t: recFloat}
	l.n++
}

// eval is evalValues.set.
func (l *recAttrs) eval(ids *[4]string) {
	for i, s := range ids {
		if s != "" {
			l.str(evalKeys[i], s)
		}
	}
}

// appendJSON appends the attributes as json.Marshal writes a map of them:
// sorted by key (keys are unique), HTML-safe strings.
func (l *recAttrs) appendJSON(b []byte) []byte {
	var idx [maxRecordAttrs]uint8
	for i := range l.n {
		idx[i] = uint8(i)
		for j := i; j > 0 && l.a[idx[j]].k < l.a[idx[j-1]].k; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	b = append(b, '{')
	for i := range l.n {
		if i > 0 {
			b = append(b, ',')
		}
		a := &l.a[idx[i]]
		b = appendHTMLString(b, a.k)
		b = append(b, ':')
		switch a.t {
		case recString:
			b = appendHTMLString(b, a.s)
		case recInt:
			b = strconv.AppendInt(b, a.n, 10)
		case recFloat:
			b, _ = appendJSONFloat(b, math.Float64frombits(uint64(a.n))) // finite: the writers check
		case recFinishReasons:
			b = appendFinishReasons(b, l.finishReasons)
		}
	}
	return append(b, '}')
}

// startAttrs mirrors startAttributes.
func (s *Span) startAttrs(l *recAttrs) {
	l.str(AttrOperationName, s.op)
	l.str(MappingVersionKey, SemconvVersion)
	switch s.kind {
	case KindModel:
		l.text(AttrProviderName, s.provider, maxProviderBytes)
		l.text(AttrRequestModel, s.corr.Model, maxAttrValueBytes)
	case KindTool:
		l.text(AttrToolName, s.corr.Tool, maxAttrValueBytes)
		l.text(AttrToolCallID, s.corr.CallID, maxAttrValueBytes)
	}
	l.eval(&s.ids.evalIDs)
}

// endAttrs mirrors endAttributes.
func (s *Span) endAttrs(l *recAttrs, e *spanEnd) {
	s.startAttrs(l)
	if s.kind == KindModel {
		out := &e.out
		l.text(AttrResponseModel, out.ResponseModel, maxAttrValueBytes)
		l.text(AttrResponseID, out.ResponseID, maxAttrValueBytes)
		if u := out.Usage; u != nil {
			l.count(AttrInputTokens, u.InputTokens)
			l.count(AttrOutputTokens, u.OutputTokens)
			l.count(AttrCacheReadInput, u.CacheReadTokens)
			l.count(AttrReasonTokens, u.ReasoningTokens)
		}
		for _, r := range out.FinishReasons {
			if finishReasonKept(r) {
				l.a[l.n] = recAttr{k: AttrFinishReasons, t: recFinishReasons}
				l.n++
				l.finishReasons = out.FinishReasons
				break
			}
		}
	}
	if e.errType != "" {
		l.str(AttrErrorType, e.errType)
	}
}

// appendFinishReasons writes the list endAttributes keeps of rs.
func appendFinishReasons(b []byte, rs []string) []byte {
	b = append(b, '[')
	n := 0
	for _, r := range rs {
		if n == maxFinishReasons {
			break
		}
		if finishReasonKept(r) {
			if n > 0 {
				b = append(b, ',')
			}
			b = appendHTMLString(b, r)
			n++
		}
	}
	return append(b, ']')
}

// envelopeAttrs mirrors the attributes of Span.envelope.
func (s *Span) envelopeAttrs(l *recAttrs) {
	ids := s.ids
	if ids.workflowID != "" {
		l.str("workflow_id", ids.workflowID)
	}
	if ids.workflowKind != "" {
		l.str("workflow_kind", ids.workflowKind)
	}
	if ids.nodeID != "" {
		l.str("node_id", ids.nodeID)
	}
	l.eval(&ids.evalIDs)
}

// appendStartSpanRecord writes startSignal's record.
func (s *Span) appendStartSpanRecord(b []byte) []byte {
	h := s.spanHead(PhaseStart)
	b = AppendSpanHead(b, &h)
	var l recAttrs
	s.startAttrs(&l)
	return append(l.appendJSON(b), '}')
}

// appendEndSpanRecord writes endSignal's record.
func (s *Span) appendEndSpanRecord(b []byte, e *spanEnd) []byte {
	h := s.spanHead(PhaseEnd)
	d := int64(e.dur)
	h.EndTimeUnixNano = h.StartTimeUnixNano + d
	h.DurationNano = &d
	h.Status = e.status
	b = AppendSpanHead(b, &h)
	var l recAttrs
	s.endAttrs(&l, e)
	return append(l.appendJSON(b), '}')
}

// appendEnvelopeRecord writes an envelope with the measurements m (nil:
// none) and the attributes l.
func (s *Span) appendEnvelopeRecord(b []byte, event string, tsMS int64, m []int64Pair, l *recAttrs) []byte {
	e := s.envelopeHead(event, tsMS)
	b = appendEnvelopeHead(b, &e)
	if m == nil {
		b = append(b, "null"...)
	} else {
		b = appendInt64Pairs(b, m)
	}
	b = appendEnvelopeMetadata(b, &e.Metadata)
	if l.n > 0 {
		b = append(b, `,"attributes":`...)
		b = l.appendJSON(b)
	}
	return append(b, `},"content_captured":false}`...)
}

// appendStartEnvelopeRecord writes startEnvelope's record (no content).
func (s *Span) appendStartEnvelopeRecord(b []byte) []byte {
	var l recAttrs
	s.envelopeAttrs(&l)
	m := [2]int64Pair{{"system_time", s.start.UnixNano()}, {"monotonic_time", int64(s.start.Sub(s.t.epoch))}}
	return s.appendEnvelopeRecord(b, lifecycleEvent(s.kind, "start"), s.start.UnixMilli(), m[:], &l)
}

// appendEndEnvelopeRecord writes endEnvelope's record (no content).
func (s *Span) appendEndEnvelopeRecord(b []byte, e *spanEnd) []byte {
	event := lifecycleEvent(s.kind, "stop")
	if e.status == StatusError {
		event = lifecycleEvent(s.kind, "exception")
	}
	var l recAttrs
	s.envelopeAttrs(&l)
	l.str("status", e.status)
	if e.errType != "" {
		l.str(AttrErrorType, e.errType)
	}
	m := [2]int64Pair{{"duration", int64(e.dur)}, {"duration_ms", e.dur.Milliseconds()}}
	return s.appendEnvelopeRecord(b, event, e.now.UnixMilli(), m[:], &l)
}

// appendEvaluationRecord writes evaluationEnvelope's record (the eval
// ids, never the span's workflow metadata).
func (s *Span) appendEvaluationRecord(b []byte, r *EvaluationResult, now time.Time) []byte {
	var l recAttrs
	l.eval(&s.ids.evalIDs)
	l.text(AttrEvaluationName, r.Name, maxAttrValueBytes)
	if r.Label != "" && len(r.Label) <= maxAttrValueBytes {
		l.str(AttrEvaluationScoreLabel, r.Label)
	}
	if finite(r.Score) {
		l.float(AttrEvaluationScoreValue, r.Score)
	}
	return s.appendEnvelopeRecord(b, EventEvaluationResult, now.UnixMilli(), nil, &l)
}
