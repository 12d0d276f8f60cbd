package jsonquote

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// Append quotes s as encoding/json does: with html, <, > and &
// are escaped (json.Marshal's default, the span records' form); without,
// they are not (an Encoder with SetEscapeHTML(false), the stored records'
// form). Control bytes, U+2028, U+2029 and invalid UTF-8 are escaped
// either way.
func Append[T string | []byte](b []byte, s T, html bool) []byte {
	b = append(b, '"')
	safe := &plainSafe
	if html {
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
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
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
