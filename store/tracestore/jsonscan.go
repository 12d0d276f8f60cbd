package tracestore

import (
	"bytes"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// scanner validates one JSON document exactly as jsonlimit.Decode does
// (same limits, same checks in the same order, so the first violation has
// the same class: a bound, or invalid JSON) and records it as a flat tape
// of tokens instead of map[string]any. The projection then walks the tape
// and copies only what the closed projection keeps. A decoded input of
// ~400 bytes costs one tape, not ~65 allocations.
//
// The scanning code follows internal/jsonlimit/decode.go line by line;
// TestScan_AgreesWithJSONLimit and FuzzProjectMatchesReference hold the two
// to the same verdicts. It is not a mode of internal/jsonlimit because the
// projection indexes the tape's token layout directly on the hot path, and
// exporting that layout would make it the bounded reader's public API for
// this one caller (a second caller would be the time to move it).
type scanner struct {
	data []byte
	pos  int
	lim  jsonlimit.Limits

	depth    int
	nodes    int
	strTotal int

	tape  []tok
	unesc [][]byte // decoded bytes of strings with escapes, by tok.dec
	keys  [][]byte // keys of the objects being scanned (duplicate check)
}

// Token kinds.
const (
	tObj byte = iota + 1
	tArr
	tStr
	tNum
	tTrue
	tFalse
	tNull
)

// tok is one value (or object key) of the tape. An object is followed by
// its n key/value pairs, an array by its n values; next is the index just
// past the token's subtree.
type tok struct {
	kind       byte
	start, end int32 // tStr: the body between the quotes; tNum: the number
	dec        int32 // tStr with escapes: index into unesc + 1; 0 when none
	next       int32
	n          int32
}

// scanError is a refused document: bound tells a limit (input too large)
// from invalid JSON.
type scanError struct{ bound bool }

func (s *scanner) limitErr() *scanError { return &scanError{bound: true} }
func (s *scanner) syntax() *scanError   { return &scanError{} }

// scan validates data and fills the tape. The scanner is reusable.
func (s *scanner) scan(data []byte, lim jsonlimit.Limits) *scanError {
	s.data, s.pos, s.lim = data, 0, lim
	s.depth, s.nodes, s.strTotal = 0, 0, 0
	clear(s.unesc) // drop the previous document's strings
	clear(s.keys)
	s.tape, s.unesc, s.keys = s.tape[:0], s.unesc[:0], s.keys[:0]
	if len(data) > lim.MaxBytes {
		return s.limitErr()
	}
	s.skipSpace()
	if err := s.value(); err != nil {
		return err
	}
	s.skipSpace()
	if s.pos != len(s.data) {
		return s.syntax()
	}
	return nil
}

// bytesOf returns a string token's decoded bytes.
func (s *scanner) bytesOf(t *tok) []byte {
	if t.dec > 0 {
		return s.unesc[t.dec-1]
	}
	return s.data[t.start:t.end]
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) push(k byte) int {
	s.tape = append(s.tape, tok{kind: k})
	return len(s.tape) - 1
}

func (s *scanner) value() *scanError {
	if s.pos >= len(s.data) {
		return s.syntax()
	}
	s.nodes++
	if s.nodes > s.lim.MaxNodes {
		return s.limitErr()
	}
	switch c := s.data[s.pos]; c {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		_, err := s.str()
		return err
	case 't':
		return s.literal(tTrue, "true")
	case 'f':
		return s.literal(tFalse, "false")
	case 'n':
		return s.literal(tNull, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return s.number()
		}
		return s.syntax()
	}
}

func (s *scanner) literal(k byte, lit string) *scanError {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return s.syntax()
	}
	i := s.push(k)
	s.pos += len(lit)
	s.tape[i].next = int32(len(s.tape))
	return nil
}

func (s *scanner) enter() *scanError {
	s.depth++
	if s.depth > s.lim.MaxDepth {
		return s.limitErr()
	}
	return nil
}

func (s *scanner) array() *scanError {
	if err := s.enter(); err != nil {
		return err
	}
	at := s.push(tArr)
	s.pos++ // '['
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		s.tape[at].next = int32(len(s.tape))
		return nil
	}
	n := 0
	for {
		if n == s.lim.MaxList {
			return s.limitErr()
		}
		s.skipSpace()
		if err := s.value(); err != nil {
			return err
		}
		n++
		s.skipSpace()
		if s.pos >= len(s.data) {
			return s.syntax()
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			s.tape[at].n, s.tape[at].next = int32(n), int32(len(s.tape))
			return nil
		default:
			return s.syntax()
		}
	}
}

// maxLinearKeys: objects up to this many keys check duplicates by
// comparison, larger ones with a set.
const maxLinearKeys = 32

func (s *scanner) object() *scanError {
	if err := s.enter(); err != nil {
		return err
	}
	at := s.push(tObj)
	s.pos++ // '{'
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		s.tape[at].next = int32(len(s.tape))
		return nil
	}
	keys0 := len(s.keys)
	var seen map[string]struct{}
	n := 0
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.syntax()
		}
		if n == s.lim.MaxObjectKeys {
			return s.limitErr()
		}
		s.nodes++
		if s.nodes > s.lim.MaxNodes {
			return s.limitErr()
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		switch {
		case seen != nil:
			if _, dup := seen[string(key)]; dup {
				return s.syntax()
			}
			seen[string(key)] = struct{}{}
		default:
			for _, k := range s.keys[keys0:] {
				if bytes.Equal(k, key) {
					return s.syntax()
				}
			}
			s.keys = append(s.keys, key)
			if len(s.keys)-keys0 > maxLinearKeys {
				seen = make(map[string]struct{}, 2*maxLinearKeys)
				for _, k := range s.keys[keys0:] {
					seen[string(k)] = struct{}{}
				}
				s.keys = s.keys[:keys0]
			}
		}
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.syntax()
		}
		s.pos++
		s.skipSpace()
		if err := s.value(); err != nil {
			return err
		}
		n++
		s.skipSpace()
		if s.pos >= len(s.data) {
			return s.syntax()
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.skipSpace()
		case '}':
			s.pos++
			s.depth--
			s.keys = s.keys[:keys0]
			s.tape[at].n, s.tape[at].next = int32(n), int32(len(s.tape))
			return nil
		default:
			return s.syntax()
		}
	}
}

// str scans the string at s.pos (an opening quote), pushes its token and
// returns its decoded bytes.
func (s *scanner) str() ([]byte, *scanError) {
	start := s.pos + 1
	i := start
	escaped, nonASCII := false, false
	for {
		if i >= len(s.data) {
			return nil, s.syntax()
		}
		c := s.data[i]
		if c == '"' {
			break
		}
		switch {
		case c < 0x20:
			return nil, s.syntax()
		case c == '\\':
			escaped = true
			i++ // the escaped byte cannot end the string
		case c >= 0x80:
			nonASCII = true
		}
		i++
	}
	raw := s.data[start:i]
	if !escaped {
		if err := s.countString(len(raw)); err != nil {
			return nil, err
		}
		if nonASCII && !utf8.Valid(raw) {
			return nil, s.syntax()
		}
		at := s.push(tStr)
		s.tape[at] = tok{kind: tStr, start: int32(start), end: int32(i), next: int32(len(s.tape))}
		s.pos = i + 1
		return raw, nil
	}
	buf, err := s.unescape(raw)
	if err != nil {
		return nil, err
	}
	if err := s.countString(len(buf)); err != nil {
		return nil, err
	}
	if nonASCII && !utf8.Valid(buf) {
		return nil, s.syntax()
	}
	s.unesc = append(s.unesc, buf)
	at := s.push(tStr)
	s.tape[at] = tok{kind: tStr, start: int32(start), end: int32(i), dec: int32(len(s.unesc)), next: int32(len(s.tape))}
	s.pos = i + 1
	return buf, nil
}

func (s *scanner) countString(n int) *scanError {
	if n > s.lim.MaxString {
		return s.limitErr()
	}
	s.strTotal += n
	if s.strTotal > s.lim.MaxStringTotal {
		return s.limitErr()
	}
	return nil
}

// unescape decodes a string body with escapes into a new buffer, giving
// up as soon as it exceeds MaxString (jsonlimit's decoder, so the same
// verdicts).
func (s *scanner) unescape(raw []byte) ([]byte, *scanError) {
	buf, fault, _ := jsonlimit.Unescape(make([]byte, 0, min(len(raw), s.lim.MaxString+utf8.UTFMax)), raw, s.lim.MaxString)
	switch fault {
	case jsonlimit.UnescapeOK:
		return buf, nil
	case jsonlimit.UnescapeTooLong:
		return nil, s.limitErr()
	default:
		return nil, s.syntax()
	}
}

// number scans a JSON number per RFC 8259.
func (s *scanner) number() *scanError {
	start := s.pos
	end, ok := jsonlimit.ScanNumber(s.data, start)
	if !ok {
		return s.syntax()
	}
	at := s.push(tNum)
	s.tape[at] = tok{kind: tNum, start: int32(start), end: int32(end), next: int32(len(s.tape))}
	s.pos = end
	return nil
}

// parseInt64 is json.Number.Int64 (strconv.ParseInt base 10) for the text
// of a valid JSON number: an optional minus and decimal digits only.
func parseInt64(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0') // 19 digits fit in a uint64
	}
	switch {
	case neg && u <= 1<<63:
		return -int64(u), true // -(1<<63) wraps to itself: math.MinInt64
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}
