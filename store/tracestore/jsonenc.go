package tracestore

import (
	"strconv"
	"unicode/utf8"
)

// appendRecord encodes the stored record {content_pruned?, cursor, event,
// identity, kind, timestamp_ms} with sorted keys, as encoding/json would
// encode the same map (TestAppendRecord_MatchesTheMapEncoding).
func appendRecord(b []byte, cursor uint64, kind string, tsMS int64, pj *projected) []byte {
	b = append(b, '{')
	if pj.pruned {
		b = append(b, `"content_pruned":true,`...)
	}
	b = append(b, `"cursor":`...)
	b = strconv.AppendUint(b, cursor, 10)
	b = append(b, `,"event":`...)
	b = pj.event.appendJSON(b)
	b = append(b, `,"identity":{`...)
	first := true
	for i, k := range identityKeys { // sorted
		v := pj.identity[i]
		if v == "" {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, v)
	}
	b = append(b, `},"kind":`...)
	b = appendJSONString(b, kind)
	b = append(b, `,"timestamp_ms":`...)
	b = strconv.AppendInt(b, tsMS, 10)
	return append(b, '}')
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does (HTML characters are not
// escaped; U+2028, U+2029 and invalid bytes are).
func appendJSONString[T string | []byte](b []byte, s T) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := decodeRune(s[i:])
			if r == '\u2028' || r == '\u2029' || r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				if r == utf8.RuneError {
					b = append(b, `\ufffd`...)
				} else {
					b = append(b, `\u202`...)
					b = append(b, hexDigits[r&0xF])
				}
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
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
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func decodeRune[T string | []byte](s T) (rune, int) {
	var buf [utf8.UTFMax]byte
	n := copy(buf[:], s)
	return utf8.DecodeRune(buf[:n])
}
