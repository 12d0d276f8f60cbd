package jsonlimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func wantCode(t *testing.T, err error, code string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want *Error with code %s", err, code)
	}
	if e.Code != code {
		t.Fatalf("code = %s (%v), want %s", e.Code, err, code)
	}
	return e
}

func TestLimits_NormalizeAndTighten(t *testing.T) {
	got, err := Limits{}.Normalize()
	if err != nil || got != DefaultLimits() {
		t.Fatalf("Limits{}.Normalize() = %+v, %v; want defaults", got, err)
	}
	got, err = DefaultLimits().Tighten(Limits{MaxList: 5, MaxDepth: 3})
	want := DefaultLimits()
	want.MaxList, want.MaxDepth = 5, 3
	if err != nil || got != want {
		t.Fatalf("Tighten = %+v, %v; want %+v", got, err, want)
	}
	// Tightening again may only go lower than the already tightened value.
	if _, err := got.Tighten(Limits{MaxList: 6}); !errors.Is(err, ErrInvalidLimits) {
		t.Fatalf("raising a tightened limit: err = %v, want ErrInvalidLimits", err)
	}
	for _, bad := range []Limits{
		{MaxDepth: DefaultMaxDepth + 1},
		{MaxNodes: -1},
		{MaxBytes: DefaultMaxBytes + 1},
		{MaxStringTotal: 1 << 30},
	} {
		if _, err := bad.Normalize(); !errors.Is(err, ErrInvalidLimits) {
			t.Errorf("%+v.Normalize(): err = %v, want ErrInvalidLimits", bad, err)
		}
		if _, err := DefaultLimits().Tighten(bad); !errors.Is(err, ErrInvalidLimits) {
			t.Errorf("Tighten(%+v): err = %v, want ErrInvalidLimits", bad, err)
		}
		if _, err := Decode([]byte("1"), bad); !errors.Is(err, ErrInvalidLimits) {
			t.Errorf("Decode with %+v: err = %v, want ErrInvalidLimits", bad, err)
		}
	}
}

func TestDecode_Values(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{`null`, nil},
		{` true `, true},
		{`false`, false},
		{`0`, json.Number("0")},
		{`-12.5e+3`, json.Number("-12.5e+3")},
		{`12345678901234567890123`, json.Number("12345678901234567890123")},
		{`""`, ""},
		{`"a\"\\\/\b\f\n\r\tz"`, "a\"\\/\b\f\n\r\tz"},
		{`"\u00e9\u20AC\ud83d\ude00"`, "é€😀"},
		{`"héllo 😀"`, "héllo 😀"},
		{`[]`, []any{}},
		{`{}`, map[string]any{}},
		{`{"a":[1,{"b":null}],"c":"d"}`, map[string]any{"a": []any{json.Number("1"), map[string]any{"b": nil}}, "c": "d"}},
		{"\r\n\t[ 1 , 2 ]\n", []any{json.Number("1"), json.Number("2")}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Decode([]byte(tt.in), Limits{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decode = %#v, want %#v", got, tt.want)
			}
			var std any
			dec := json.NewDecoder(strings.NewReader(tt.in))
			dec.UseNumber()
			if err := dec.Decode(&std); err != nil || !reflect.DeepEqual(got, std) {
				t.Fatalf("encoding/json disagrees: %#v, %v", std, err)
			}
			if err := Check([]byte(tt.in), Limits{}); err != nil {
				t.Fatalf("Check: %v", err)
			}
		})
	}
}

// nestedArrays returns n arrays inside each other.
func nestedArrays(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// listOf returns an array of n copies of elem.
func listOf(n int, elem string) string {
	if n == 0 {
		return "[]"
	}
	return "[" + strings.Repeat(elem+",", n-1) + elem + "]"
}

// objectOf returns an object with n keys k0..k(n-1), each mapped to 0.
func objectOf(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":0`, i)
	}
	b.WriteByte('}')
	return b.String()
}

// nodesDoc returns a document of exactly n nodes (n >= 1) that respects the
// list limit: an outer array of arrays of zeros.
func nodesDoc(n, maxList int) string {
	var chunks []string
	for rest := n - 1; rest > 0; {
		m := min(rest-1, maxList)
		chunks = append(chunks, listOf(m, "0"))
		rest -= m + 1
	}
	return "[" + strings.Join(chunks, ",") + "]"
}

// stringsDoc returns an array of strings of total decoded length total, each
// at most per bytes.
func stringsDoc(total, per int) string {
	var parts []string
	for total > 0 {
		n := min(total, per)
		parts = append(parts, `"`+strings.Repeat("a", n)+`"`)
		total -= n
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestDecode_LimitEdges(t *testing.T) {
	tight := Limits{MaxDepth: 3, MaxNodes: 12, MaxString: 5, MaxStringTotal: 12, MaxList: 4, MaxObjectKeys: 3, MaxBytes: 40}
	for _, set := range []struct {
		name string
		lim  Limits
	}{{"default", DefaultLimits()}, {"tightened", tight}} {
		l, err := set.lim.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name      string
			code      string
			edge, out string
		}{
			{"depth", CodeDepth, nestedArrays(l.MaxDepth), nestedArrays(l.MaxDepth + 1)},
			{"depth/objects", CodeDepth,
				strings.Repeat(`{"a":`, l.MaxDepth-1) + "{}" + strings.Repeat("}", l.MaxDepth-1),
				strings.Repeat(`{"a":`, l.MaxDepth) + "{}" + strings.Repeat("}", l.MaxDepth)},
			{"nodes", CodeNodes, nodesDoc(l.MaxNodes, l.MaxList), nodesDoc(l.MaxNodes+1, l.MaxList)},
			{"string", CodeString, `"` + strings.Repeat("a", l.MaxString) + `"`, `"` + strings.Repeat("a", l.MaxString+1) + `"`},
			{"string/escaped", CodeString, `"` + strings.Repeat(`\n`, l.MaxString) + `"`, `"` + strings.Repeat(`\n`, l.MaxString+1) + `"`},
			{"string/key", CodeString, `{"` + strings.Repeat("k", l.MaxString) + `":1}`, `{"` + strings.Repeat("k", l.MaxString+1) + `":1}`},
			{"string total", CodeStringBudget, stringsDoc(l.MaxStringTotal, l.MaxString), stringsDoc(l.MaxStringTotal+1, l.MaxString)},
			{"list", CodeList, listOf(l.MaxList, "0"), listOf(l.MaxList+1, "0")},
			{"object", CodeObject, objectOf(l.MaxObjectKeys), objectOf(l.MaxObjectKeys + 1)},
			{"bytes", CodeTooLarge, "0" + strings.Repeat(" ", l.MaxBytes-1), "0" + strings.Repeat(" ", l.MaxBytes)},
		}
		for _, tt := range tests {
			t.Run(set.name+"/"+tt.name, func(t *testing.T) {
				if len(tt.edge) > l.MaxBytes {
					t.Skipf("edge document (%d bytes) exceeds MaxBytes", len(tt.edge))
				}
				if _, err := Decode([]byte(tt.edge), set.lim); err != nil {
					t.Fatalf("edge rejected: %v", err)
				}
				if err := Check([]byte(tt.edge), set.lim); err != nil {
					t.Fatalf("edge rejected by Check: %v", err)
				}
				_, err := Decode([]byte(tt.out), set.lim)
				e := wantCode(t, err, tt.code)
				if tt.code != CodeTooLarge && len(tt.out) > l.MaxBytes {
					t.Fatalf("test bug: past-the-edge document exceeds MaxBytes")
				}
				if e.Limit == 0 {
					t.Errorf("Limit not set: %v", err)
				}
				wantCode(t, Check([]byte(tt.out), set.lim), tt.code)
			})
		}
	}
}

func TestDecode_ErrorPath(t *testing.T) {
	tests := []struct {
		name string
		in   string
		lim  Limits
		code string
		path string
		key  string
	}{
		{"list", `{"cases":[{},{},{},{"turns":[1,2,3,4,5]}]}`, Limits{MaxList: 4}, CodeList, "$.cases[3].turns", ""},
		{"object", `{"a":{"b":1,"c":2}}`, Limits{MaxObjectKeys: 1}, CodeObject, "$.a", ""},
		{"string", `[0,{"x y":"toolong"}]`, Limits{MaxString: 4}, CodeString, `$[1]["x y"]`, ""},
		{"depth", `{"a":[[1]]}`, Limits{MaxDepth: 2}, CodeDepth, "$.a[0]", ""},
		{"duplicate", `{"a":{"k":1,"k":2}}`, Limits{}, CodeDuplicateKey, "$.a", "k"},
		{"duplicate/escaped", `{"k":1,"\u006b":2}`, Limits{}, CodeDuplicateKey, "$", "k"},
		{"syntax", `{"a":[1,}`, Limits{}, CodeInvalidJSON, "$.a[1]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in), tt.lim)
			e := wantCode(t, err, tt.code)
			if e.Path != tt.path || e.Key != tt.key {
				t.Fatalf("path, key = %q, %q; want %q, %q (%v)", e.Path, e.Key, tt.path, tt.key, err)
			}
		})
	}
}

func TestDecode_Invalid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		code string
	}{
		{"empty", ``, CodeInvalidJSON},
		{"space", `   `, CodeInvalidJSON},
		{"truncated object", `{"a":1`, CodeInvalidJSON},
		{"truncated key", `{"a`, CodeInvalidJSON},
		{"truncated after colon", `{"a":`, CodeInvalidJSON},
		{"truncated array", `[1,2`, CodeInvalidJSON},
		{"truncated string", `"abc`, CodeInvalidJSON},
		{"truncated escape", `"\`, CodeInvalidJSON},
		{"truncated unicode", `"\u12"`, CodeInvalidJSON},
		{"truncated literal", `tru`, CodeInvalidJSON},
		{"truncated number", `-`, CodeInvalidJSON},
		{"truncated fraction", `1.`, CodeInvalidJSON},
		{"truncated exponent", `1e+`, CodeInvalidJSON},
		{"trailing garbage", `{} x`, CodeInvalidJSON},
		{"two documents", `1 2`, CodeInvalidJSON},
		{"trailing comma array", `[1,]`, CodeInvalidJSON},
		{"trailing comma object", `{"a":1,}`, CodeInvalidJSON},
		{"leading zero", `01`, CodeInvalidJSON},
		{"plus", `+1`, CodeInvalidJSON},
		{"bare fraction", `.5`, CodeInvalidJSON},
		{"NaN", `NaN`, CodeInvalidJSON},
		{"single quotes", `'a'`, CodeInvalidJSON},
		{"unquoted key", `{a:1}`, CodeInvalidJSON},
		{"missing colon", `{"a" 1}`, CodeInvalidJSON},
		{"control char", "\"a\x01\"", CodeInvalidJSON},
		{"bad escape", `"\x"`, CodeInvalidJSON},
		{"BOM", "\uFEFF{}", CodeInvalidJSON},
		{"invalid utf8", "\"\xff\"", CodeInvalidUTF8},
		{"invalid utf8 with escape", "\"\\n\xc3\"", CodeInvalidUTF8},
		{"lone high surrogate", `"\ud83d"`, CodeInvalidUTF8},
		{"lone low surrogate", `"\ude00"`, CodeInvalidUTF8},
		{"high then non-surrogate", `"\ud83d\u0041"`, CodeInvalidUTF8},
		{"duplicate key", `{"a":1,"a":1}`, CodeDuplicateKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in), Limits{})
			wantCode(t, err, tt.code)
			wantCode(t, Check([]byte(tt.in), Limits{}), tt.code)
			if tt.code == CodeInvalidJSON && json.Valid([]byte(tt.in)) {
				t.Fatalf("encoding/json accepts %q", tt.in)
			}
		})
	}
}

func TestError_MessageIsBounded(t *testing.T) {
	key := strings.Repeat("k", 1000)
	_, err := Decode([]byte(`{"`+key+`":1,"`+key+`":2}`), Limits{})
	e := wantCode(t, err, CodeDuplicateKey)
	if len(e.Key) > maxKeyInError+3 || len(err.Error()) > 300 {
		t.Fatalf("error not bounded: %d bytes: %v", len(err.Error()), err)
	}
	secret := strings.Repeat("s3cr3t", 100)
	_, err = Decode([]byte(`{"a":"`+secret+`"}`), Limits{MaxString: 10})
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error echoes the value: %v", err)
	}
}

// heapGrowth runs f and returns the bytes it allocated.
func heapGrowth(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestDecode_RejectsBeforeAllocating(t *testing.T) {
	const elems = 1_000_000
	big := []byte(listOf(elems, "1234567890"))                                  // ~11 MiB, 1M numbers
	deep := []byte(strings.Repeat("[", 8<<20))                                  // 8 MiB of nesting
	long := []byte(`"` + strings.Repeat("x", 15<<20) + `"`)                     // one 15 MiB string
	longEsc := []byte(`"` + strings.Repeat(`\u0041`, 2<<20) + `"`)              // 12 MiB of escapes
	wide := []byte(objectOf(200_000))                                           // 200k keys
	many := []byte(stringsDoc(DefaultMaxStringTotal+(1<<20), DefaultMaxString)) // 9 MiB of strings
	tests := []struct {
		name string
		doc  []byte
		code string
		max  uint64 // bytes Decode may allocate
	}{
		{"list", big, CodeList, 2 << 20},
		{"depth", deep, CodeDepth, 64 << 10},
		{"string", long, CodeString, 64 << 10},
		{"escaped string", longEsc, CodeString, 2 << 20},
		{"object", wide, CodeObject, 4 << 20},
		{"string budget", many, CodeStringBudget, 12 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			got := heapGrowth(func() { _, err = Decode(tt.doc, Limits{}) })
			wantCode(t, err, tt.code)
			if got > tt.max {
				t.Fatalf("Decode allocated %d bytes for a %d-byte document, want <= %d", got, len(tt.doc), tt.max)
			}
			t.Logf("%d-byte document rejected after allocating %d bytes", len(tt.doc), got)
		})
	}
	// For scale: what accepting the 1M-element list would have cost.
	var full any
	decoded := heapGrowth(func() {
		dec := json.NewDecoder(bytes.NewReader(big))
		dec.UseNumber()
		_ = dec.Decode(&full)
	})
	t.Logf("encoding/json allocates %d bytes decoding the same list", decoded)
}

// endless is a reader of an unbounded JSON array that counts what is read.
type endless struct{ n int64 }

func (r *endless) Read(p []byte) (int, error) {
	for i := range p {
		if r.n == 0 {
			p[i] = '['
		} else {
			p[i] = "0,"[r.n%2]
		}
		r.n++
	}
	return len(p), nil
}

func TestDecodeReader(t *testing.T) {
	r := &endless{}
	_, err := DecodeReader(r, Limits{MaxBytes: 1 << 20})
	wantCode(t, err, CodeTooLarge)
	if r.n > 1<<20+1 {
		t.Fatalf("read %d bytes, want at most MaxBytes+1", r.n)
	}
	v, err := DecodeReader(strings.NewReader(`{"a":[true]}`), Limits{})
	if err != nil || !reflect.DeepEqual(v, map[string]any{"a": []any{true}}) {
		t.Fatalf("DecodeReader = %#v, %v", v, err)
	}
	_, err = DecodeReader(io.MultiReader(strings.NewReader(`[1`), iotest{}), Limits{})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("read error not surfaced: %v", err)
	}
}

type iotest struct{}

func (iotest) Read([]byte) (int, error) { return 0, errors.New("boom") }

type evalCase struct {
	ID    string         `json:"id"`
	Turns []string       `json:"turns"`
	Meta  map[string]any `json:"metadata"`
	Score float64        `json:"score"`
}

type evalSet struct {
	SchemaVersion int        `json:"schema_version"`
	Cases         []evalCase `json:"cases"`
}

func TestUnmarshal(t *testing.T) {
	t.Run("ok", func(t *testing.T) {
		var s evalSet
		err := Unmarshal([]byte(`{"schema_version":2,"cases":[{"id":"a","turns":["hi"],"metadata":{"n":12345678901234567890},"score":0.5}]}`), Limits{}, &s)
		if err != nil {
			t.Fatal(err)
		}
		if s.SchemaVersion != 2 || s.Cases[0].ID != "a" || s.Cases[0].Meta["n"] != json.Number("12345678901234567890") {
			t.Fatalf("got %+v", s)
		}
	})
	long := strings.Repeat("x", 100)
	tests := []struct {
		name string
		in   string
		lim  Limits
		code string
		key  string
		path string
	}{
		{"unknown top-level", `{"schema_version":2,"extra":1}`, Limits{}, CodeUnknownField, "extra", "$"},
		{"unknown nested", `{"cases":[{"id":"a","bogus":true}]}`, Limits{}, CodeUnknownField, "bogus", "$"},
		{"unknown long key truncated", `{"` + long + `":1}`, Limits{}, CodeUnknownField, long[:64] + "...", "$"},
		{"limit before decode", `{"cases":[{"turns":["a","b","c"]}]}`, Limits{MaxList: 2}, CodeList, "", "$.cases[0].turns"},
		{"duplicate key", `{"schema_version":1,"schema_version":2}`, Limits{}, CodeDuplicateKey, "schema_version", "$"},
		{"trailing data", `{} {}`, Limits{}, CodeInvalidJSON, "", "$"},
		{"wrong type", `{"cases":[{"id":5}]}`, Limits{}, CodeType, "", "$.cases.id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s evalSet
			e := wantCode(t, Unmarshal([]byte(tt.in), tt.lim, &s), tt.code)
			if e.Key != tt.key || e.Path != tt.path {
				t.Fatalf("key, path = %q, %q; want %q, %q (%v)", e.Key, e.Path, tt.key, tt.path, e)
			}
		})
	}
	t.Run("invalid value keeps cause", func(t *testing.T) {
		var v struct{ T rejecter }
		err := Unmarshal([]byte(`{"T":"secret-ish"}`), Limits{}, &v)
		e := wantCode(t, err, CodeInvalidValue)
		if !errors.Is(err, errRejected) || strings.Contains(e.Error(), "secret-ish") {
			t.Fatalf("cause lost or echoed: %v", err)
		}
	})
	t.Run("non-pointer", func(t *testing.T) {
		var s evalSet
		if err := Unmarshal([]byte(`{}`), Limits{}, s); err == nil || ErrorCode(err) != "" {
			t.Fatalf("err = %v, want a plain error", err)
		}
	})
}

var errRejected = errors.New("rejected")

type rejecter struct{}

func (*rejecter) UnmarshalJSON([]byte) error { return errRejected }

func TestDecodeDeferring_BuildsTheDeferredArrayOneElementAtATime(t *testing.T) {
	data := []byte(`{"id":"s","cases":[{"id":"a","n":[1,2]}, "x" ,[]],"more":{"cases":[3]}}`)
	v, err := DecodeDeferring(data, Limits{}, "cases")
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	span, ok := m["cases"].(Deferred)
	if !ok || span.Len != 3 || !span.IsArray() {
		t.Fatalf("cases = %#v", m["cases"])
	}
	if _, nested := m["more"].(map[string]any)["cases"].([]any); !nested {
		t.Fatal("only the top-level key is deferred")
	}
	var got []any
	if err := EachElement(data, span, Limits{}, func(i int, v any) error { got = append(got, v); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []any{map[string]any{"id": "a", "n": []any{json.Number("1"), json.Number("2")}}, "x", []any{}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("elements = %#v", got)
	}
	stop := errors.New("stop")
	if err := EachElement(data, span, Limits{}, func(int, any) error { return stop }); err != stop {
		t.Fatalf("fn's error: %v", err)
	}
	// Limits count the deferred part: the same error as Decode.
	_, want1 := Decode(data, Limits{MaxNodes: 8})
	_, got1 := DecodeDeferring(data, Limits{MaxNodes: 8}, "cases")
	if want1 == nil || got1 == nil || got1.Error() != want1.Error() {
		t.Fatalf("limit errors differ: %v vs %v", got1, want1)
	}
	if err := EachElement(data, Deferred{Start: 0, End: 3, Len: -1}, Limits{}, func(int, any) error { return nil }); ErrorCode(err) != CodeType {
		t.Fatalf("not an array: %v", err)
	}
}
