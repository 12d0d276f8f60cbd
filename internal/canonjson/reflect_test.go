package canonjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"testing"
	"testing/quick"
	"time"
)

// roundTrip is the encoding reflected must reproduce: encoding/json, a
// generic decode and the generic canonical encoder.
func roundTrip(v any) ([]byte, error) {
	e := &encoder{}
	if err := e.viaEncodingJSON(v); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// sameAsRoundTrip fails t unless Marshal(v) gives the round trip's bytes,
// or an error with the same code and path.
func sameAsRoundTrip(t *testing.T, name string, v any) {
	t.Helper()
	got, gerr := Marshal(v)
	want, werr := roundTrip(v)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%s: Marshal err = %v, round trip err = %v", name, gerr, werr)
	}
	if gerr != nil {
		if gerr.Error() != werr.Error() {
			t.Fatalf("%s: Marshal err = %v, round trip err = %v", name, gerr, werr)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\nreflected  %s\nround trip %s", name, got, want)
	}
}

type ptrMarshaler struct{ N int }

func (p *ptrMarshaler) MarshalJSON() ([]byte, error) { return []byte(`{"via":"pointer"}`), nil }

type valMarshaler struct{ N int }

func (v valMarshaler) MarshalJSON() ([]byte, error) { return []byte(`{ "z" : 1, "a" : "<&>" }`), nil }

type textKey string

func (k textKey) MarshalText() ([]byte, error) { return []byte("T" + string(k)), nil }

type inner struct {
	S string
	P *inner `json:"p,omitempty"`
}

type embedded struct {
	inner
	X int `json:"x"`
}

type everything struct {
	Str      string           `json:"str"`
	Named    textKey          `json:"named"`
	Int      int64            `json:"int"`
	Uint     uint8            `json:"uint"`
	F64      float64          `json:"f64"`
	F32      float32          `json:"f32"`
	Bool     bool             `json:"bool,omitempty"`
	Number   json.Number      `json:"number"`
	Any      any              `json:"any"`
	Ptr      *string          `json:"ptr"`
	NilPtr   *string          `json:"nil_ptr"`
	Slice    []inner          `json:"slice"`
	NilSlice []int            `json:"nil_slice"`
	Empty    []int            `json:"empty,omitempty"`
	Array    [2]string        `json:"array"`
	Bytes    []byte           `json:"bytes"`
	Map      map[string]any   `json:"map"`
	IntKeys  map[int]string   `json:"int_keys"`
	TextKeys map[textKey]int  `json:"text_keys"`
	Typed    map[string]inner `json:"typed"`
	PtrM     ptrMarshaler     `json:"ptr_m"`
	PtrMs    []ptrMarshaler   `json:"ptr_ms"`
	ValM     valMarshaler     `json:"val_m"`
	Time     time.Time        `json:"time"`
	Raw      json.RawMessage  `json:"raw"`
	Embedded embedded         `json:"embedded"`
	StrOpt   int              `json:"str_opt,string"`
	Skipped  string           `json:"-"`
	//lint:ignore SA5008 encoding/json's rule for a field named "-"
	Dash string `json:"-,"`
	//lint:ignore SA5008 an invalid tag name, which encoding/json ignores
	BadTag  string            `json:"a\\b"`
	NoTag   string            //
	Zero    *struct{}         `json:"zero,omitempty"`
	Omitted map[string]string `json:"omitted,omitempty"`
	Unicode string            `json:"ünï"`
	unexp   string
}

func TestMarshal_ReflectedEqualsRoundTrip(t *testing.T) {
	s := "pointed <at>"
	full := everything{
		Str: "a\u2028b<c>&\"\\\x01", Named: "n", Int: -1 << 62, Uint: 255, F64: 1e21, F32: 16777216, Number: "1.50",
		Any: map[string]any{"b": []any{1.5, "x"}, "a": inner{S: "in any"}}, Ptr: &s, Slice: []inner{{S: "1", P: &inner{S: "2"}}},
		Array: [2]string{"x", "y"}, Bytes: []byte("bytes"), Map: map[string]any{"\U0001F600": 1, "\uFB33": 2, "z": nil},
		IntKeys: map[int]string{10: "ten", 9: "nine"}, TextKeys: map[textKey]int{"k": 1}, Typed: map[string]inner{"t": {S: "typed"}},
		PtrMs: []ptrMarshaler{{1}}, Time: time.Date(2026, 12, 1, 23, 0, 0, 5, time.UTC), Raw: json.RawMessage(` {"b" : 2, "a" : 1} `),
		Embedded: embedded{inner: inner{S: "promoted"}, X: 3}, StrOpt: 7, Skipped: "no", Dash: "dash", BadTag: "bad", NoTag: "plain",
		Unicode: "ü", unexp: "hidden",
	}
	cases := map[string]any{
		"everything":         full,
		"pointer":            &full,
		"slice of structs":   []everything{full, {}},
		"zero":               everything{},
		"map of structs":     map[string]everything{"b": full, "a": {}},
		"generic holder":     map[string]any{"s": full, "l": []any{&full, inner{}}},
		"named string":       textKey("x"),
		"empty number":       struct{ N json.Number }{},
		"negative zero":      struct{ F float64 }{math.Copysign(0, -1)},
		"small and large":    []float64{1e-7, 1e-6, 123456789012345680000, 1e20, 5e-324, math.MaxFloat64, 0.1, -2.5e-8},
		"float32s":           []float32{1e-7, 3.4e38, 0.1, 16777217, 1.2345679e20},
		"invalid utf8":       struct{ S string }{"a\xffb\xc3"},
		"invalid utf8 key":   map[string]int{"\xff": 1},
		"nan":                struct{ F float64 }{math.NaN()},
		"nan in generic":     struct{ A any }{[]any{math.Inf(1)}},
		"channel":            struct{ C chan int }{make(chan int)},
		"bad number":         struct{ N json.Number }{"01"},
		"html in map key":    map[string]string{"<a>": "&"},
		"interface marshal":  struct{ M json.Marshaler }{valMarshaler{}},
		"nil interface mars": struct{ M json.Marshaler }{},
		"nil pointer mars":   struct{ P *ptrMarshaler }{},
		"pointer mars":       struct{ P *ptrMarshaler }{&ptrMarshaler{}},
		"deep pointer chain": deepInner(MaxDepth + 5),
		"within depth":       deepInner(MaxDepth / 3),
	}
	for name, v := range cases {
		sameAsRoundTrip(t, name, v)
	}

	cyclic := &inner{S: "loop"}
	cyclic.P = cyclic
	if _, err := Marshal(cyclic); err == nil {
		t.Fatal("a cyclic value encoded")
	}
	type node struct{ Next any }
	n := &node{}
	n.Next = n
	if _, err := Marshal(n); err == nil {
		t.Fatal("a cycle through an interface encoded")
	}
}

func deepInner(n int) *inner {
	v := &inner{S: "leaf"}
	for range n {
		v = &inner{P: v}
	}
	return v
}

// TestMarshal_ReflectedEqualsRoundTripRandom compares random values of a
// struct type with every kind quick can generate.
func TestMarshal_ReflectedEqualsRoundTripRandom(t *testing.T) {
	type leaf struct {
		S  string             `json:"s"`
		F  float64            `json:"f,omitempty"`
		F3 float32            `json:"f3"`
		I  int32              `json:"i,omitempty"`
		U  uint64             `json:"u"`
		B  bool               `json:"b"`
		M  map[string]float64 `json:"m"`
	}
	type root struct {
		Leaves []leaf           `json:"leaves"`
		ByName map[string]*leaf `json:"by_name"`
		P      *leaf            `json:"p,omitempty"`
		A      [3]int8          `json:"a"`
		T      string           `json:"t"`
	}
	rng := rand.New(rand.NewSource(19))
	for i := range 300 {
		v, ok := quick.Value(reflect.TypeFor[root](), rng)
		if !ok {
			t.Fatal("quick.Value failed")
		}
		sameAsRoundTrip(t, fmt.Sprintf("random value %d", i), v.Interface())
	}
}

func BenchmarkMarshal_Struct(b *testing.B) {
	type sample struct {
		ID      string         `json:"id"`
		Index   int            `json:"index"`
		Score   float64        `json:"score"`
		Passed  bool           `json:"passed"`
		Turns   []inner        `json:"turns"`
		Meta    map[string]any `json:"metadata"`
		Error   string         `json:"error,omitempty"`
		Pointer *string        `json:"pointer"`
	}
	s := "pointed"
	v := make([]sample, 100)
	for i := range v {
		v[i] = sample{ID: "sample-0123456789ab", Index: i, Score: float64(i) / 7, Pointer: &s,
			Turns: []inner{{S: "a"}, {S: "b"}}, Meta: map[string]any{"k": i, "j": "v"}}
	}
	b.Run("reflected", func(b *testing.B) {
		for b.Loop() {
			if _, err := Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("round trip", func(b *testing.B) {
		for b.Loop() {
			if _, err := roundTrip(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
