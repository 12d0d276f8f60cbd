package bus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/fadcedab/adk/bus/wire"
	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
)

// errAnyWire stands for any *wire.WireError in a table.
var errAnyWire = errors.New("any wire error")

func encHeader(enc string) nats.Header {
	h := nats.Header{}
	if enc != "" {
		h.Set(SignalEncodingHeader, enc)
	}
	return h
}

func TestCompressSignalBatch_RoundTripsAndFallsBackToPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 40 {
		recs := randRecords(r)
		raw, _ := EncodeSignalBatch(SignalBatch{Records: recs})
		want, werr := DecodeSignalBatch(raw, 1<<30)
		body, enc := compressSignalBatch(nil, raw)
		switch {
		case enc == SignalEncodingS2 && len(body) >= len(raw):
			t.Fatalf("case %d: compressed %d bytes into %d", i, len(raw), len(body))
		case enc == "" && !bytes.Equal(body, raw):
			t.Fatalf("case %d: plain body differs", i)
		}
		got, err := DecodeSignalMessage(encHeader(enc), body, 1<<30)
		if (err == nil) != (werr == nil) || (err == nil && !sameBatch(got, want)) {
			t.Fatalf("case %d (%q): %v / %v", i, enc, err, werr)
		}
	}
	// A batch of spans compresses several times over.
	recs := make([]SignalRecord, 200)
	for i := range recs {
		recs[i] = SignalRecord{Kind: RecordObservability, Data: []byte(`{"schema_version":2,"signal":"span","phase":"end","name":"gen_ai.chat","trace_id":"` +
			strings.Repeat("0af76519", 4) + `","span_id":"` + strings.Repeat("b7ad6b71", 2) + `","attributes":{"adk.eval.case_id":"c` + string(rune('0'+i%10)) + `"}}`)}
	}
	raw, _ := EncodeSignalBatch(SignalBatch{Records: recs})
	if body, enc := compressSignalBatch(nil, raw); enc != SignalEncodingS2 || len(body)*4 > len(raw) {
		t.Fatalf("span batch: %d -> %d bytes (%q)", len(raw), len(body), enc)
	}
	// Tiny and incompressible batches go out plain.
	for _, raw := range [][]byte{
		func() []byte {
			b, _ := EncodeSignalBatch(SignalBatch{Records: []SignalRecord{{Kind: "k", Data: []byte("{}")}}})
			return b
		}(),
		func() []byte {
			noise := make([]byte, 4096)
			for i := range noise {
				noise[i] = byte(r.Uint32())
			}
			b, _ := EncodeSignalBatch(SignalBatch{Records: []SignalRecord{{Kind: "k", Data: noise}}})
			return b
		}(),
	} {
		if body, enc := compressSignalBatch(make([]byte, 0, 8), raw); enc != "" || !bytes.Equal(body, raw) {
			t.Fatalf("%d bytes: encoding %q", len(raw), enc)
		}
	}
}

// TestDecodeSignalMessage_Bounds: a body whose decoded size would pass the
// bound is refused from its S2 header, before the decoded buffer is
// allocated; corrupt bodies and unknown encodings are wire_bad_encoding.
func TestDecodeSignalMessage_Bounds(t *testing.T) {
	const max = 1 << 20
	// A bomb: 8 MiB of one repeated byte, a few hundred bytes compressed.
	big := bytes.Repeat([]byte("x"), 8<<20)
	bomb := s2.Encode(nil, appendSignalBatch(nil, []SignalRecord{{Kind: "k", Data: big}}))
	big = nil
	if len(bomb) > 4<<10 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	// A forged header: claims 1 GiB and holds ten bytes.
	forged := binary.AppendUvarint(nil, 1<<30)
	forged = append(forged, make([]byte, 10)...)
	// Just over and just at the bound.
	at := s2.Encode(nil, appendSignalBatch(nil, []SignalRecord{{Kind: "k", Data: bytes.Repeat([]byte("y"), max-64)}}))
	over := s2.Encode(nil, appendSignalBatch(nil, []SignalRecord{{Kind: "k", Data: bytes.Repeat([]byte("y"), max)}}))

	for name, tc := range map[string]struct {
		enc  string
		data []byte
		want error
	}{
		"bomb":            {SignalEncodingS2, bomb, wire.ErrWireTooLarge},
		"forged length":   {SignalEncodingS2, forged, wire.ErrWireTooLarge},
		"over the bound":  {SignalEncodingS2, over, wire.ErrWireTooLarge},
		"body too large":  {SignalEncodingS2, make([]byte, max+1), wire.ErrWireTooLarge},
		"corrupt":         {SignalEncodingS2, append(binary.AppendUvarint(nil, 100), 0xff, 0xff, 0xff), wire.ErrWireBadEncoding},
		"empty":           {SignalEncodingS2, nil, wire.ErrWireBadEncoding},
		"unknown":         {"zstd", at, wire.ErrWireBadEncoding},
		"plain as s2":     {SignalEncodingS2, appendSignalBatch[SignalRecord](nil, nil), errAnyWire},
		"s2 read plain":   {"", at, errAnyWire},
		"at the bound":    {SignalEncodingS2, at, nil},
		"decodes to junk": {SignalEncodingS2, s2.Encode(nil, []byte("not a batch")), wire.ErrWireMalformed},
	} {
		t.Run(name, func(t *testing.T) {
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b, err := DecodeSignalMessage(encHeader(tc.enc), tc.data, max)
			runtime.ReadMemStats(&ms1)
			if tc.want == errAnyWire {
				// Bytes in the other form are refused, never misread.
				var we *wire.WireError
				if !errors.As(err, &we) {
					t.Fatalf("got %+v, %v", b, err)
				}
				return
			}
			if tc.want == nil {
				if err != nil || len(b.Records) != 1 {
					t.Fatalf("got %d records, %v", len(b.Records), err)
				}
				return
			}
			var we *wire.WireError
			if !errors.Is(err, tc.want) || !errors.As(err, &we) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if a := ms1.TotalAlloc - ms0.TotalAlloc; a > 256<<10 {
				t.Fatalf("refusing it allocated %d bytes", a)
			}
		})
	}
	// The unknown encoding is named, truncated, in the error.
	_, err := DecodeSignalMessage(encHeader(strings.Repeat("z", 100)), nil, max)
	if err == nil || !strings.Contains(err.Error(), SignalEncodingHeader) || strings.Contains(err.Error(), strings.Repeat("z", 65)) {
		t.Fatalf("unknown encoding: %v", err)
	}
}

// FuzzDecodeSignalMessage: whatever the body and encoding, decoding never
// panics, fails only with a *wire.WireError, never returns more record
// bytes than the bound, and agrees with the plain decoder on what an S2
// body decodes to.
func FuzzDecodeSignalMessage(f *testing.F) {
	for _, recs := range [][]SignalRecord{nil, {{Kind: RecordObservability, Data: []byte(`{"x":1}`)}},
		{{Kind: RecordObservability, Data: bytes.Repeat([]byte(`{"signal":"span"}`), 40)}, {Kind: "k", Data: []byte{}}}} {
		raw := appendSignalBatch(nil, recs)
		f.Add(true, raw)
		f.Add(true, s2.Encode(nil, raw))
		f.Add(false, raw)
	}
	f.Add(true, s2.Encode(nil, appendSignalBatch(nil, []SignalRecord{{Kind: "k", Data: make([]byte, 1<<17)}})))
	f.Fuzz(func(t *testing.T, compressed bool, data []byte) {
		const max = 1 << 16
		enc := ""
		if compressed {
			enc = SignalEncodingS2
		}
		b, err := DecodeSignalMessage(encHeader(enc), data, max)
		if err != nil {
			var we *wire.WireError
			if !errors.As(err, &we) {
				t.Fatalf("not a *wire.WireError: %T %v", err, err)
			}
			return
		}
		n := 0
		for _, r := range b.Records {
			n += len(r.Kind) + len(r.Data)
		}
		if n > max {
			t.Fatalf("%d record bytes past the %d bound", n, max)
		}
		if compressed {
			plain, err := s2.Decode(nil, data)
			if err != nil {
				t.Fatalf("accepted a body s2 refuses: %v", err)
			}
			want, err := DecodeSignalBatch(plain, max)
			if err != nil || !sameBatch(b, want) {
				t.Fatalf("disagrees with the plain decoder: %v", err)
			}
		}
	})
}
