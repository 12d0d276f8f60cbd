package wire_test

import (
	"errors"
	"testing"

	"github.com/fadcedab/adk/bus/wire"
)

// FuzzDecode feeds arbitrary bytes to Decode and Peek. Neither may panic,
// every failure must be a *WireError, and whatever decodes must re-encode
// and decode to the same kind.
func FuzzDecode(f *testing.F) {
	valid, _ := wire.Encode("sample_result", sampleOuter())
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	small, _ := wire.Encode("k", map[string]any{"a": []any{1, "x", nil, true, 1.5}})
	f.Add(small)
	f.Add([]byte{0x93, 0x01, 0xa1, 'k', 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x93, 0x01, 0xa1, 'k', 0xdb, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x93, 0x02, 0xa1, 'k', 0xc0})
	f.Add([]byte{0xc1})
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := wire.DecodeLimits{MaxBytes: 64 << 10, MaxDepth: 16, MaxElements: 4096}
		check := func(err error) {
			var we *wire.WireError
			if err != nil && !errors.As(err, &we) {
				t.Fatalf("error %v (%T) is not a *WireError", err, err)
			}
		}
		env, err := wire.Peek(data, lim)
		check(err)

		var anyv any
		check(wire.Decode(data, lim, "k", &anyv))
		var typed outer
		check(wire.Decode(data, lim, "sample_result", &typed))

		if err != nil {
			return
		}
		var body any
		if derr := wire.Decode(data, lim, env.Kind, &body); derr != nil {
			return // well-formed but not decodable into any (e.g. unknown ext)
		}
		re, err := wire.Encode(env.Kind, body)
		if err != nil {
			return // e.g. a kind Encode refuses but a peer sent
		}
		if env2, err := wire.Peek(re, wire.DecodeLimits{MaxDepth: 16}); err != nil || env2.Kind != env.Kind {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
	})
}
