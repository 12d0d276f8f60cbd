package canonjson

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fadcedab/adk/internal/jsonlimit"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatalf("Marshal(%#v): %v", v, err)
	}
	return string(b)
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
}

func TestMarshal_RFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := Canonicalize([]byte(in))
	if err != nil || string(got) != want {
		t.Fatalf("Canonicalize =\n%s, %v\nwant\n%s", got, err, want)
	}
}

func TestMarshal_KeyOrder(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]any
		want string
	}{
		{"ascii", map[string]any{"b": 1, "a": 2, "aa": 3, "B": 4, "": 5, "a b": 6},
			`{"":5,"B":4,"a":2,"a b":6,"aa":3,"b":1}`},
		// RFC 8785 §3.2.3: UTF-16 order puts the emoji (a surrogate pair)
		// before U+FB33, where UTF-8 byte order would not.
		{"rfc8785", map[string]any{
			"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
			"1": "One", "\U0001F600": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis",
		}, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"supplementary pairs", map[string]any{"\U0001F601": 1, "\U0001F600": 2, "\U00010000": 3, "\uffff": 4},
			"{\"\U00010000\":3,\"\U0001F600\":2,\"\U0001F601\":1,\"\uffff\":4}"},
		{"prefix", map[string]any{"ab": 1, "a": 2, "abc": 3}, `{"a":2,"ab":1,"abc":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustMarshal(t, tt.in); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestCompareUTF16(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"a", "b", -1}, {"b", "a", 1}, {"a", "a", 0}, {"a", "ab", -1}, {"", "a", -1},
		{"\U0001F600", "\ufb33", -1}, {"\ufb33", "\U0001F600", 1}, {"\ud7ff", "\U00010000", -1},
		{"\U0001F600", "\U0001F601", -1}, {"\U0010FFFF", "\U00010000", 1},
	}
	for _, tt := range tests {
		if got := compareUTF16(tt.a, tt.b); got != tt.want {
			t.Errorf("compareUTF16(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestMarshal_Strings(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{"quote\" backslash\\ slash/", `"quote\" backslash\\ slash/"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f" + `"`},
		{"<script>&amp;", `"<script>&amp;"`},
		{"line\u2028sep\u2029", "\"line\u2028sep\u2029\""},
		{"héllo wörld 😀 中文", `"héllo wörld 😀 中文"`},
		{"\ufeff", "\"\ufeff\""},
	}
	for _, tt := range tests {
		if got := mustMarshal(t, tt.in); got != tt.want {
			t.Errorf("Marshal(%q) = %s, want %s", tt.in, got, tt.want)
		}
		var back string
		if err := json.Unmarshal([]byte(mustMarshal(t, tt.in)), &back); err != nil || back != tt.in {
			t.Errorf("%q does not round-trip: %q, %v", tt.in, back, err)
		}
	}
}

// Variables, so that 0.1 + 0.2 is computed in float64 rather than folded
// exactly as a constant.
var pointOne, pointTwo = 0.1, 0.2

func TestMarshal_Numbers(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{json.Number("1.0"), "1"},
		{1.0, "1"},
		{json.Number("1e21"), "1e+21"},
		{1e21, "1e+21"},
		{1e20, "100000000000000000000"},
		{json.Number("1e-7"), "1e-7"},
		{1e-7, "1e-7"},
		{1e-6, "0.000001"},
		{json.Number("-0"), "0"},
		{json.Number("-0.0"), "0"},
		{math.Copysign(0, -1), "0"},
		{json.Number("12345678901234567890123"), "12345678901234567890123"},
		{json.Number("-9007199254740993"), "-9007199254740993"},
		{json.Number("0.1"), "0.1"},
		{json.Number("1E2"), "100"},
		{json.Number("2.50e-3"), "0.0025"},
		{json.Number("1e-400"), "0"},
		{pointOne + pointTwo, "0.30000000000000004"},
		{float32(0.1), "0.1"},
		{float32(16777216), "16777216"},
		{int(-7), "-7"}, {int8(-8), "-8"}, {int16(16), "16"}, {int32(32), "32"}, {int64(math.MinInt64), "-9223372036854775808"},
		{uint(7), "7"}, {uint8(8), "8"}, {uint16(16), "16"}, {uint32(32), "32"}, {uint64(math.MaxUint64), "18446744073709551615"},
	}
	for _, tt := range tests {
		if got := mustMarshal(t, tt.in); got != tt.want {
			t.Errorf("Marshal(%T %v) = %s, want %s", tt.in, tt.in, got, tt.want)
		}
	}
}

// TestMarshal_ES6Numbers checks the float formatting against RFC 8785
// Appendix B (IEEE 754 bits → ECMAScript string).
func TestMarshal_ES6Numbers(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		f := math.Float64frombits(tt.bits)
		if got := mustMarshal(t, f); got != tt.want {
			t.Errorf("Marshal(%#016x) = %s, want %s", tt.bits, got, tt.want)
		}
		// The canonical text read back as json.Number canonicalises to itself.
		if got := mustMarshal(t, json.Number(tt.want)); got != tt.want {
			t.Errorf("Marshal(json.Number(%s)) = %s", tt.want, got)
		}
	}
}

type turn struct {
	Role string `json:"role"`
	Text string `json:"text,omitempty"`
}

type evalCase struct {
	ID       string         `json:"id"`
	Turns    []turn         `json:"turns"`
	Score    float64        `json:"score"`
	Weight   float32        `json:"weight"`
	Count    uint64         `json:"count"`
	Expected *string        `json:"expected"`
	Meta     map[string]any `json:"metadata"`
	HTML     string         `json:"html"`
}

func TestMarshal_StructEqualsMap(t *testing.T) {
	s := evalCase{
		ID: "c1", Turns: []turn{{Role: "user", Text: "hi <b>"}, {Role: "agent"}},
		Score: 1.0, Weight: 0.1, Count: math.MaxUint64, Meta: map[string]any{"z": 1, "a": []any{"x"}}, HTML: "a&b",
	}
	m := map[string]any{
		"id":       "c1",
		"turns":    []any{map[string]any{"role": "user", "text": "hi <b>"}, map[string]any{"role": "agent"}},
		"score":    1,
		"weight":   0.1,
		"count":    json.Number("18446744073709551615"),
		"expected": nil,
		"metadata": map[string]any{"a": []any{"x"}, "z": 1},
		"html":     "a&b",
	}
	fromStruct, fromPtr, fromMap := mustMarshal(t, s), mustMarshal(t, &s), mustMarshal(t, m)
	if fromStruct != fromMap || fromPtr != fromMap {
		t.Fatalf("struct and map differ:\n%s\n%s\n%s", fromStruct, fromPtr, fromMap)
	}
	want := `{"count":18446744073709551615,"expected":null,"html":"a&b","id":"c1","metadata":{"a":["x"],"z":1},"score":1,"turns":[{"role":"user","text":"hi <b>"},{"role":"agent"}],"weight":0.1}`
	if fromMap != want {
		t.Fatalf("got  %s\nwant %s", fromMap, want)
	}
	// Generic containers of other shapes take the same path.
	if got := mustMarshal(t, map[string]string{"b": "1", "a": "2"}); got != `{"a":"2","b":"1"}` {
		t.Fatalf("map[string]string: %s", got)
	}
	if got := mustMarshal(t, map[string]int{"b": 1, "a": 2}); got != `{"a":2,"b":1}` {
		t.Fatalf("map[string]int: %s", got)
	}
	if got := mustMarshal(t, []string{"x", "y"}); got != `["x","y"]` {
		t.Fatalf("[]string: %s", got)
	}
	if got := mustMarshal(t, map[string]any{"n": nil, "l": []any(nil), "m": map[string]any(nil), "e": []any{}}); got != `{"e":[],"l":null,"m":null,"n":null}` {
		t.Fatalf("nils: %s", got)
	}
}

func TestMarshal_Errors(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	type withFloat struct{ F float64 }
	type withChan struct{ C chan int }
	tests := []struct {
		name string
		in   any
		code string
		path string
	}{
		{"NaN", math.NaN(), CodeNonFinite, "$"},
		{"+Inf nested", map[string]any{"a": []any{1, math.Inf(1)}}, CodeNonFinite, `$["a"][1]`},
		{"float32 -Inf", float32(math.Inf(-1)), CodeNonFinite, "$"},
		{"NaN in struct", map[string]any{"s": withFloat{math.NaN()}}, CodeNonFinite, `$["s"]`},
		{"overflowing number", json.Number("1e400"), CodeNonFinite, "$"},
		{"invalid number", json.Number("01"), CodeInvalidNumber, "$"},
		{"empty number", json.Number(""), CodeInvalidNumber, "$"},
		{"number with space", json.Number("1 "), CodeInvalidNumber, "$"},
		{"invalid UTF-8 value", []any{"ok", "\xff"}, CodeInvalidUTF8, "$[1]"},
		{"invalid UTF-8 key", map[string]any{"\xc3": 1}, CodeInvalidUTF8, `$["\xc3"]`},
		{"channel", withChan{make(chan int)}, CodeUnsupported, "$"},
		{"func", func() {}, CodeUnsupported, "$"},
		{"cycle", cyclic, CodeTooDeep, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Marshal(tt.in)
			wantCode(t, err, tt.code)
			var e *Error
			errors.As(err, &e)
			if tt.path != "" && e.Path != tt.path {
				t.Fatalf("path = %s, want %s", e.Path, tt.path)
			}
			if len(err.Error()) > 2048 {
				t.Fatalf("unbounded error: %d bytes", len(err.Error()))
			}
			if _, err := Digest(tt.in); err == nil {
				t.Fatal("Digest accepted what Marshal refused")
			}
		})
	}
	_, err := Canonicalize([]byte(`{"a":1,"a":2}`))
	if jsonlimit.ErrorCode(err) != jsonlimit.CodeDuplicateKey {
		t.Fatalf("Canonicalize duplicate keys: %v", err)
	}
}

func TestDigest(t *testing.T) {
	v := map[string]any{"c": map[string]any{"d": "é\n"}, "b": 1, "a": []any{true, nil, "x"}}
	// sha256 of {"a":[true,null,"x"],"b":1,"c":{"d":"é\n"}}, computed with sha256sum.
	const want = "ddda355b797f19d01563b7add92a53db5fd53a1f41207bac10d740ba758cfa29"
	for range 20 { // map iteration order must not matter
		got, err := Digest(v)
		if err != nil || got != want {
			t.Fatalf("Digest = %s, %v; want %s", got, err, want)
		}
	}
	if got := DigestBytes(nil); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("DigestBytes(nil) = %s", got)
	}
	other, _ := Digest(map[string]any{"a": []any{true, nil, "x"}, "b": 2})
	if other == want {
		t.Fatal("different values share a digest")
	}
}

func TestMarshal_DeepButFinite(t *testing.T) {
	var v any = "leaf"
	for range MaxDepth {
		v = []any{v}
	}
	got := mustMarshal(t, v)
	if !strings.HasPrefix(got, "[[[") || len(got) != 2*MaxDepth+len(`"leaf"`) {
		t.Fatalf("unexpected output of length %d", len(got))
	}
	wantCode(t, func() error { _, err := Marshal([]any{v}); return err }(), CodeTooDeep)
}

// TestCanonicalizeOwn_TakesLargeOwnDocuments: an eval set of tens of
// thousands of cases has more nodes than the default limits allow;
// CanonicalizeOwn reads it under the own-document limits, to the same
// bytes Canonicalize writes for a small one.
func TestCanonicalizeOwn_TakesLargeOwnDocuments(t *testing.T) {
	big := []byte(`[` + strings.Repeat(`{"b":1,"a":2},`, 50_000) + `{"b":1,"a":2}]`)
	if _, err := Canonicalize(big); err == nil {
		t.Fatal("Canonicalize took 150,000 nodes")
	}
	got, err := CanonicalizeOwn(big)
	if err != nil || !strings.HasPrefix(string(got), `[{"a":2,"b":1},{"a":2,"b":1}`) {
		t.Fatalf("%.40s %v", got, err)
	}
	small, _ := Canonicalize([]byte(`{"b":1,"a":2}`))
	if own, err := CanonicalizeOwn([]byte(`{"b":1,"a":2}`)); err != nil || string(own) != string(small) {
		t.Fatalf("%s %v", own, err)
	}
}

// TestAppend: Append writes Marshal's bytes after what dst holds, leaves
// dst as it was on an error, and allocates nothing for a struct once the
// buffer is large enough (a writer of many rows reuses one buffer).
func TestAppend(t *testing.T) {
	s := evalCase{ID: "c1", Turns: []turn{{Role: "user", Text: "hi <b>"}}, Score: 0.5, Meta: map[string]any{"z": 1}}
	want := mustMarshal(t, &s)
	got, err := Append([]byte("prefix,"), &s)
	if err != nil || string(got) != "prefix,"+want {
		t.Fatalf("Append: %q, %v; want prefix,%s", got, err, want)
	}
	bad, err := Append([]byte("keep"), map[string]any{"x": math.NaN()})
	wantCode(t, err, CodeNonFinite)
	if string(bad) != "keep" {
		t.Fatalf("after an error: %q", bad)
	}
	type row struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		OK     bool   `json:"ok"`
	}
	r := row{ID: "case-1", Status: "passed", OK: true}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() {
		buf, _ = Append(buf[:0], &r)
	}); n != 0 {
		t.Fatalf("Append of a flat struct: %v allocations, want 0", n)
	}
	if string(buf) != `{"id":"case-1","ok":true,"status":"passed"}` {
		t.Fatalf("row: %s", buf)
	}
}
