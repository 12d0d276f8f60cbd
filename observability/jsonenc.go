package observability

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fadcedab/adk/internal/jsonquote"
)

// The one home of the signal record's JSON encoding: every package that
// writes a span record (the bus publisher, the OTLP receiver) or a stored
// record (the trace store) writes it through these appenders, so there is
// one encoder; strings are quoted by internal/jsonquote, the module's one
// quoter. The span appender writes exactly the
// bytes json.Marshal(*SpanSignal) writes, without reflection (reflection
// was the largest cost of the publisher and a fifth of the receiver's),
// and gives up (ok false) on anything whose encoding it does not
// reproduce (an attribute value of another type, NaN, very deep
// nesting): the caller then uses json.Marshal, so the output and every
// error stay encoding/json's. jsonquote's FuzzAppend, bus's
// FuzzEncodeSignal and the receiver's FuzzOTLPDecode hold it to that.

// AppendSpanHead appends s's fields in json.Marshal's order, with its
// omitempty rules, from the opening brace through `,"attributes":`; the
// caller appends the attributes and the closing brace.
func AppendSpanHead(b []byte, s *SpanSignal) []byte {
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, int64(s.Schema), 10)
	b = append(b, `,"signal":`...)
	b = appendHTMLString(b, s.Signal)
	b = append(b, `,"phase":`...)
	b = appendHTMLString(b, s.Phase)
	b = append(b, `,"name":`...)
	b = appendHTMLString(b, s.Name)
	b = append(b, `,"kind":`...)
	b = appendHTMLString(b, s.Kind)
	b = append(b, `,"trace_id":`...)
	b = appendHTMLString(b, s.TraceID)
	b = append(b, `,"span_id":`...)
	b = appendHTMLString(b, s.SpanID)
	if s.ParentSpanID != "" {
		b = append(b, `,"parent_span_id":`...)
		b = appendHTMLString(b, s.ParentSpanID)
	}
	b = append(b, `,"trace_flags":`...)
	b = strconv.AppendInt(b, int64(s.TraceFlags), 10)
	if s.TraceState != "" {
		b = append(b, `,"tracestate":`...)
		b = appendHTMLString(b, s.TraceState)
	}
	b = append(b, `,"start_time_unix_nano":`...)
	b = strconv.AppendInt(b, s.StartTimeUnixNano, 10)
	if s.EndTimeUnixNano != 0 {
		b = append(b, `,"end_time_unix_nano":`...)
		b = strconv.AppendInt(b, s.EndTimeUnixNano, 10)
	}
	if s.DurationNano != nil {
		b = append(b, `,"duration_nano":`...)
		b = strconv.AppendInt(b, *s.DurationNano, 10)
	}
	if s.Status != "" {
		b = append(b, `,"status":`...)
		b = appendHTMLString(b, s.Status)
	}
	b = append(b, `,"attributes":`...)
	return b
}

// AppendEnvelopeJSON appends e as encoding/json encodes it (field order,
// the omitempty fields, sorted map keys, HTML-escaped strings), or
// reports false where AppendSpanJSON would (in the attributes or the
// captured content). Envelopes are half of what a traced run emits, and
// reflection made them the largest cost of tracing a fleet's tasks.
func AppendEnvelopeJSON(b []byte, e *Envelope) ([]byte, bool) {
	b = appendEnvelopeHead(b, e)
	b = appendInt64Map(b, e.Measurements)
	b = appendEnvelopeMetadata(b, &e.Metadata)
	if len(e.Metadata.Attributes) > 0 {
		b = append(b, `,"attributes":`...)
		var ok bool
		if b, ok = appendJSONMap(b, e.Metadata.Attributes, 0); !ok {
			return b, false
		}
	}
	b = append(b, `},"content_captured":`...)
	b = strconv.AppendBool(b, e.ContentCaptured)
	if e.Content != nil {
		b = append(b, `,"content":`...)
		var ok bool
		if b, ok = appendJSONValue(b, e.Content, 0); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendEnvelopeHead appends an envelope from the opening brace through
// `,"measurements":`.
func appendEnvelopeHead(b []byte, e *Envelope) []byte {
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, int64(e.Schema), 10)
	b = append(b, `,"event":`...)
	b = appendHTMLString(b, e.Event)
	b = append(b, `,"timestamp_ms":`...)
	b = strconv.AppendInt(b, e.TimestampMS, 10)
	return append(b, `,"measurements":`...)
}

// appendEnvelopeMetadata appends `,"metadata":{` and m's fields up to its
// attributes; the caller appends those and closes the object.
func appendEnvelopeMetadata(b []byte, m *EnvelopeMetadata) []byte {
	b = append(b, `,"metadata":{`...)
	first := true
	field := func(b []byte, name, v string, omitEmpty bool) []byte {
		if omitEmpty && v == "" {
			return b
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		return appendHTMLString(b, v)
	}
	b = field(b, "run_id", m.RunID, true)
	b = field(b, "invocation_id", m.InvocationID, true)
	b = field(b, "session", m.Session, true)
	b = field(b, "agent", m.Agent, true)
	b = field(b, "model", m.Model, true)
	b = field(b, "tool", m.Tool, true)
	b = field(b, "call_id", m.CallID, true)
	b = field(b, "trace_id", m.TraceID, false)
	b = field(b, "span_id", m.SpanID, false)
	b = field(b, "parent_id", m.ParentID, true)
	b = append(b, `,"trace_flags":`...)
	b = strconv.AppendInt(b, int64(m.TraceFlags), 10)
	if m.TraceState != "" {
		b = append(b, `,"tracestate":`...)
		b = appendHTMLString(b, m.TraceState)
	}
	return b
}

// int64Pair is one entry of a measurements map.
type int64Pair struct {
	k string
	v int64
}

// appendInt64Map appends a map[string]int64 with sorted keys, as
// json.Marshal does (nil is null). An envelope's measurements are two.
func appendInt64Map(b []byte, m map[string]int64) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var arr [4]int64Pair
	pairs := arr[:0]
	for k, v := range m {
		pairs = append(pairs, int64Pair{k, v})
	}
	return appendInt64Pairs(b, pairs)
}

// appendInt64Pairs sorts entries with unique keys and appends them as a
// JSON object.
func appendInt64Pairs(b []byte, pairs []int64Pair) []byte {
	for i := 1; i < len(pairs); i++ {
		for j := i; j > 0 && pairs[j].k < pairs[j-1].k; j-- {
			pairs[j], pairs[j-1] = pairs[j-1], pairs[j]
		}
	}
	b = append(b, '{')
	for i := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendHTMLString(b, pairs[i].k)
		b = append(b, ':')
		b = strconv.AppendInt(b, pairs[i].v, 10)
	}
	return append(b, '}')
}

// maxAppendDepth bounds attribute nesting the appender follows; deeper
// values go through json.Marshal.
const maxAppendDepth = 32

// AppendSpanJSON appends s as encoding/json encodes it (field order, the
// omitempty fields, sorted attribute keys, HTML-escaped strings).
func AppendSpanJSON(b []byte, s *SpanSignal) ([]byte, bool) {
	b = AppendSpanHead(b, s)
	var ok bool
	if b, ok = appendJSONMap(b, s.Attributes, 0); !ok {
		return b, false
	}
	return append(b, '}'), true
}

// AppendAttributesJSON appends a span's attributes object as json.Marshal
// encodes it (sorted keys), or reports false where AppendSpanJSON would.
// With AppendSpanHead and a closing brace it is AppendSpanJSON, for a
// caller that bounds the attributes' encoded size.
func AppendAttributesJSON(b []byte, a Attributes) ([]byte, bool) { return appendJSONMap(b, a, 0) }

// attrPair is one map entry appendJSONMap sorts: the value is taken with
// its key in the one pass over the map, not looked up again.
type attrPair struct {
	k string
	v any
}

// mapPairsPool holds the entry slices appendJSONMap sorts for maps
// larger than smallMap.
var mapPairsPool = sync.Pool{New: func() any { p := make([]attrPair, 0, 32); return &p }}

// smallMap is the most entries appendJSONMap sorts in an array on its
// stack: a tracer's attribute maps hold fewer, and the pool's Get and Put
// cost more than the sort.
const smallMap = 16

func appendJSONMap(b []byte, m map[string]any, depth int) ([]byte, bool) {
	if m == nil {
		return append(b, "null"...), true
	}
	if len(m) <= smallMap {
		var arr [smallMap]attrPair
		n := 0
		for k, v := range m {
			arr[n] = attrPair{k, v}
			n++
		}
		return appendPairs(b, sortPairs(arr[:n]), depth)
	}
	pp := mapPairsPool.Get().(*[]attrPair)
	pairs := (*pp)[:0]
	for k, v := range m {
		pairs = append(pairs, attrPair{k, v})
	}
	b, ok := appendPairs(b, sortPairs(pairs), depth)
	clear(pairs)
	*pp = pairs[:0]
	mapPairsPool.Put(pp)
	return b, ok
}

// sortPairs sorts a map's entries by key (unique, so the order is the
// one json.Marshal writes): insertion sort for a small map.
func sortPairs(p []attrPair) []attrPair {
	if len(p) > smallMap {
		slices.SortFunc(p, func(x, y attrPair) int { return strings.Compare(x.k, y.k) })
		return p
	}
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && p[j].k < p[j-1].k; j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
	return p
}

// appendPairs appends sorted entries as a JSON object.
func appendPairs(b []byte, pairs []attrPair, depth int) ([]byte, bool) {
	b = append(b, '{')
	ok := true
	for i := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendHTMLString(b, pairs[i].k)
		b = append(b, ':')
		if b, ok = appendJSONValue(b, pairs[i].v, depth+1); !ok {
			break
		}
	}
	return append(b, '}'), ok
}

// appendJSONValue appends the attribute value types Attributes documents
// (and the other integer types); anything else reports false.
func appendJSONValue(b []byte, v any, depth int) ([]byte, bool) {
	if depth > maxAppendDepth {
		return b, false
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendHTMLString(b, x), true
	case bool:
		return strconv.AppendBool(b, x), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case int32:
		return strconv.AppendInt(b, int64(x), 10), true
	case uint64:
		return strconv.AppendUint(b, x, 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), true
	case float64:
		return appendJSONFloat(b, x)
	case []string:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, s := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendHTMLString(b, s)
		}
		return append(b, ']'), true
	case []any:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendJSONValue(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		return appendJSONMap(b, x, depth)
	}
	return b, false
}

// appendJSONFloat is encoding/json's float64 encoding (ES6 number
// formatting); NaN and ±Inf are errors there, so they report false.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	abs := math.Abs(f)
	if abs < 1<<53 && f == math.Trunc(f) {
		// An integer (a 0/1 score, a count): below 2^53 its shortest
		// form is its digits, and strconv's float path, whose large
		// frame is where a worker's runner stacks had to grow, is not
		// needed.
		if f == 0 && math.Signbit(f) {
			return append(b, "-0"...), true
		}
		return strconv.AppendInt(b, int64(f), 10), true
	}
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 → e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendHTMLString quotes s with json.Marshal's default HTML-safe
// escaping, the form of span records.
func appendHTMLString(b []byte, s string) []byte { return jsonquote.Append(b, s, jsonquote.HTML) }
