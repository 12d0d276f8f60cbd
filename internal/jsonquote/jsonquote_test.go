package jsonquote_test

import (
	"bytes"
	"encoding/json"
	"testing"

	jsoniter "github.com/json-iterator/go"

	"github.com/fadcedab/adk/internal/jsonquote"
)

// FuzzAppend holds the one quoter to its references in every mode:
// json.Marshal (HTML), an encoding/json Encoder with SetEscapeHTML(false)
// (Plain) and json-iterator's Stream.WriteString (Iter); control bytes,
// U+2028/2029 and invalid UTF-8 included, from a string and from bytes.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "<>&\"\\", "\x00\x1f\t\n\r\b\f\x7f", "\u2028\u2029", "\xff\xfe", "é日本", "a\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := jsonquote.Append([]byte("x"), s, jsonquote.HTML); string(got) != "x"+string(want) {
			t.Fatalf("html %q: got %s want %s", s, got[1:], want)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		plain := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := jsonquote.Append(nil, []byte(s), jsonquote.Plain); string(got) != string(plain) {
			t.Fatalf("plain %q: got %s want %s", s, got, plain)
		}
		st := jsoniter.ConfigDefault.BorrowStream(nil)
		defer jsoniter.ConfigDefault.ReturnStream(st)
		st.WriteString(s)
		if got := jsonquote.Append(nil, s, jsonquote.Iter); string(got) != string(st.Buffer()) {
			t.Fatalf("iter %q: got %s want %s", s, got, st.Buffer())
		}
	})
}
