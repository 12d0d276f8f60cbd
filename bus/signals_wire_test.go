package bus

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fadcedab/adk/bus/wire"
)

func randRecords(r *rand.Rand) []SignalRecord {
	if r.IntN(10) == 0 {
		return nil
	}
	sizes := []int{0, 1, 31, 32, 255, 256, 65535, 65536, 70_000}
	n := r.IntN(20)
	if r.IntN(10) == 0 {
		n = 15 + r.IntN(3) // fixarray edge
	}
	if r.IntN(20) == 0 {
		n = 65535 + r.IntN(3) // array16 edge
	}
	recs := make([]SignalRecord, n)
	for i := range recs {
		recs[i].Kind = strings.Repeat("k", sizes[r.IntN(6)])
		if r.IntN(4) == 0 {
			recs[i].Kind = RecordObservability
		}
		switch r.IntN(12) {
		case 0:
			recs[i].Data = nil
		case 1:
			recs[i].Data = []byte{}
		default:
			recs[i].Data = bytes.Repeat([]byte{byte(r.IntN(256))}, sizes[r.IntN(len(sizes))]/(1+n/100))
		}
	}
	return recs
}

func sameBatch(a, b SignalBatch) bool {
	if len(a.Records) != len(b.Records) || (a.Records == nil) != (b.Records == nil) {
		return false
	}
	for i := range a.Records {
		x, y := a.Records[i], b.Records[i]
		if x.Kind != y.Kind || !bytes.Equal(x.Data, y.Data) || (x.Data == nil) != (y.Data == nil) {
			return false
		}
	}
	return true
}

// slowDecode is DecodeSignalBatch without the canonical fast path.
func slowDecode(data []byte, maxBytes int) (SignalBatch, error) {
	var b SignalBatch
	err := wire.Decode(data, wire.DecodeLimits{MaxBytes: maxBytes}, SignalBatchKind, &b)
	return b, err
}

func TestSignalBatch_EncodesAsWireEncodeAndDecodesBack(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		recs := randRecords(r)
		want, err := wire.Encode(SignalBatchKind, SignalBatch{Records: recs})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := EncodeSignalBatch(SignalBatch{Records: recs})
		if !bytes.Equal(got, want) {
			t.Fatalf("%d records: encoding differs from wire.Encode", len(recs))
		}
		if len(got) != cap(got) {
			t.Fatalf("size estimate %d, encoded %d", cap(got), len(got))
		}
		checkDecodeAgrees(t, got, 1<<30)
	}
}

// checkDecodeAgrees fails unless DecodeSignalBatch agrees with wire.Decode
// on data: the same records, or an error of the same code.
func checkDecodeAgrees(t *testing.T, data []byte, maxBytes int) {
	t.Helper()
	slow, serr := slowDecode(data, maxBytes)
	fast, ferr := DecodeSignalBatch(data, maxBytes)
	if (serr == nil) != (ferr == nil) {
		t.Fatalf("slow err %v, fast err %v", serr, ferr)
	}
	if serr != nil {
		var s, f *wire.WireError
		if !errors.As(serr, &s) || !errors.As(ferr, &f) || s.Code != f.Code {
			t.Fatalf("error codes differ: %v vs %v", serr, ferr)
		}
		return
	}
	if !sameBatch(fast, slow) {
		t.Fatalf("batches differ")
	}
}

func TestDecodeSignalBatch_AgreesWithWireDecode(t *testing.T) {
	good, _ := EncodeSignalBatch(SignalBatch{Records: []SignalRecord{{Kind: "observability", Data: []byte(`{"a":1}`)}, {Kind: "x", Data: []byte{}}}})
	cases := map[string][]byte{
		"good":      good,
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 0xc0),
		"nil records": func() []byte {
			b, _ := wire.Encode(SignalBatchKind, SignalBatch{})
			return b
		}(),
		"wrong kind": func() []byte {
			b, _ := wire.Encode("other", SignalBatch{Records: []SignalRecord{{Kind: "k"}}})
			return b
		}(),
		"str data": func() []byte {
			b, _ := wire.Encode(SignalBatchKind, map[string]any{"r": []any{map[string]any{"k": "k", "d": "text"}}})
			return b
		}(),
		"extra field": func() []byte {
			b, _ := wire.Encode(SignalBatchKind, map[string]any{"r": []any{map[string]any{"k": "k", "d": []byte("x"), "z": 1}}})
			return b
		}(),
		"huge count": append(append([]byte{}, good[:17]...), 0xdd, 0xff, 0xff, 0xff, 0xff),
		"empty":      nil,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			checkDecodeAgrees(t, data, 1<<20)
			checkDecodeAgrees(t, data, 20) // over MaxBytes
		})
	}
	t.Run("more values than MaxElements", func(t *testing.T) {
		recs := make([]SignalRecord, wire.DefaultMaxElements/5)
		for i := range recs {
			recs[i] = SignalRecord{Kind: "", Data: []byte{}}
		}
		data, _ := EncodeSignalBatch(SignalBatch{Records: recs})
		if _, err := DecodeSignalBatch(data, 1<<30); !errors.Is(err, wire.ErrWireTooManyElements) {
			t.Fatalf("accepted %d records", len(recs))
		}
		checkDecodeAgrees(t, data, 1<<30)
	})
}

func FuzzDecodeSignalBatch(f *testing.F) {
	for _, recs := range [][]SignalRecord{nil, {}, {{Kind: "observability", Data: []byte(`{"x":1}`)}}, {{Kind: "", Data: nil}, {Kind: "k", Data: []byte{}}}} {
		b, _ := EncodeSignalBatch(SignalBatch{Records: recs})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeAgrees(t, data, 1<<16)
		checkDecodeAgrees(t, data, len(data)/2+1)
	})
}

func BenchmarkSignalBatch(b *testing.B) {
	recs := make([]SignalRecord, 256)
	for i := range recs {
		recs[i] = SignalRecord{Kind: RecordObservability, Data: bytes.Repeat([]byte("x"), 430)}
	}
	data, _ := EncodeSignalBatch(SignalBatch{Records: recs})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			_, _ = EncodeSignalBatch(SignalBatch{Records: recs})
		}
	})
	b.Run("encode_wire", func(b *testing.B) {
		for b.Loop() {
			_, _ = wire.Encode(SignalBatchKind, SignalBatch{Records: recs})
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			_, _ = DecodeSignalBatch(data, 1<<20)
		}
	})
	b.Run("decode_wire", func(b *testing.B) {
		for b.Loop() {
			_, _ = slowDecode(data, 1<<20)
		}
	})
}
