package observability

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAppendJSONFloat_IsMarshals: the float appender (its integer fast
// path included) writes json.Marshal's bytes.
func TestAppendJSONFloat_IsMarshals(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 2, 10, 100, 1e6, 1e15, 1e20, 1e21, 1e22, -1e20,
		1<<53 - 1, 1 << 53, 1<<53 + 2, -(1<<53 - 1), 1 << 60, 0.5, 0.1, 1.0 / 3, 1e-6, 1e-7, 123456.789,
		math.MaxInt64, math.MinInt64, math.MaxFloat64, math.SmallestNonzeroFloat64}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		switch r.IntN(4) {
		case 0:
			vals = append(vals, float64(r.Int64N(1<<54)-1<<53))
		case 1:
			vals = append(vals, math.Float64frombits(r.Uint64()))
		case 2:
			vals = append(vals, math.Trunc(r.NormFloat64()*math.Pow(10, float64(r.IntN(25)))))
		default:
			vals = append(vals, r.Float64())
		}
	}
	for _, f := range vals {
		got, ok := appendJSONFloat(nil, f)
		want, err := json.Marshal(f)
		if ok != (err == nil) {
			t.Fatalf("%v: ok %v, json.Marshal %v", f, ok, err)
		}
		if !ok {
			continue
		}
		if string(got) != string(want) {
			t.Fatalf("%v (%x): %s, json.Marshal %s", f, math.Float64bits(f), got, want)
		}
	}
}
