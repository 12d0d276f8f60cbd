package canonjson

import (
	"bytes"
	"cmp"
	"testing"
	"unicode/utf8"
)

// oldStr and oldCompareUTF16 are str and compareUTF16 as they were before
// their one-pass and ASCII fast paths (session 22): the oracles of the
// tests below.
func oldStr(s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return nil, false
	}
	const hexDigits = "0123456789abcdef"
	buf := []byte{'"'}
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"'), true
}

func oldCompareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			if ua, ub := firstUnit(ra), firstUnit(rb); ua != ub {
				return cmp.Compare(ua, ub)
			}
			return cmp.Compare(ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// strIsOld fails t unless str writes s after a prefix as oldStr does,
// and on an error leaves the prefix alone.
func strIsOld(t testing.TB, s string) {
	t.Helper()
	want, ok := oldStr(s)
	e := &encoder{buf: []byte("prefix")}
	err := e.str(s)
	if (err == nil) != ok {
		t.Fatalf("str(%q): error %v, the old str's verdict valid=%v", s, err, ok)
	}
	if !ok {
		if string(e.buf) != "prefix" {
			t.Fatalf("str(%q) failed and left %q", s, e.buf)
		}
		return
	}
	if !bytes.Equal(e.buf, append([]byte("prefix"), want...)) {
		t.Fatalf("str(%q) = %q, the old str %q", s, e.buf[len("prefix"):], want)
	}
}

// strSamples are strings around str's and compareUTF16's cases: ASCII
// and escapes, every UTF-8 length, the U+E000..U+FFFF against
// supplementary order, and invalid UTF-8 of each kind.
var strSamples = []string{
	"", "a", "ab", "b", "a\x00", "\x1f", "\x7f", "\"", "\\", "\b\f\n\r\t", "é", "\u07ff", "\u0800",
	"\ud7ff", "\ue000", "\uffff", "\ufb33", "\U00010000", "\U0001F600", "\U0010ffff",
	"a\U0001F600", "a\uffff", "ab\ue000c", "ab\U0001F600c", "\u2028\u2029",
	"\xff", "\x80", "\xc3", "\xc3(", "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "a\xffb", "é\xff",
}

func TestStr_IsTheOldStr(t *testing.T) {
	for _, s := range strSamples {
		strIsOld(t, s)
	}
	// Every string of up to two bytes, and three over bytes that cover
	// each class (ASCII, escapes, continuation, every lead, invalid).
	for a := range 256 {
		strIsOld(t, string([]byte{byte(a)}))
		for b := range 256 {
			strIsOld(t, string([]byte{byte(a), byte(b)}))
		}
	}
	classes := []byte{0, 0x1f, ' ', '"', '\\', 'a', 0x7f, 0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xed, 0xee, 0xef, 0xf0, 0xf4, 0xf5, 0xff}
	for _, a := range classes {
		for _, b := range classes {
			for _, c := range classes {
				for _, d := range []byte{'x', 0x80, 0xbf} {
					strIsOld(t, string([]byte{a, b, c, d}))
				}
			}
		}
	}
}

func TestCompareUTF16_IsTheOldOrder(t *testing.T) {
	var all []string
	for _, a := range strSamples {
		for _, b := range strSamples {
			all = append(all, a+b)
		}
	}
	for _, a := range all {
		for _, b := range all {
			if got, want := compareUTF16(a, b), oldCompareUTF16(a, b); got != want {
				t.Fatalf("compareUTF16(%q, %q) = %d, the old order %d", a, b, got, want)
			}
		}
	}
}

// FuzzStrAndCompareUTF16 holds str and compareUTF16 to their old forms.
func FuzzStrAndCompareUTF16(f *testing.F) {
	for _, s := range strSamples {
		f.Add(s, "ab\U0001F600")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		strIsOld(t, a)
		for _, p := range [][2]string{{a, b}, {b, a}, {a, a + b}, {"k" + a, "k" + b}} {
			if got, want := compareUTF16(p[0], p[1]), oldCompareUTF16(p[0], p[1]); got != want {
				t.Fatalf("compareUTF16(%q, %q) = %d, the old order %d", p[0], p[1], got, want)
			}
		}
	})
}
