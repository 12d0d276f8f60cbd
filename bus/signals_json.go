package bus

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/fadcedab/adk/internal/spanjson"
	"github.com/fadcedab/adk/observability"
)

// Enqueue encodes every signal it publishes; for spans encoding/json's
// reflection was the publisher's largest cost. appendSpanJSON writes the
// same bytes as json.Marshal(*SpanSignal) without it, and gives up (ok
// false) on anything whose encoding it does not reproduce exactly (an
// attribute value of another type, NaN, very deep nesting): the caller then
// uses json.Marshal, so the output, and every error, stay encoding/json's.

// maxAppendDepth bounds attribute nesting the appender follows; deeper
// values go through json.Marshal.
const maxAppendDepth = 32

// Encoded spans are appended straight into 64 KiB chunks shared through a
// pool (per P, so concurrent Enqueues rarely meet): one allocation per
// ~100 spans and no copy. An output slice's capacity ends with it, so no
// later append can reach into it; a chunk is freed once its spans are.
const (
	spanArenaChunk = 64 << 10
	spanArenaMin   = 2 << 10 // start a new chunk below this much room
)

var spanArenas = sync.Pool{New: func() any { return new([]byte) }}

// encodeSignal returns json.Marshal(s), through the appender for spans.
func encodeSignal(s observability.Signal) ([]byte, error) {
	if sp, ok := s.(*observability.SpanSignal); ok && sp != nil {
		ap := spanArenas.Get().(*[]byte)
		a := *ap
		if cap(a)-len(a) < spanArenaMin {
			a = make([]byte, 0, spanArenaChunk)
		}
		b, ok := appendSpanJSON(a, sp)
		var out []byte
		switch {
		case !ok:
		case cap(b) == cap(a): // in the chunk
			out, a = b[len(a):len(b):len(b)], b
		default: // outgrew the chunk: b is a new array, keep only the span
			out = append([]byte(nil), b[len(a):]...)
		}
		*ap = a
		spanArenas.Put(ap)
		if ok {
			return out, nil
		}
	}
	return json.Marshal(s)
}

// appendSpanJSON appends s as encoding/json encodes it (field order, the
// omitempty fields, sorted attribute keys, HTML-escaped strings).
func appendSpanJSON(b []byte, s *observability.SpanSignal) ([]byte, bool) {
	b = spanjson.AppendHead(b, s)
	var ok bool
	if b, ok = appendJSONMap(b, s.Attributes, 0); !ok {
		return b, false
	}
	return append(b, '}'), true
}

// mapKeysPool holds the key slices appendJSONMap sorts.
var mapKeysPool = sync.Pool{New: func() any { k := make([]string, 0, 16); return &k }}

func appendJSONMap(b []byte, m map[string]any, depth int) ([]byte, bool) {
	if m == nil {
		return append(b, "null"...), true
	}
	kp := mapKeysPool.Get().(*[]string)
	keys := (*kp)[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	ok := true
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = spanjson.AppendString(b, k)
		b = append(b, ':')
		if b, ok = appendJSONValue(b, m[k], depth+1); !ok {
			break
		}
	}
	clear(keys)
	*kp = keys[:0]
	mapKeysPool.Put(kp)
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
		return spanjson.AppendString(b, x), true
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
			b = spanjson.AppendString(b, s)
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
