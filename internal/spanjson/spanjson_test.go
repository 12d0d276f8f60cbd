package spanjson

import (
	"encoding/json"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/observability"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestAppendHead_IsJSONMarshalsPrefix: the head plus the attributes and
// the closing brace is json.Marshal's encoding, with and without the
// omitempty fields.
func TestAppendHead_IsJSONMarshalsPrefix(t *testing.T) {
	d := int64(7)
	for _, s := range []*observability.SpanSignal{
		{Schema: 2, Signal: "span", Phase: "start", Name: "n", Kind: "client", TraceID: "t", SpanID: "s", StartTimeUnixNano: 1},
		{Schema: 2, Signal: "span", Phase: "end", Name: "<a&b>", Kind: "internal", TraceID: "t\u2028", SpanID: "s\x01", ParentSpanID: "p",
			TraceFlags: 1, TraceState: "k=v", StartTimeUnixNano: -1, EndTimeUnixNano: 9, DurationNano: &d, Status: "error"},
	} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		attrs, _ := json.Marshal(s.Attributes)
		got := append(append(AppendHead(nil, s), attrs...), '}')
		if string(got) != string(want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	}
}

// FuzzAppendString holds AppendString to json.Marshal of a string: HTML
// escaping, control bytes, U+2028/2029 and invalid UTF-8 included.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<>&\"\\", "\x00\x1f\t\n\r\b\f", "\u2028\u2029", "\xff\xfe", "é日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("%q: got %s want %s", s, got[1:], want)
		}
	})
}
