package otlpreceiver

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/fadcedab/adk/internal/spanjson"
	"github.com/fadcedab/adk/observability"
)

// appendSpanJSON appends s exactly as encoding/json.Marshal encodes it
// (field order and omitempty of SpanSignal, attribute keys sorted,
// HTML-safe escaping), without reflection: the receiver encodes every
// span it accepts, and json.Marshal was a fifth of its CPU. The span's
// fields and every string go through internal/spanjson, as the signal
// publisher's do. Attribute values are the types
// mapAttributes produces (string, int64, []string); anything else, or an
// attribute count beyond what the mapping produces, makes the whole span
// fall back to json.Marshal. TestAppendSpanJSON and FuzzOTLPDecode hold it
// byte-identical to json.Marshal. attrBytes is the size of the encoded
// attributes object (what Validate bounds).
func appendSpanJSON(b []byte, s *observability.SpanSignal) (out []byte, attrBytes int, err error) {
	start := len(b)
	b = spanjson.AppendHead(b, s)
	attrStart := len(b)
	b, ok := appendAttributes(b, s.Attributes)
	if !ok {
		a, err := json.Marshal(s.Attributes)
		if err != nil {
			return b[:start], 0, err
		}
		data, err := json.Marshal(s)
		return append(b[:start], data...), len(a), err
	}
	return append(b, '}'), len(b) - attrStart, nil
}

// appendAttributes encodes a mapped attribute set as json.Marshal encodes
// a map[string]any; false for a value type the mapping never produces.
func appendAttributes(b []byte, a observability.Attributes) ([]byte, bool) {
	if a == nil {
		return append(b, "null"...), true
	}
	var buf [48]string // the mapping keeps at most len(allowed) keys
	if len(a) > len(buf) {
		return b, false
	}
	keys := buf[:0]
	for k := range a {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = spanjson.AppendString(b, k)
		b = append(b, ':')
		switch v := a[k].(type) {
		case string:
			b = spanjson.AppendString(b, v)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case []string:
			if v == nil {
				b = append(b, "null"...)
				break
			}
			b = append(b, '[')
			for j, e := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = spanjson.AppendString(b, e)
			}
			b = append(b, ']')
		default:
			return b, false
		}
	}
	return append(b, '}'), true
}
