package tracestore

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/klauspost/compress/s2"
)

// checkDictEncoder fails unless enc writes recordDict.Encode's bytes for
// src, and they decode back to src.
func checkDictEncoder(t *testing.T, enc *dictEncoder, src []byte) {
	t.Helper()
	want := recordDict.Encode(nil, src)
	got := enc.Encode(make([]byte, s2.MaxEncodedLen(len(src))), src)
	if !bytes.Equal(got, want) {
		t.Fatalf("%d-byte input: encoding differs from s2 (%d vs %d bytes)", len(src), len(got), len(want))
	}
	back, err := recordDict.Decode(nil, got)
	if err != nil || !bytes.Equal(back, src) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestDictEncoder_MatchesS2(t *testing.T) {
	enc := &dictEncoder{dict: recordDictEnc}
	r := rand.New(rand.NewPCG(5, 6))
	var inputs [][]byte
	for i := range 300 { // stored records, as Prepare writes them
		js := benchSpan(i, 7)
		inputs = append(inputs, append([]byte(`{"cursor":`+strconv.Itoa(i*4099)+`,"event":`), js...))
	}
	for _, n := range []int{0, 1, 31, 32, 33, 100, 1000, 65535 - 8, 65536, 70_000, 200_000} {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc{}\":,0123"[r.IntN(12)]
		}
		inputs = append(inputs, b)
		inputs = append(inputs, bytes.Repeat([]byte(recordDictText[:200]), n/200+1)[:n])
	}
	inputs = append(inputs, []byte(recordDictText), []byte(recordDictText[len(recordDictText)-600:]))
	for _, in := range inputs { // one encoder throughout: stale entries must not leak
		checkDictEncoder(t, enc, in)
	}
	t.Run("generation wrap", func(t *testing.T) {
		enc.gen = 65534
		for _, in := range inputs[:10] {
			checkDictEncoder(t, enc, in)
		}
		if enc.gen > 10 {
			t.Fatalf("generation did not wrap: %d", enc.gen)
		}
	})
}

func FuzzDictEncoder(f *testing.F) {
	f.Add(benchSpan(1, 1))
	f.Add([]byte(recordDictText[100:900]))
	f.Add(bytes.Repeat([]byte("ab"), 100))
	enc := &dictEncoder{dict: recordDictEnc}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDictEncoder(t, enc, data)
		checkDictEncoder(t, enc, append([]byte(`{"cursor":`), data...))
	})
}

func BenchmarkDictEncoder(b *testing.B) {
	js := append([]byte(`{"cursor":123456789,"event":`), benchSpan(12345, 4)...)
	dst := make([]byte, s2.MaxEncodedLen(len(js)))
	b.Run("tracestore", func(b *testing.B) {
		enc := &dictEncoder{dict: recordDictEnc}
		for b.Loop() {
			enc.Encode(dst, js)
		}
	})
	b.Run("s2", func(b *testing.B) {
		for b.Loop() {
			recordDict.Encode(dst, js)
		}
	})
}
