package tracestore

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendJSON encodes the projected values (string, bool, int64, uint64,
// json.Number, []string, map[string]any, map[string]string) with sorted
// keys: deterministic, and several times cheaper than reflection-based
// encoding/json on the apply path. Strings are already valid UTF-8 (the
// bounded decoder rejects anything else).
func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return appendJSONString(b, x)
	case bool:
		return strconv.AppendBool(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case json.Number:
		return append(b, x...)
	case []string:
		b = append(b, '[')
		for i, s := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		return append(b, ']')
	case map[string]string:
		var arr [16]string
		keys := arr[:0]
		for k := range x {
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
			b = appendJSONString(b, x[k])
		}
		return append(b, '}')
	case map[string]any:
		var arr [24]string
		keys := arr[:0]
		for k := range x {
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
			b = appendJSON(b, x[k])
		}
		return append(b, '}')
	}
	// Unreachable for projected values; encode defensively.
	j, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, j...)
}

// appendRecord encodes the stored record {content_pruned?, cursor, event,
// identity, kind, timestamp_ms}: the bytes appendJSON gives for that map
// (keys in the same sorted order), without building the map.
func appendRecord(b []byte, cursor uint64, kind string, tsMS int64, pj *projected) []byte {
	b = append(b, '{')
	if pj.pruned {
		b = append(b, `"content_pruned":true,`...)
	}
	b = append(b, `"cursor":`...)
	b = strconv.AppendUint(b, cursor, 10)
	b = append(b, `,"event":`...)
	b = appendJSON(b, pj.event)
	b = append(b, `,"identity":`...)
	b = appendJSON(b, pj.identity)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, kind)
	b = append(b, `,"timestamp_ms":`...)
	b = strconv.AppendInt(b, tsMS, 10)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == '\u2028' || r == '\u2029' || r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				if r == utf8.RuneError {
					b = append(b, `\ufffd`...)
				} else {
					b = append(b, `\u202`...)
					b = append(b, hexDigits[r&0xF])
				}
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
