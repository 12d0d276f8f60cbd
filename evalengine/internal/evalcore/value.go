package evalcore

import (
	"encoding/json"
	"math"
	"strconv"
)

// JSON values inside sets and results (inputs, expectations, outputs, tool
// arguments, metadata) are generic: map[string]any, []any, string, bool, nil
// and numbers as json.Number (from the bounded decoder) or any Go number
// type (from an in-process adapter). The helpers here compare them by JSON
// meaning, so 1, 1.0 and json.Number("1e0") are equal.

// jsonEqual reports deep JSON equality; numbers compare by value.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	xf, ok1 := toFloat(a)
	yf, ok2 := toFloat(b)
	return ok1 && ok2 && xf == yf
}

// jsonSubset reports whether expected is contained in actual: objects by
// key with recursively-subset values, arrays as a positional prefix
// (CONTRACTS §5.6; see doc.go), scalars by equality.
func jsonSubset(expected, actual any) bool {
	switch x := expected.(type) {
	case map[string]any:
		y, ok := actual.(map[string]any)
		if !ok {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonSubset(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := actual.([]any)
		if !ok || len(x) > len(y) {
			return false
		}
		for i := range x {
			if !jsonSubset(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return jsonEqual(expected, actual)
}

// toFloat converts a JSON number of any representation to float64.
func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint32:
		return float64(n), true
	}
	return 0, false
}

// Fraction reads a JSON number in [0, 1].
func Fraction(v any) (float64, bool) {
	f, ok := toFloat(v)
	if !ok || math.IsNaN(f) || f < 0 || f > 1 {
		return 0, false
	}
	return f, true
}

// asObject returns v as an object.
func asObject(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok
}

// UnknownKeys returns the keys of m not in allowed.
func UnknownKeys(m map[string]any, allowed map[string]bool) []string {
	var out []string
	for k := range m {
		if !allowed[k] {
			out = append(out, k)
		}
	}
	return out
}

func KeySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// approxSize estimates the serialized size of a JSON value without
// serializing it. It charges strings their length plus quotes (escapes are
// ignored), which is enough for the incremental report budget; the final
// check serializes for real.
func approxSize(v any) int {
	switch x := v.(type) {
	case nil:
		return 4
	case string:
		return len(x) + 2
	case bool:
		return 5
	case map[string]any:
		n := 2
		for k, e := range x {
			n += len(k) + 4 + approxSize(e)
		}
		return n
	case []any:
		n := 2
		for _, e := range x {
			n += 1 + approxSize(e)
		}
		return n
	case json.Number:
		return len(x)
	}
	return 24
}
