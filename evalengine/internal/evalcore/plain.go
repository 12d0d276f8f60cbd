package evalcore

import (
	"encoding/json"
	"math"
	"unicode/utf8"
)

// maxPlainDepth bounds the nesting of a value crossing a plain-JSON
// boundary (simulators, reviews, judge provider configuration).
const maxPlainDepth = 64

// PlainJSON reports whether v is a plain JSON value: objects with string
// keys, arrays, valid UTF-8 strings, booleans, null and finite numbers,
// nested at most maxPlainDepth deep. Anything else (a channel, a func, a
// struct, a pointer) is the Go form of the contract's "opaque term" and is
// refused at every boundary where values cross into or out of trusted code.
func PlainJSON(v any) bool { return plainAt(v, 0) }

func plainAt(v any, depth int) bool {
	if depth > maxPlainDepth {
		return false
	}
	switch x := v.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	case string:
		return utf8.ValidString(x)
	case json.Number:
		_, ok := toFloat(x)
		return ok
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
	case map[string]any:
		for k, e := range x {
			if !utf8.ValidString(k) || !plainAt(e, depth+1) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !plainAt(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// PlainSize returns the size of a plain JSON value's encoding.
func PlainSize(v any) (int, bool) {
	if !PlainJSON(v) {
		return 0, false
	}
	n, err := encodedSize(v)
	return n, err == nil
}
