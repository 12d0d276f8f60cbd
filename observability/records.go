package observability

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
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

// RecycledRecordSink is a RecordSink that also gives each record's memory
// back once it no longer reads it, so the tracer writes later records into
// the same memory instead of fresh chunks (a worker's publisher: a record
// is read once, when its batch is encoded). A tracer whose Records sink
// implements it hands every record it writes to EnqueueSignalRecord.
type RecycledRecordSink interface {
	RecordSink
	// EnqueueSignalRecord admits r as EnqueueSignalJSON admits r.Data. On
	// success the sink owns r: it calls r.Release exactly once, after its
	// last read of r.Data. On error the caller still owns r.
	EnqueueSignalRecord(jobID string, r Record) error
}

// Record is one signal's encoded record, usually a slice of a chunk
// shared with other records.
type Record struct {
	// Data is the record's JSON; it ends at its capacity, so appending to
	// it never reaches into another record.
	Data []byte
	c    *recordChunk // nil: Data is its own memory
}

// Release gives r's memory back for later records: after it, r.Data (and
// every copy of it) must not be read, since another record may be written
// over it. Call it at most once per record; a record no one releases is
// only never recycled (its chunk goes to the garbage collector).
func (r Record) Release() {
	if r.c != nil {
		r.c.unref()
	}
}

// Encoded records are appended straight into 64 KiB chunks: one chunk per
// ~100 records and no copy. A record's capacity ends with it, so no later
// append can reach into it. The chunks being appended to sit in a few
// slots (a writer swaps one out, appends one record and swaps it back, so
// concurrent writers rarely meet); a writer takes the first chunk from a
// random slot on, and starts a new chunk only when every slot is empty.
// A chunk counts its references: one for the writers while it is in a
// slot or being appended to, one per record not yet released. It is
// retired (the writers' reference dropped) when it is too full, or when
// every slot was refilled meanwhile. When the count
// reaches zero (retired, and a RecycledRecordSink released all its
// records) the chunk goes to freeChunks and is written again from its
// start. Records of any other sink are never released, so their chunks
// are freed by the garbage collector, as before.
const (
	recordChunkBytes = 64 << 10
	recordChunkMin   = 2 << 10 // start a new chunk below this much room
)

type recordChunk struct {
	b    []byte // the used part; appends start at len(b)
	refs atomic.Int32
}

// recordSlots is the number of chunks being appended to.
const recordSlots = 8

var (
	recordChunks [recordSlots]atomic.Pointer[recordChunk]
	freeChunks   sync.Pool // emptied chunks (*recordChunk), refs 0
)

// unref drops one reference and frees the chunk at the last one.
func (c *recordChunk) unref() {
	switch n := c.refs.Add(-1); {
	case n == 0:
		c.b = c.b[:0]
		if poisonFreedRecords {
			full := c.b[:cap(c.b)]
			for i := range full {
				full[i] = poisonByte
			}
		}
		freeChunks.Put(c)
	case n < 0:
		panic("observability: record released twice")
	}
}

// poisonByte fills a freed chunk in race-enabled builds (poison_race.go),
// so that a record read after its release shows as broken JSON.
const poisonByte = 0xff

// recordBuf is a chunk taken from the pool to append one record to.
type recordBuf struct {
	c    *recordChunk
	a    []byte // the chunk's used part; appends start at len(a)
	slot uint32
}

func takeRecordBuf() recordBuf {
	// Start at a random slot and take the first chunk there is: a writer
	// that found its slot empty (another writer has that chunk out) and
	// started a fresh chunk would retire one of the two at once, holding a
	// single record (concurrent runners did so often enough to allocate
	// about three chunks' worth of memory for every chunk they filled).
	slot := rand.Uint32N(recordSlots)
	var c *recordChunk
	for i := range uint32(recordSlots) {
		s := (slot + i) % recordSlots
		if recordChunks[s].Load() != nil {
			if c = recordChunks[s].Swap(nil); c != nil {
				slot = s
				break
			}
		}
	}
	if c != nil && cap(c.b)-len(c.b) < recordChunkMin {
		c.unref() // retired: the writers' reference
		c = nil
	}
	if c == nil {
		c, _ = freeChunks.Get().(*recordChunk)
		if c == nil {
			c = &recordChunk{b: make([]byte, 0, recordChunkBytes)}
		}
		c.refs.Store(1)
	}
	return recordBuf{c: c, a: c.b, slot: slot}
}

// putBack returns the chunk to its slot, or to another empty one when a
// writer filled that slot meanwhile; it retires the chunk only when every
// slot is full.
func (r recordBuf) putBack() {
	for i := range uint32(recordSlots) {
		s := (r.slot + i) % recordSlots
		if recordChunks[s].Load() == nil && recordChunks[s].CompareAndSwap(nil, r.c) {
			return
		}
	}
	r.c.unref()
}

// done returns the record b (r.a with one record appended) and gives the
// chunk back. A record that outgrew the chunk is copied out of b's new
// array (its own memory), and the chunk is kept as it was.
func (r recordBuf) done(b []byte) Record {
	c := r.c
	if cap(b) != cap(r.a) { // not in the chunk
		r.putBack()
		return Record{Data: append([]byte(nil), b[len(r.a):]...)}
	}
	out := b[len(r.a):len(b):len(b)]
	c.b = b
	c.refs.Add(1)
	r.putBack()
	return Record{Data: out, c: c}
}

// giveBack returns the chunk unchanged (the record was not kept).
func (r recordBuf) giveBack() {
	r.putBack()
}

// EncodeSignal returns json.Marshal(s): spans and envelopes through
// AppendSpanJSON and AppendEnvelopeJSON into the shared record chunks,
// anything they decline (and other Signal types) through json.Marshal.
// The result is never modified afterwards.
func EncodeSignal(s Signal) ([]byte, error) {
	r, err := encodeRecord(s)
	return r.Data, err
}

// encodeRecord is EncodeSignal as a Record (a RecycledRecordSink may
// release it).
func encodeRecord(s Signal) (Record, error) {
	switch x := s.(type) {
	case *SpanSignal:
		if x == nil {
			return marshalRecord(s)
		}
	case *Envelope:
		if x == nil {
			return marshalRecord(s)
		}
	default:
		return marshalRecord(s)
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
		return marshalRecord(s)
	}
	return r.done(b), nil
}

func marshalRecord(s Signal) (Record, error) {
	b, err := json.Marshal(s)
	return Record{Data: b}, err
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
// stack, at the deepest point of a worker's task).
type recAttr struct {
	s string // recString
	n int64  // recInt; recFloat: the float's bits
	k recKey
	t recAttrType
}

// recKey is an attribute key the record writers use: an index into
// recKeyNames.
type recKey uint8

const (
	kOperationName recKey = iota
	kMappingVersion
	kProviderName
	kRequestModel
	kToolName
	kToolCallID
	kEvalJobID
	kEvalCaseID
	kEvalSampleID
	kEvalWorkerID
	kResponseModel
	kResponseID
	kInputTokens
	kOutputTokens
	kCacheReadInput
	kReasonTokens
	kFinishReasons
	kErrorType
	kWorkflowID
	kWorkflowKind
	kNodeID
	kStatus
	kEvaluationName
	kEvaluationScoreLabel
	kEvaluationScoreValue
	numRecKeys
)

var recKeyNames = [numRecKeys]string{
	kOperationName: AttrOperationName, kMappingVersion: MappingVersionKey,
	kProviderName: AttrProviderName, kRequestModel: AttrRequestModel,
	kToolName: AttrToolName, kToolCallID: AttrToolCallID,
	kEvalJobID: AttrEvalJobID, kEvalCaseID: AttrEvalCaseID,
	kEvalSampleID: AttrEvalSampleID, kEvalWorkerID: AttrEvalWorkerID,
	kResponseModel: AttrResponseModel, kResponseID: AttrResponseID,
	kInputTokens: AttrInputTokens, kOutputTokens: AttrOutputTokens,
	kCacheReadInput: AttrCacheReadInput, kReasonTokens: AttrReasonTokens,
	kFinishReasons: AttrFinishReasons, kErrorType: AttrErrorType,
	kWorkflowID: "workflow_id", kWorkflowKind: "workflow_kind", kNodeID: "node_id",
	kStatus: "status", kEvaluationName: AttrEvaluationName,
	kEvaluationScoreLabel: AttrEvaluationScoreLabel, kEvaluationScoreValue: AttrEvaluationScoreValue,
}

// evalRecKeys are evalKeys as recKeys.
var evalRecKeys = [4]recKey{kEvalJobID, kEvalCaseID, kEvalSampleID, kEvalWorkerID}

// recKeyRank orders recKeys as their names sort (json.Marshal's map key
// order), and recKeyJSON is each name quoted as appendHTMLString quotes
// it, with its colon: both computed once.
var (
	recKeyRank [numRecKeys]uint8
	recKeyJSON [numRecKeys]string
)

func init() {
	var order [numRecKeys]recKey
	for i := range order {
		order[i] = recKey(i)
	}
	sort.Slice(order[:], func(i, j int) bool { return recKeyNames[order[i]] < recKeyNames[order[j]] })
	for r, k := range order {
		if r > 0 && recKeyNames[order[r-1]] == recKeyNames[k] {
			panic("observability: duplicate record attribute key " + recKeyNames[k])
		}
		recKeyRank[k] = uint8(r)
		recKeyJSON[k] = string(append(appendHTMLString(nil, recKeyNames[k]), ':'))
	}
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

func (l *recAttrs) str(k recKey, v string) {
	l.a[l.n] = recAttr{k: k, s: v}
	l.n++
}

// text is setText.
func (l *recAttrs) text(k recKey, v string, limit int) {
	if v != "" && len(v) <= limit {
		l.str(k, v)
	}
}

// count is setCount.
func (l *recAttrs) count(k recKey, n int64) {
	if n >= 0 {
		l.a[l.n] = recAttr{k: k, n: n, t: recInt}
		l.n++
	}
}

func (l *recAttrs) float(k recKey, f float64) {
	l.a[l.n] = recAttr{k: k, n: int64(math.Float64bits(f)), t: recFloat}
	l.n++
}

// eval is evalValues.set.
func (l *recAttrs) eval(ids *[4]string) {
	for i, s := range ids {
		if s != "" {
			l.str(evalRecKeys[i], s)
		}
	}
}

// appendJSON appends the attributes as json.Marshal writes a map of them:
// sorted by key (keys are unique), HTML-safe strings.
func (l *recAttrs) appendJSON(b []byte) []byte {
	var idx [maxRecordAttrs]uint8
	for i := range l.n {
		idx[i] = uint8(i)
		for j := i; j > 0 && recKeyRank[l.a[idx[j]].k] < recKeyRank[l.a[idx[j-1]].k]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	b = append(b, '{')
	for i := range l.n {
		if i > 0 {
			b = append(b, ',')
		}
		a := &l.a[idx[i]]
		b = append(b, recKeyJSON[a.k]...)
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
	op, _ := s.operation()
	l.str(kOperationName, op)
	l.str(kMappingVersion, SemconvVersion)
	switch s.kind {
	case KindModel:
		l.text(kProviderName, s.provider, maxProviderBytes)
		l.text(kRequestModel, s.corr.Model, maxAttrValueBytes)
	case KindTool:
		l.text(kToolName, s.corr.Tool, maxAttrValueBytes)
		l.text(kToolCallID, s.corr.CallID, maxAttrValueBytes)
	}
	l.eval(&s.ids.evalIDs)
}

// endAttrs mirrors endAttributes.
func (s *Span) endAttrs(l *recAttrs, e *spanEnd) {
	s.startAttrs(l)
	if s.kind == KindModel {
		out := &e.out
		l.text(kResponseModel, out.ResponseModel, maxAttrValueBytes)
		l.text(kResponseID, out.ResponseID, maxAttrValueBytes)
		if u := out.Usage; u != nil {
			l.count(kInputTokens, u.InputTokens)
			l.count(kOutputTokens, u.OutputTokens)
			l.count(kCacheReadInput, u.CacheReadTokens)
			l.count(kReasonTokens, u.ReasoningTokens)
		}
		for _, r := range out.FinishReasons {
			if finishReasonKept(r) {
				l.a[l.n] = recAttr{k: kFinishReasons, t: recFinishReasons}
				l.n++
				l.finishReasons = out.FinishReasons
				break
			}
		}
	}
	if e.errType != "" {
		l.str(kErrorType, e.errType)
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
		l.str(kWorkflowID, ids.workflowID)
	}
	if ids.workflowKind != "" {
		l.str(kWorkflowKind, ids.workflowKind)
	}
	if ids.nodeID != "" {
		l.str(kNodeID, ids.nodeID)
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
	l.str(kStatus, e.status)
	if e.errType != "" {
		l.str(kErrorType, e.errType)
	}
	m := [2]int64Pair{{"duration", int64(e.dur)}, {"duration_ms", e.dur.Milliseconds()}}
	return s.appendEnvelopeRecord(b, event, e.now.UnixMilli(), m[:], &l)
}

// appendEvaluationRecord writes evaluationEnvelope's record (the eval
// ids, never the span's workflow metadata).
func (s *Span) appendEvaluationRecord(b []byte, r *EvaluationResult, now time.Time) []byte {
	var l recAttrs
	l.eval(&s.ids.evalIDs)
	l.text(kEvaluationName, r.Name, maxAttrValueBytes)
	if r.Label != "" && len(r.Label) <= maxAttrValueBytes {
		l.str(kEvaluationScoreLabel, r.Label)
	}
	if finite(r.Score) {
		l.float(kEvaluationScoreValue, r.Score)
	}
	return s.appendEnvelopeRecord(b, EventEvaluationResult, now.UnixMilli(), nil, &l)
}
