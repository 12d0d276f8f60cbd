package jsonquote

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// Mode is the dialect Append writes.
type Mode uint8

const (
	// HTML is json.Marshal's default: <, > and & escaped as \u003c,
	// \u003e and \u0026 (the span records' form).
	HTML Mode = iota
	// Plain is an encoding/json Encoder with SetEscapeHTML(false) (the
	// stored records' form).
	Plain
	// Iter is json-iterator's Stream.WriteString, what pdata writes
	// with: '"', '\\' and control bytes escaped (\n, \r and \t short,
	// the others as \u00XX), every other byte as it is: no HTML escapes,
	// no UTF-8 repair, U+2028 and U+2029 as they are.
	Iter
)

// Append quotes s in mode's dialect. In both of encoding/json's (HTML and
// Plain), control bytes, U+2028, U+2029 and invalid UTF-8 are escaped as
// encoding/json escapes them.
func Append[T string | []byte](b []byte, s T, mode Mode) []byte {
	b = append(b, '"')
	safe := &plainSafe
	if mode == HTML {
		safe = &htmlSafe
	}
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b', '\f':
				if mode == Iter {
					b = append(b, '\\', 'u', '0', '0', '0', hexDigits[c])
				} else if c == '\b' {
					b = append(b, '\\', 'b')
				} else {
					b = append(b, '\\', 'f')
				}
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		if mode == Iter {
			i++
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plainSafe and htmlSafe are the ASCII bytes a JSON string holds as they
// are (encoding/json's safeSet and htmlSafeSet): one lookup per byte is
// the quoter's fast path, and ids and keys are all such bytes.
var plainSafe, htmlSafe = func() (p, h [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		p[c] = c != '"' && c != '\\'
		h[c] = p[c] && c != '<' && c != '>' && c != '&'
	}
	return p, h
}()

// decodeRune is utf8.DecodeRune for either string type, without
// converting (which would allocate for []byte).
func decodeRune[T string | []byte](s T) (rune, int) {
	var buf [utf8.UTFMax]byte
	n := copy(buf[:], s)
	return utf8.DecodeRune(buf[:n])
}
