package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus/wire"
	"github.com/vmihailenco/msgpack/v5"
)

type inner struct {
	Name   string            `msgpack:"name"`
	Score  float64           `msgpack:"score"`
	Tags   []string          `msgpack:"tags"`
	Labels map[string]string `msgpack:"labels"`
}

type outer struct {
	ID      string    `msgpack:"id"`
	Seq     uint64    `msgpack:"seq"`
	Neg     int64     `msgpack:"neg"`
	OK      bool      `msgpack:"ok"`
	Blob    []byte    `msgpack:"blob"`
	At      time.Time `msgpack:"at"`
	Inner   inner     `msgpack:"inner"`
	Items   []inner   `msgpack:"items"`
	Ptr     *inner    `msgpack:"ptr"`
	Nothing *inner    `msgpack:"nothing"`
}

func sampleOuter() outer {
	return outer{
		ID: "job-1", Seq: 1 << 40, Neg: -12345, OK: true,
		Blob: []byte{0, 1, 2, 0xff},
		At:   time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		Inner: inner{Name: "a", Score: 0.5, Tags: []string{"x", "y"},
			Labels: map[string]string{"k": "v"}},
		Items: []inner{{Name: "b", Tags: []string{}}, {Name: "c", Score: -1}},
		Ptr:   &inner{Name: "p"},
	}
}

func mustEncode(t testing.TB, kind string, v any) []byte {
	t.Helper()
	b, err := wire.Encode(kind, v)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b
}

// envelopeWith builds [1, "k", <raw body>] around hand-made body bytes.
func envelopeWith(body []byte) []byte {
	return append([]byte{0x93, 0x01, 0xa1, 'k'}, body...)
}

func wantCode(t *testing.T, err error, sentinel *wire.WireError) {
	t.Helper()
	var we *wire.WireError
	if !errors.As(err, &we) {
		t.Fatalf("err = %v (%T), want *wire.WireError %s", err, err, sentinel.Code)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("err code = %s, want %s (%v)", we.Code, sentinel.Code, err)
	}
}

func TestCodec_RoundTripNestedStruct(t *testing.T) {
	in := sampleOuter()
	data := mustEncode(t, "sample_result", in)
	var out outer
	if err := wire.Decode(data, wire.DecodeLimits{}, "sample_result", &out); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !out.At.Equal(in.At) {
		t.Fatalf("time: got %v, want %v", out.At, in.At)
	}
	out.At = in.At // msgpack restores the instant, not the *time.Location
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip mismatch:\n in=%+v\nout=%+v", in, out)
	}
	env, err := wire.Peek(data, wire.DecodeLimits{})
	if err != nil || env.V != wire.WireVersion || env.Kind != "sample_result" {
		t.Fatalf("Peek = %+v, %v", env, err)
	}
}

func TestCodec_UnknownFieldsIgnored(t *testing.T) {
	type v2 struct {
		ID    string `msgpack:"id"`
		Extra []int  `msgpack:"extra"`
	}
	data := mustEncode(t, "task", v2{ID: "t1", Extra: []int{1, 2}})
	var got struct {
		ID string `msgpack:"id"`
	}
	if err := wire.Decode(data, wire.DecodeLimits{}, "task", &got); err != nil || got.ID != "t1" {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
}

func TestCodec_TruncatedAtEveryOffset(t *testing.T) {
	data := mustEncode(t, "sample_result", sampleOuter())
	for i := 0; i < len(data); i++ {
		var out outer
		err := wire.Decode(data[:i], wire.DecodeLimits{}, "sample_result", &out)
		wantCode(t, err, wire.ErrWireTruncated)
	}
}

func TestCodec_TrailingBytesRejected(t *testing.T) {
	data := append(mustEncode(t, "k", 1), 0x00)
	wantCode(t, wire.Decode(data, wire.DecodeLimits{}, "k", new(int)), wire.ErrWireMalformed)
}

func TestCodec_OversizedRejectedBeforeDecode(t *testing.T) {
	// 2 MiB of 0xc1 (a reserved byte): had the scanner looked at it, the
	// error would be wire_malformed.
	data := bytes.Repeat([]byte{0xc1}, 2<<20)
	wantCode(t, wire.Decode(data, wire.DecodeLimits{}, "k", new(any)), wire.ErrWireTooLarge)

	small := mustEncode(t, "k", strings.Repeat("x", 100))
	wantCode(t, wire.Decode(small, wire.DecodeLimits{MaxBytes: 50}, "k", new(string)), wire.ErrWireTooLarge)
	wantCode(t, wire.Decode(small, wire.DecodeLimits{MaxStrLen: 99}, "k", new(string)), wire.ErrWireTooLarge)
}

func TestCodec_HostileLengthsRejectedWithoutAllocating(t *testing.T) {
	be32 := func(tag byte) []byte {
		b := []byte{tag, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], 0xffffffff)
		return append(b, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a)
	}
	be16 := func(tag byte) []byte {
		return []byte{tag, 0xff, 0xff, 0x01, 0x02}
	}
	cases := map[string]struct {
		body []byte
		want *wire.WireError
	}{
		"array32":      {be32(0xdd), wire.ErrWireTruncated},
		"map32":        {be32(0xdf), wire.ErrWireTruncated},
		"str32":        {be32(0xdb), wire.ErrWireTooLarge}, // 4 GiB > MaxStrLen
		"bin32":        {be32(0xc6), wire.ErrWireTooLarge},
		"ext32":        {be32(0xc9), wire.ErrWireTooLarge},
		"array16":      {be16(0xdc), wire.ErrWireTruncated},
		"map16":        {be16(0xde), wire.ErrWireTruncated},
		"str16":        {be16(0xda), wire.ErrWireTruncated},
		"bin16":        {be16(0xc5), wire.ErrWireTruncated},
		"fixarray":     {[]byte{0x9f, 0x01}, wire.ErrWireTruncated},
		"header_short": {[]byte{0xdd, 0xff}, wire.ErrWireTruncated},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data := envelopeWith(tc.body)
			var target any
			wantCode(t, wire.Decode(data, wire.DecodeLimits{}, "k", &target), tc.want)

			allocs := testing.AllocsPerRun(100, func() {
				_ = wire.Decode(data, wire.DecodeLimits{}, "k", &target)
			})
			if allocs > 2 { // the *WireError itself
				t.Fatalf("%v allocs per rejected decode, want <= 2", allocs)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range 100 {
				_ = wire.Decode(data, wire.DecodeLimits{}, "k", &target)
			}
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > 64<<10 {
				t.Fatalf("100 rejected decodes allocated %d bytes", d)
			}
		})
	}
}

func TestCodec_DepthBombRejected(t *testing.T) {
	t.Run("arrays", func(t *testing.T) {
		body := append(bytes.Repeat([]byte{0x91}, 100_000), 0xc0)
		wantCode(t, wire.Decode(envelopeWith(body), wire.DecodeLimits{}, "k", new(any)), wire.ErrWireDepthExceeded)
	})
	t.Run("maps", func(t *testing.T) {
		body := append(bytes.Repeat([]byte{0x81, 0xa1, 'a'}, 50_000), 0xc0)
		wantCode(t, wire.Decode(envelopeWith(body), wire.DecodeLimits{}, "k", new(any)), wire.ErrWireDepthExceeded)
	})
	t.Run("limit is exact", func(t *testing.T) {
		// Envelope is depth 1, so 31 nested arrays in the body reach 32.
		body := append(bytes.Repeat([]byte{0x91}, 31), 0xc0)
		if err := wire.Decode(envelopeWith(body), wire.DecodeLimits{}, "k", new(any)); err != nil {
			t.Fatalf("depth 32: %v", err)
		}
		body = append(bytes.Repeat([]byte{0x91}, 32), 0xc0)
		wantCode(t, wire.Decode(envelopeWith(body), wire.DecodeLimits{}, "k", new(any)), wire.ErrWireDepthExceeded)
	})
	t.Run("deep limit beyond inline stack", func(t *testing.T) {
		body := append(bytes.Repeat([]byte{0x91}, 99), 0xc0)
		if _, err := wire.Peek(envelopeWith(body), wire.DecodeLimits{MaxDepth: 100}); err != nil {
			t.Fatalf("depth 100: %v", err)
		}
	})
}

func TestCodec_TooManyElements(t *testing.T) {
	data := mustEncode(t, "k", make([]int, 1000))
	wantCode(t, wire.Decode(data, wire.DecodeLimits{MaxElements: 500}, "k", new([]int)), wire.ErrWireTooManyElements)
	// envelope + version + kind + body array + 1000 ints = 1004 values.
	wantCode(t, wire.Decode(data, wire.DecodeLimits{MaxElements: 1003}, "k", new([]int)), wire.ErrWireTooManyElements)
	if err := wire.Decode(data, wire.DecodeLimits{MaxElements: 1004}, "k", new([]int)); err != nil {
		t.Fatalf("exactly at the limit: %v", err)
	}
}

func TestCodec_VersionAndKind(t *testing.T) {
	t.Run("wrong kind", func(t *testing.T) {
		data := mustEncode(t, "task", 1)
		wantCode(t, wire.Decode(data, wire.DecodeLimits{}, "result", new(int)), wire.ErrWireWrongKind)
	})
	t.Run("future version", func(t *testing.T) {
		data := []byte{0x94, 0x02, 0xa1, 'k', 0x01, 0x02} // [2, "k", 1, 2]
		wantCode(t, wire.Decode(data, wire.DecodeLimits{}, "k", new(int)), wire.ErrWireBadVersion)
	})
	t.Run("version zero", func(t *testing.T) {
		wantCode(t, wire.Decode([]byte{0x93, 0x00, 0xa1, 'k', 0x01}, wire.DecodeLimits{}, "k", new(int)), wire.ErrWireBadVersion)
	})
	t.Run("not an envelope", func(t *testing.T) {
		for _, data := range [][]byte{
			{0x01},                        // a bare int
			{0x92, 0x01, 0xa1},            // truncated
			{0x93, 0xa1, 'k', 0x01, 0x01}, // version is a string
			{0x93, 0x01, 0x01, 0x01},      // kind is an int
			{0x94, 0x01, 0xa1, 'k', 1, 2}, // v1 with 4 elements
			{0xc1},                        // reserved byte
		} {
			err := wire.Decode(data, wire.DecodeLimits{}, "k", new(int))
			var we *wire.WireError
			if !errors.As(err, &we) {
				t.Fatalf("% x: err = %v, want *WireError", data, err)
			}
		}
	})
	t.Run("body type mismatch", func(t *testing.T) {
		data := mustEncode(t, "k", "a string")
		wantCode(t, wire.Decode(data, wire.DecodeLimits{}, "k", new(int)), wire.ErrWireMalformed)
	})
	t.Run("bad kind on encode", func(t *testing.T) {
		for _, k := range []string{"", "Task", "a b", "a*", strings.Repeat("a", 65)} {
			_, err := wire.Encode(k, 1)
			wantCode(t, err, wire.ErrWireBadKind)
		}
	})
	t.Run("unencodable", func(t *testing.T) {
		_, err := wire.Encode("k", make(chan int))
		wantCode(t, err, wire.ErrWireEncode)
	})
}

func TestWireError_IsMatchesByCode(t *testing.T) {
	err := error(&wire.WireError{Code: wire.CodeTruncated, Offset: 7, Detail: "x"})
	if !errors.Is(err, wire.ErrWireTruncated) || errors.Is(err, wire.ErrWireMalformed) {
		t.Fatal("errors.Is must match by code only")
	}
	if !strings.Contains(err.Error(), "wire_truncated") || !strings.Contains(err.Error(), "offset 7") {
		t.Fatalf("Error() = %q", err.Error())
	}
	// A raw msgpack encoding of the same value decodes (the envelope is
	// plain msgpack).
	var raw []any
	if err := msgpack.Unmarshal(mustEncode(t, "k", 5), &raw); err != nil || len(raw) != 3 {
		t.Fatalf("raw decode = %v, %v", raw, err)
	}
}
