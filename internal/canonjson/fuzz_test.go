package canonjson

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// fuzzStruct receives fuzzed documents for the reflected encoder.
type fuzzStruct struct {
	A  string             `json:"a"`
	B  float64            `json:"b,omitempty"`
	N  json.Number        `json:"n"`
	I  *int64             `json:"i"`
	L  []any              `json:"l"`
	M  map[string]any     `json:"m"`
	S  []fuzzStruct       `json:"s,omitempty"`
	P  *fuzzStruct        `json:"p"`
	F  map[string]float32 `json:"f"`
	U  uint16             `json:"u"`
	T  bool               `json:"t"`
	X  any                `json:"x,omitempty"`
	Ü  string             //
	BB []byte             `json:"bb"`
}

// FuzzCanonical checks that canonical output is valid JSON and a fixed
// point: canonical(decode(canonical(x))) == canonical(x); and that a struct
// decoded from the input encodes as the encoding/json round trip does.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null]}`, `1.0`, `-0`, `1e21`, `1e-7`, `"\u2028\u0000"`, `{"\ud83d\ude00":1,"\ufb33":2}`,
		`123456789012345678901234567890`, `[0.1,1E2,-1.5e-10]`,
		`{"a":"<\u2028>","b":1e-7,"n":-0,"i":9007199254740993,"l":[1,{"y":2,"x":1}],"m":{"\ud83d\ude00":1,"\ufb33":2},` +
			`"s":[{"a":"x","p":{"t":true}}],"f":{"k":3.4e38},"u":65535,"x":"\ud800","Ü":"ü","bb":"YWJj"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s fuzzStruct
		if json.Unmarshal(data, &s) == nil {
			sameAsRoundTrip(t, "fuzzed struct", s)
		}
		v, err := jsonlimit.Decode(data, jsonlimit.Limits{})
		if err != nil {
			return
		}
		c1, err := Marshal(v)
		if err != nil {
			// Only a number beyond float64 range may be refused.
			if e, ok := err.(*Error); !ok || e.Code != CodeNonFinite {
				t.Fatalf("Marshal of decoded JSON: %v", err)
			}
			return
		}
		if !json.Valid(c1) {
			t.Fatalf("invalid output %q", c1)
		}
		v2, err := jsonlimit.Decode(c1, jsonlimit.Limits{})
		if err != nil {
			t.Fatalf("canonical output %q does not decode: %v", c1, err)
		}
		c2, err := Marshal(v2)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("not idempotent:\n%q\n%q (%v)", c1, c2, err)
		}
		if c3, err := Canonicalize(data); err != nil || !bytes.Equal(c1, c3) {
			t.Fatalf("Canonicalize disagrees with Marshal: %q, %v", c3, err)
		}
	})
}
