package openai

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeResponse reads a chat completion answer into cr. Every answer of
// an eval run goes through here, so the common shape is read by
// decodeFast, without encoding/json's validation pass and reflection
// (~4.5% of a sample's CPU against a local server). Whatever decodeFast
// does not take on is decoded by encoding/json, whose verdict stands.
func decodeResponse(data []byte, cr *chatResponse) error {
	if decodeFast(data, cr) {
		return nil
	}
	// A value of its own, so that cr (the caller's, on its stack) does not
	// escape to the heap on the fast path; it replaces what decodeFast left.
	var slow chatResponse
	err := json.Unmarshal(data, &slow)
	*cr = slow
	return err
}

// decodeFast decodes data into cr when data is a JSON object that
// encoding/json would decode into the zero chatResponse without an error,
// and then gives exactly encoding/json's value. It reports false, leaving
// in cr what it had read, on anything outside the subset it reads with
// certainty:
//   - a key of a decoded object that is not ASCII, is escaped, differs
//     from one of the object's field names only in case (encoding/json
//     matches those), or is repeated;
//   - a string with a \u escape, or non-ASCII bytes that are not valid
//     UTF-8 (encoding/json substitutes U+FFFD for them);
//   - null or a value of another type where a field is (null is
//     taken only where it leaves the field as it was: content, tool_calls,
//     usage and prompt_tokens_details);
//   - a token count that is not plain decimal digits fitting int64;
//   - nesting deeper than maxFastDepth in a skipped value.
//
// Unknown members are skipped, their syntax checked as strictly as
// encoding/json checks it (a document it would refuse is never taken).
func decodeFast(data []byte, cr *chatResponse) bool {
	d := fastDecoder{b: data}
	if !d.topLevel(cr) {
		return false
	}
	d.ws()
	return d.i == len(d.b)
}

// maxFastDepth bounds the nesting decodeFast skips; deeper documents go to
// encoding/json.
const maxFastDepth = 64

type fastDecoder struct {
	b []byte
	i int
}

func (d *fastDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte (0 at the end).
func (d *fastDecoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// next consumes c (after whitespace) and reports whether it was there.
func (d *fastDecoder) next(c byte) bool {
	if d.peek() == c {
		d.i++
		return true
	}
	return false
}

// literal consumes s (true, false, null) when it is next.
func (d *fastDecoder) literal(s string) bool {
	d.ws()
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// object reads the members of an object whose '{' is next: member is
// called with each key, the decoder at the member's value, and returns
// false to stop the decoding. Keys not in fields are skipped; a key that
// matches one of fields only when case is ignored, or repeats one of
// them, stops it. seen has a bit per field.
func (d *fastDecoder) object(depth int, fields []string, member func(k int) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	var seen uint32
	for {
		if d.peek() != '"' {
			return false
		}
		key, ok := d.key()
		if !ok || !d.next(':') {
			return false
		}
		k := -1
		for j, f := range fields {
			if string(key) == f {
				k = j
				break
			}
			if asciiEqualFold(key, f) {
				return false
			}
		}
		switch {
		case k < 0:
			if !d.skip(depth + 1) {
				return false
			}
		case seen&(1<<k) != 0:
			return false
		default:
			seen |= 1 << k
			if !member(k) {
				return false
			}
		}
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

// key reads an object key: printable ASCII without escapes.
func (d *fastDecoder) key() ([]byte, bool) {
	d.i++ // the quote
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			k := d.b[start:d.i]
			d.i++
			return k, true
		case c < 0x20 || c >= 0x80 || c == '\\':
			return nil, false
		}
		d.i++
	}
	return nil, false
}

// asciiEqualFold reports whether the ASCII key k equals f when case is
// ignored.
func asciiEqualFold(k []byte, f string) bool {
	if len(k) != len(f) {
		return false
	}
	for i := range k {
		a, b := k[i], f[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// str reads a string value into a Go string (see decodeFast for what it
// refuses).
func (d *fastDecoder) str() (string, bool) {
	if d.peek() != '"' {
		return "", false
	}
	d.i++
	start := d.i
	ascii := true
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\':
			return d.escaped(start, ascii)
		case c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
		d.i++
	}
	return "", false
}

// escaped finishes a string from start whose first backslash is at d.i,
// resolving the one-letter escapes.
func (d *fastDecoder) escaped(start int, ascii bool) (string, bool) {
	buf := make([]byte, 0, d.i-start+16)
	buf = append(buf, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if !ascii && !utf8.Valid(buf) {
				return "", false
			}
			return string(buf), true
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return "", false
			}
			var r byte
			switch d.b[d.i+1] {
			case '"', '\\', '/':
				r = d.b[d.i+1]
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			default: // \u and invalid escapes
				return "", false
			}
			buf = append(buf, r)
			d.i += 2
			continue
		case c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
		buf = append(buf, c)
		d.i++
	}
	return "", false
}

// int64 reads a token count: an optional minus and decimal digits that
// fit int64, as a JSON number without fraction or exponent.
func (d *fastDecoder) int64() (int64, bool) {
	d.ws()
	i, neg := d.i, false
	if i < len(d.b) && d.b[i] == '-' {
		neg = true
		i++
	}
	start := i
	var n int64
	for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
		if i-start >= 18 {
			return 0, false
		}
		n = n*10 + int64(d.b[i]-'0')
		i++
	}
	switch {
	case i == start, d.b[start] == '0' && i-start > 1:
		return 0, false
	case i < len(d.b) && (d.b[i] == '.' || d.b[i] == 'e' || d.b[i] == 'E'):
		return 0, false
	}
	d.i = i
	if neg {
		n = -n
	}
	return n, true
}

// skip checks and passes over any JSON value.
func (d *fastDecoder) skip(depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	switch c := d.peek(); c {
	case '"':
		return d.skipString()
	case '{':
		d.i++
		if d.next('}') {
			return true
		}
		for {
			if d.peek() != '"' || !d.skipString() || !d.next(':') || !d.skip(depth+1) {
				return false
			}
			if d.next(',') {
				continue
			}
			return d.next('}')
		}
	case '[':
		d.i++
		if d.next(']') {
			return true
		}
		for {
			if !d.skip(depth + 1) {
				return false
			}
			if d.next(',') {
				continue
			}
			return d.next(']')
		}
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		return d.skipNumber()
	}
}

// skipString passes over a string whose quote is next, checking its
// escapes and that it has no control characters.
func (d *fastDecoder) skipString() bool {
	d.i++
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return true
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return false
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if d.i+6 > len(d.b) {
					return false
				}
				for _, h := range d.b[d.i+2 : d.i+6] {
					if !isHex(h) {
						return false
					}
				}
				d.i += 6
			default:
				return false
			}
			continue
		case c < 0x20:
			return false
		}
		d.i++
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipNumber passes over a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *fastDecoder) skipNumber() bool {
	b, i := d.b, d.i
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	d.i = i
	return true
}

// The fields of each decoded object, in the order of the member switches
// below.
var (
	responseFields = []string{"id", "model", "choices", "usage"}
	choiceFields   = []string{"message", "finish_reason"}
	messageFields  = []string{"content", "tool_calls"}
	toolCallFields = []string{"id", "type", "function"}
	functionFields = []string{"name", "arguments"}
	usageFields    = []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details"}
	detailsFields  = []string{"cached_tokens"}
)

func (d *fastDecoder) topLevel(cr *chatResponse) bool {
	if d.peek() != '{' {
		return false
	}
	return d.object(0, responseFields, func(k int) bool {
		var ok bool
		switch k {
		case 0:
			cr.ID, ok = d.str()
		case 1:
			cr.Model, ok = d.str()
		case 2:
			ok = d.choices(&cr.Choices)
		case 3:
			if d.literal("null") {
				return true // a nil pointer stays nil
			}
			cr.Usage = new(chatUsage)
			ok = d.usage(cr.Usage)
		}
		return ok
	})
}

func (d *fastDecoder) choices(dst *[]chatChoice) bool {
	return decodeArray(d, dst, 1, d.choice)
}

// decodeArray reads a JSON array of elements read by elem into *dst: a
// non-nil slice with room for capHint of them, as encoding/json leaves an
// empty array.
func decodeArray[T any](d *fastDecoder, dst *[]T, capHint int, elem func(*T) bool) bool {
	if !d.next('[') {
		return false
	}
	out := make([]T, 0, capHint)
	if !d.next(']') {
		for {
			var zero T
			out = append(out, zero)
			if !elem(&out[len(out)-1]) {
				return false
			}
			if d.next(',') {
				continue
			}
			if !d.next(']') {
				return false
			}
			break
		}
	}
	*dst = out
	return true
}

func (d *fastDecoder) choice(c *chatChoice) bool {
	if d.peek() != '{' {
		return false
	}
	return d.object(1, choiceFields, func(k int) bool {
		var ok bool
		switch k {
		case 0:
			ok = d.message(&c.Message)
		case 1:
			c.FinishReason, ok = d.str()
		}
		return ok
	})
}

func (d *fastDecoder) message(m *chatChoiceMessage) bool {
	if d.peek() != '{' {
		return false
	}
	return d.object(2, messageFields, func(k int) bool {
		if d.literal("null") {
			return true // a nil pointer or slice stays nil
		}
		switch k {
		case 0:
			s, ok := d.str()
			m.Content = &s
			return ok
		default:
			return d.toolCalls(&m.ToolCalls)
		}
	})
}

func (d *fastDecoder) toolCalls(dst *[]chatToolCall) bool {
	return decodeArray(d, dst, 0, d.toolCall)
}

func (d *fastDecoder) toolCall(tc *chatToolCall) bool {
	if d.peek() != '{' {
		return false
	}
	return d.object(4, toolCallFields, func(k int) bool {
		var ok bool
		switch k {
		case 0:
			tc.ID, ok = d.str()
		case 1:
			tc.Type, ok = d.str()
		case 2:
			if d.peek() != '{' {
				return false
			}
			ok = d.object(5, functionFields, func(k int) bool {
				var ok bool
				if k == 0 {
					tc.Function.Name, ok = d.str()
				} else {
					tc.Function.Arguments, ok = d.str()
				}
				return ok
			})
		}
		return ok
	})
}

func (d *fastDecoder) usage(u *chatUsage) bool {
	if d.peek() != '{' {
		return false
	}
	return d.object(1, usageFields, func(k int) bool {
		var ok bool
		switch k {
		case 0:
			u.PromptTokens, ok = d.int64()
		case 1:
			u.CompletionTokens, ok = d.int64()
		case 2:
			if d.literal("null") {
				return true
			}
			u.PromptTokensDetails = new(chatTokensDetails)
			if d.peek() != '{' {
				return false
			}
			ok = d.object(2, detailsFields, func(int) bool {
				var ok bool
				u.PromptTokensDetails.CachedTokens, ok = d.int64()
				return ok
			})
		}
		return ok
	})
}
