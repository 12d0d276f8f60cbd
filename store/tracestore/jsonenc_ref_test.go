package tracestore

import (
	"encoding/json"
	"slices"
	"strconv"
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
