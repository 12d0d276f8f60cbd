package canonjson

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// FuzzCanonical checks that canonical output is valid JSON and a fixed
// point: canonical(decode(canonical(x))) == canonical(x).
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null]}`, `1.0`, `-0`, `1e21`, `1e-7`, `"\u2028\u0000"`, `{"\ud83d\ude00":1,"\ufb33":2}`,
		`123456789012345678901234567890`, `[0.1,1E2,-1.5e-10]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
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
