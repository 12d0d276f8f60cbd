package otlpreceiver

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/fadcedab/adk/observability"
)

// appendSpanJSON appends s exactly as encoding/json.Marshal encodes it
// (field order and omitempty of SpanSignal, attribute keys sorted,
// HTML-safe escaping), without reflection: the receiver encodes every
// span it accepts, and json.Marshal was a fifth of its CPU. Strings that
// are plain printable ASCII are copied as they are; any other string is
// escaped by encoding/json itself. Attribute values are the types
// mapAttributes produces (string, int64, []string); anything else, or an
// attribute count beyond what the mapping produces, makes the whole span
// fall back to json.Marshal. TestAppendSpanJSON and FuzzOTLPDecode hold it
// byte-identical to json.Marshal. attrBytes is the size of the encoded
// attributes object (what Validate bounds).
func appendSpanJSON(b []byte, s *observability.SpanSignal) (out []byte, attrBytes int, err error) {
	start := len(b)
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, int64(s.Schema), 10)
	b = append(b, `,"signal":`...)
	b = appendJSONString(b, s.Signal)
	b = append(b, `,"phase":`...)
	b = appendJSONString(b, s.Phase)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, s.Name)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, s.Kind)
	b = append(b, `,"trace_id":`...)
	b = appendJSONString(b, s.TraceID)
	b = append(b, `,"span_id":`...)
	b = appendJSONString(b, s.SpanID)
	if s.ParentSpanID != "" {
		b = append(b, `,"parent_span_id":`...)
		b = appendJSONString(b, s.ParentSpanID)
	}
	b = append(b, `,"trace_flags":`...)
	b = strconv.AppendInt(b, int64(s.TraceFlags), 10)
	if s.TraceState != "" {
		b = append(b, `,"tracestate":`...)
		b = appendJSONString(b, s.TraceState)
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
		b = appendJSONString(b, s.Status)
	}
	b = append(b, `,"attributes":`...)
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
	var buf [32]string // the mapping keeps at most len(allowed) keys
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
		b = appendJSONString(b, k)
		b = append(b, ':')
		switch v := a[k].(type) {
		case string:
			b = appendJSONString(b, v)
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
				b = appendJSONString(b, e)
			}
			b = append(b, ']')
		default:
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendJSONString appends s as a JSON string: as it is when every byte
// is printable ASCII that encoding/json leaves alone, else escaped by
// encoding/json (control bytes, quotes, <>&, invalid UTF-8, U+2028...).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
