package jsonlimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Decode parses one JSON document into generic values: map[string]any,
// []any, string, json.Number, bool and nil. It checks the document size
// first and every other limit while scanning, so it fails at the first
// violation without building the oversized part. Zero fields of lim take
// their defaults; a field above its default is an error wrapping
// ErrInvalidLimits.
func Decode(data []byte, lim Limits) (any, error) {
	d, err := newDecoder(data, lim, true)
	if err != nil {
		return nil, err
	}
	return d.document()
}

// Deferred stands, in DecodeDeferring's result, for the value of a
// deferred key: checked against the limits like the rest of the document,
// but not built. Start and End are its byte offsets in the document; Len is
// its element count when it is an array, else -1.
type Deferred struct {
	Start, End, Len int
}

// IsArray reports whether the deferred value is an array.
func (d Deferred) IsArray() bool { return d.Len >= 0 }

// DecodeDeferring is Decode, except that the values of the top-level
// object's keys named in deferKeys are not built: each is checked against
// lim as part of the document (so limits and errors are exactly Decode's)
// and left as a Deferred, for EachElement to build one element at a time.
// A document of 100,000 eval cases then never holds every case's generic
// values at once.
func DecodeDeferring(data []byte, lim Limits, deferKeys ...string) (any, error) {
	d, err := newDecoder(data, lim, true)
	if err != nil {
		return nil, err
	}
	d.deferKeys = deferKeys
	return d.document()
}

// EachElement builds the elements of a deferred array of data (the
// document given to DecodeDeferring, which checked it) in order, calling fn
// with each; an error from fn stops it and is returned.
func EachElement(data []byte, span Deferred, lim Limits, fn func(i int, v any) error) error {
	if !span.IsArray() || span.Start < 0 || span.End > len(data) || span.Start >= span.End {
		return &Error{Code: CodeType, Path: "$", Reason: "not an array"}
	}
	d, err := newDecoder(data[:span.End], lim, true)
	if err != nil {
		return err
	}
	d.pos = span.Start + 1 // '['
	for i := 0; ; i++ {
		d.skipSpace()
		if d.pos >= len(d.data) {
			return d.eof()
		}
		switch d.data[d.pos] {
		case ']':
			return nil
		case ',':
			d.pos++
			d.skipSpace()
		}
		d.path = append(d.path[:0], segment{index: i})
		v, err := d.value()
		if err != nil {
			return err
		}
		if err := fn(i, v); err != nil {
			return err
		}
	}
}

// DecodeReader reads at most lim.MaxBytes+1 bytes from r and decodes them
// like Decode, so an oversized stream is refused without being read whole.
func DecodeReader(r io.Reader, lim Limits) (any, error) {
	lim, err := lim.Normalize()
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(lim.MaxBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("jsonlimit: read: %w", err)
	}
	return Decode(data, lim)
}

// Check validates data against lim like Decode, without building values.
func Check(data []byte, lim Limits) error {
	d, err := newDecoder(data, lim, false)
	if err != nil {
		return err
	}
	_, err = d.document()
	return err
}

// Unmarshal checks data against lim (as Check), then decodes it into v with
// unknown fields refused (CodeUnknownField, naming the key) and numbers in
// interface values kept as json.Number. Wrong JSON types give CodeType; an
// error from a custom unmarshaler or a text type gives CodeInvalidValue with
// the original error reachable through errors.As but not in the message.
//
// Field names match the way encoding/json matches them, which includes its
// case-insensitive fallback.
func Unmarshal(data []byte, lim Limits, v any) error {
	if err := Check(data, lim); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return unmarshalError(err)
	}
	return nil
}

// unmarshalError maps an encoding/json error to *Error. encoding/json has no
// typed error for an unknown field, so that one is recognised by its
// message, which has been stable since the option was added.
func unmarshalError(err error) error {
	var invalid *json.InvalidUnmarshalError
	if errors.As(err, &invalid) {
		return fmt.Errorf("jsonlimit: %w", err)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		e := &Error{Code: CodeType, Path: "$", cause: err}
		if typ.Field != "" {
			e.Path = "$." + truncateKey(typ.Field)
		}
		if typ.Type != nil {
			e.Reason = "cannot decode JSON " + typ.Value + " into " + typ.Type.String()
		}
		return e
	}
	const prefix = `json: unknown field "`
	if msg := err.Error(); strings.HasPrefix(msg, prefix) {
		name, uerr := strconv.Unquote(msg[len(prefix)-1:])
		if uerr != nil {
			name = strings.TrimSuffix(msg[len(prefix):], `"`)
		}
		return &Error{Code: CodeUnknownField, Path: "$", Key: truncateKey(name)}
	}
	return &Error{Code: CodeInvalidValue, Path: "$", Reason: "value rejected by the target type", cause: err}
}

// segment is one step of the path to the value being parsed: an object key
// or an array index.
type segment struct {
	key string
	// rawKey is the key when only checking: the document's bytes (or a
	// decoded copy of an escaped key), made a string only for an error.
	rawKey []byte
	index  int
	isKey  bool
}

type decoder struct {
	data  []byte
	pos   int
	lim   Limits
	build bool // false: validate only, build no values

	depth    int
	nodes    int
	strTotal int
	path     []segment
	scratch  []byte   // reused buffer for strings with escapes
	seen     [][]byte // keys of the objects being checked, innermost last
	seenBuf  [16][]byte

	deferKeys []string // top-level keys whose values are checked, not built
	arrayLen  int      // elements of the array array() last finished
}

func newDecoder(data []byte, lim Limits, build bool) (*decoder, error) {
	lim, err := lim.Normalize()
	if err != nil {
		return nil, err
	}
	if len(data) > lim.MaxBytes {
		return nil, &Error{Code: CodeTooLarge, Limit: lim.MaxBytes, Path: "$"}
	}
	d := &decoder{data: data, lim: lim, build: build}
	d.seen = d.seenBuf[:0]
	return d, nil
}

func (d *decoder) document() (any, error) {
	d.skipSpace()
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, d.syntax("trailing data after the document")
	}
	return v, nil
}

// pathString renders the current path, like $.cases[3]["a b"].
func (d *decoder) pathString() string {
	var b strings.Builder
	b.WriteByte('$')
	for _, s := range d.path {
		if b.Len() > maxPathInError {
			b.WriteString("...")
			break
		}
		if !s.isKey {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		k := s.key
		if s.rawKey != nil {
			k = string(s.rawKey)
		}
		k = truncateKey(k)
		if isIdentifier(k) {
			b.WriteByte('.')
			b.WriteString(k)
		} else {
			b.WriteByte('[')
			b.WriteString(strconv.Quote(k))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

func (d *decoder) limitErr(code string, limit int) error {
	return &Error{Code: code, Limit: limit, Path: d.pathString()}
}

func (d *decoder) syntax(reason string) error {
	return &Error{Code: CodeInvalidJSON, Path: d.pathString(), Offset: d.pos, Reason: reason}
}

func (d *decoder) eof() error {
	return d.syntax("unexpected end of input")
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value parses the value at d.pos, which is not whitespace.
func (d *decoder) value() (any, error) {
	if err := d.valueStart(); err != nil {
		return nil, err
	}
	switch c := d.data[d.pos]; c {
	case '{':
		return d.object()
	case '[':
		return d.array()
	case '"':
		s, err := d.str(d.build)
		if err != nil || !d.build {
			return nil, err
		}
		return s, nil
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return d.number()
		}
		return nil, d.syntax("unexpected character")
	}
}

// valueStart counts the value at d.pos (not white space) as a node, or
// fails at the end of the input.
func (d *decoder) valueStart() error {
	if d.pos >= len(d.data) {
		return d.eof()
	}
	d.nodes++
	if d.nodes > d.lim.MaxNodes {
		return d.limitErr(CodeNodes, d.lim.MaxNodes)
	}
	return nil
}

func (d *decoder) literal(lit string) error {
	if len(d.data)-d.pos < len(lit) {
		if string(d.data[d.pos:]) == lit[:len(d.data)-d.pos] {
			d.pos = len(d.data)
			return d.eof()
		}
		return d.syntax("invalid literal")
	}
	if string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return d.syntax("invalid literal")
	}
	d.pos += len(lit)
	return nil
}

func (d *decoder) enter() error {
	d.depth++
	if d.depth > d.lim.MaxDepth {
		return d.limitErr(CodeDepth, d.lim.MaxDepth)
	}
	return nil
}

func (d *decoder) array() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	d.pos++ // '['
	var list []any
	if d.build {
		list = []any{}
	}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		d.arrayLen = 0
		return listValue(list, d.build), nil
	}
	for n := 0; ; {
		if err := d.elementStart(n); err != nil {
			return nil, err
		}
		d.skipSpace()
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		d.path = d.path[:len(d.path)-1]
		if d.build {
			list = append(list, v)
		}
		n++
		more, err := d.arrayNext()
		if err != nil {
			return nil, err
		}
		if !more {
			d.arrayLen = n
			return listValue(list, d.build), nil
		}
	}
}

// elementStart checks that an array of n elements so far may have
// another and puts its index on the path.
func (d *decoder) elementStart(n int) error {
	if n == d.lim.MaxList {
		return d.limitErr(CodeList, d.lim.MaxList)
	}
	d.path = append(d.path, segment{index: n})
	return nil
}

// arrayNext moves past what follows an array element: a comma (true) or
// the closing bracket (false).
func (d *decoder) arrayNext() (bool, error) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return false, d.eof()
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		return true, nil
	case ']':
		d.pos++
		d.depth--
		return false, nil
	}
	return false, d.syntax("expected ',' or ']' in array")
}

// listValue returns list as an any, or nil when values are not being built
// (a nil []any in an interface is not a nil interface).
func listValue(list []any, build bool) any {
	if !build {
		return nil
	}
	return list
}

// maxFewKeys is how many keys of one object checking compares one by one
// for a repeat before it puts them in a map: result objects have up to 16
// keys, and a list of 100,000 of them then allocates no map per object.
const maxFewKeys = 32

func (d *decoder) object() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	d.pos++ // '{'
	var obj map[string]any
	if d.build {
		obj = map[string]any{}
	}
	// Checking without building, the keys are bytes (no allocation a
	// key) and repeats are found among d.seen[seenStart:], in a map only
	// past maxFewKeys keys.
	seenStart := len(d.seen)
	var seen map[string]struct{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
		return mapValue(obj, d.build), nil
	}
	for n := 0; ; {
		if err := d.keyStart(n); err != nil {
			return nil, err
		}
		// Building, the key is a string of the object; checking, it
		// stays bytes, compared as they are.
		var key string
		var rawKey []byte
		var err error
		if d.build {
			if key, err = d.str(true); err != nil {
				return nil, err
			}
			if _, dup := obj[key]; dup {
				return nil, d.duplicateKey(key)
			}
		} else {
			if rawKey, err = d.checkedKey(seenStart, &seen); err != nil {
				return nil, err
			}
		}
		if err := d.colon(); err != nil {
			return nil, err
		}
		d.path = append(d.path, segment{key: key, rawKey: rawKey, isKey: true})
		var v any
		if d.build && d.depth == 1 && slices.Contains(d.deferKeys, key) {
			v, err = d.deferred()
		} else {
			v, err = d.value()
		}
		if err != nil {
			return nil, err
		}
		d.path = d.path[:len(d.path)-1]
		if d.build {
			obj[key] = v
		}
		n++
		more, err := d.objectNext()
		if err != nil {
			return nil, err
		}
		if !more {
			d.seen = d.seen[:seenStart]
			return mapValue(obj, d.build), nil
		}
	}
}

// keyStart checks that an object of n keys so far may have another, whose
// key is at d.pos, and counts the key as a node.
func (d *decoder) keyStart(n int) error {
	if d.pos >= len(d.data) {
		return d.eof()
	}
	if d.data[d.pos] != '"' {
		return d.syntax("expected a string key in object")
	}
	if n == d.lim.MaxObjectKeys {
		return d.limitErr(CodeObject, d.lim.MaxObjectKeys)
	}
	d.nodes++
	if d.nodes > d.lim.MaxNodes {
		return d.limitErr(CodeNodes, d.lim.MaxNodes)
	}
	return nil
}

// checkedKey checks the key at d.pos, not built, and that it is not one
// of its object's keys so far: d.seen[seenStart:], or seen once that is
// made. It returns the key's decoded bytes (see keyBytes).
func (d *decoder) checkedKey(seenStart int, seen *map[string]struct{}) ([]byte, error) {
	key, err := d.keyBytes()
	if err != nil {
		return nil, err
	}
	if *seen != nil {
		if _, dup := (*seen)[string(key)]; dup {
			return nil, d.duplicateKey(string(key))
		}
		(*seen)[string(key)] = struct{}{}
		return key, nil
	}
	few := d.seen[seenStart:]
	for _, k := range few {
		if string(k) == string(key) {
			return nil, d.duplicateKey(string(key))
		}
	}
	if len(few) < maxFewKeys {
		d.seen = append(d.seen, key)
		return key, nil
	}
	*seen = make(map[string]struct{}, 2*maxFewKeys)
	for _, k := range few {
		(*seen)[string(k)] = struct{}{}
	}
	(*seen)[string(key)] = struct{}{}
	d.seen = d.seen[:seenStart]
	return key, nil
}

func (d *decoder) duplicateKey(key string) error {
	return &Error{Code: CodeDuplicateKey, Path: d.pathString(), Key: truncateKey(key)}
}

// colon moves past the colon after an object key and the white space
// after it.
func (d *decoder) colon() error {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return d.eof()
	}
	if d.data[d.pos] != ':' {
		return d.syntax("expected ':' after object key")
	}
	d.pos++
	d.skipSpace()
	return nil
}

// objectNext moves past what follows an object's value: a comma and the
// white space after it (true) or the closing brace (false).
func (d *decoder) objectNext() (bool, error) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return false, d.eof()
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		d.skipSpace()
		return true, nil
	case '}':
		d.pos++
		d.depth--
		return false, nil
	}
	return false, d.syntax("expected ',' or '}' in object")
}

// deferred checks the value at d.pos without building it.
func (d *decoder) deferred() (any, error) {
	start := d.pos
	d.build = false
	d.arrayLen = -1
	_, err := d.value()
	d.build = true
	if err != nil {
		return nil, err
	}
	n := -1
	if d.data[start] == '[' {
		n = d.arrayLen
	}
	return Deferred{Start: start, End: d.pos, Len: n}, nil
}

func mapValue(obj map[string]any, build bool) any {
	if !build {
		return nil
	}
	return obj
}

// str parses the string at d.pos (an opening quote), enforcing the single
// string and total string limits on its decoded length before allocating
// it. With build false it validates only and returns "".
func (d *decoder) str(build bool) (string, error) {
	b, err := d.strBytes()
	if err != nil || !build {
		return "", err
	}
	return string(b), nil
}

// strBytes is str returning the decoded bytes: the document's own when
// the string has no escape, else d.scratch's, which the next string with
// escapes reuses.
func (d *decoder) strBytes() ([]byte, error) {
	start := d.pos + 1
	i := start
	escaped, nonASCII := false, false
	for {
		if i >= len(d.data) {
			d.pos = i
			return nil, d.eof()
		}
		c := d.data[i]
		if c == '"' {
			break
		}
		switch {
		case c < 0x20:
			d.pos = i
			return nil, d.syntax("control character in string")
		case c == '\\':
			escaped = true
			i++ // the escaped byte cannot end the string
		case c >= 0x80:
			nonASCII = true
		}
		i++
	}
	raw := d.data[start:i]
	end := i + 1
	if escaped {
		buf, err := d.unescape(raw, start)
		if err != nil {
			return nil, err
		}
		raw = buf
	}
	if err := d.countString(len(raw)); err != nil {
		return nil, err
	}
	if nonASCII && !utf8.Valid(raw) {
		d.pos = start
		return nil, &Error{Code: CodeInvalidUTF8, Path: d.pathString(), Offset: start, Reason: "invalid UTF-8 in string"}
	}
	d.pos = end
	return raw, nil
}

// keyBytes checks the key at d.pos as str does and returns its decoded
// bytes: the document's own when it has no escape, else a copy (the
// scratch buffer is reused by the next string).
func (d *decoder) keyBytes() ([]byte, error) {
	start := d.pos + 1
	b, err := d.strBytes()
	if err != nil {
		return nil, err
	}
	// An escape always decodes shorter than it is written.
	if raw := d.data[start : d.pos-1]; len(b) == len(raw) {
		return raw, nil
	}
	return bytes.Clone(b), nil
}

func (d *decoder) countString(n int) error {
	if n > d.lim.MaxString {
		return d.limitErr(CodeString, d.lim.MaxString)
	}
	d.strTotal += n
	if d.strTotal > d.lim.MaxStringTotal {
		return d.limitErr(CodeStringBudget, d.lim.MaxStringTotal)
	}
	return nil
}

// unescape decodes raw (a string body with escapes) into d.scratch, giving
// up as soon as it exceeds MaxString so the buffer stays bounded. base is
// raw's offset in the document, for error offsets.
func (d *decoder) unescape(raw []byte, base int) ([]byte, error) {
	// Decoded bytes never outnumber raw bytes, so one allocation of the
	// smaller of the two bounds suffices.
	if need := min(len(raw), d.lim.MaxString+utf8.UTFMax); cap(d.scratch) < need {
		d.scratch = make([]byte, 0, need)
	}
	buf, fault, at := Unescape(d.scratch[:0], raw, d.lim.MaxString)
	d.scratch = buf[:0]
	switch fault {
	case UnescapeOK:
		return buf, nil
	case UnescapeTooLong:
		return nil, d.limitErr(CodeString, d.lim.MaxString)
	case UnescapeBadHex:
		d.pos = base + at
		return nil, d.syntax("invalid \\u escape")
	case UnescapeBadSurrogate:
		d.pos = base + at
		return nil, &Error{Code: CodeInvalidUTF8, Path: d.pathString(), Offset: d.pos, Reason: "unpaired surrogate escape"}
	default:
		d.pos = base + at
		return nil, d.syntax("invalid escape")
	}
}

// UnescapeFault says why Unescape stopped.
type UnescapeFault int

// Unescape's faults.
const (
	UnescapeOK           UnescapeFault = iota
	UnescapeTooLong                    // the result exceeds maxString
	UnescapeBadEscape                  // a backslash not starting a JSON escape
	UnescapeBadHex                     // \u not followed by four hex digits
	UnescapeBadSurrogate               // a \u surrogate that is not a valid pair
)

// Unescape decodes raw, a JSON string body with escapes, appending to dst,
// and gives up as soon as the result exceeds maxString (so dst stays
// bounded). On a fault, at is raw's index of the offending escape. It is
// the one escape decoder of every bounded JSON reader in the module, so
// they agree on every verdict.
func Unescape(dst, raw []byte, maxString int) (buf []byte, fault UnescapeFault, at int) {
	buf = dst
	for i := 0; i < len(raw); {
		if len(buf)-len(dst) > maxString {
			return buf, UnescapeTooLong, i
		}
		c := raw[i]
		if c != '\\' {
			j := bytes.IndexByte(raw[i:], '\\')
			if j < 0 {
				j = len(raw) - i
			}
			if len(buf)-len(dst)+j > maxString {
				return buf, UnescapeTooLong, i
			}
			buf = append(buf, raw[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(raw) {
			return buf, UnescapeBadEscape, i
		}
		switch raw[i+1] {
		case '"', '\\', '/':
			buf = append(buf, raw[i+1])
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(raw[i+2:])
			if !ok {
				return buf, UnescapeBadHex, i
			}
			first := i
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(-1), false
				if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2, ok2 = hex4(raw[i+2:])
				}
				if r >= 0xDC00 || !ok2 || r2 < 0xDC00 || r2 > 0xDFFF {
					return buf, UnescapeBadSurrogate, first
				}
				r = utf16.DecodeRune(r, r2)
				i += 6
			}
			buf = utf8.AppendRune(buf, r)
			continue
		default:
			return buf, UnescapeBadEscape, i
		}
		i += 2
	}
	if len(buf)-len(dst) > maxString {
		return buf, UnescapeTooLong, len(raw)
	}
	return buf, UnescapeOK, 0
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number parses a JSON number per RFC 8259 and returns it as json.Number.
func (d *decoder) number() (any, error) {
	start := d.pos
	end, ok := ScanNumber(d.data, start)
	d.pos = end
	switch {
	case !ok && end >= len(d.data):
		return nil, d.eof()
	case !ok:
		return nil, d.syntax("invalid number")
	case !d.build:
		return nil, nil
	}
	return json.Number(d.data[start:end]), nil
}

// ScanNumber scans the JSON number (RFC 8259) that starts at data[i]. It
// returns the index just past it, or, when data[i:] does not start with a
// valid number, ok false and the index where it fails (len(data) when the
// input ended first). The decoder and the trace store's tape scanner share
// it.
func ScanNumber(data []byte, i int) (end int, ok bool) {
	if i < len(data) && data[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i >= len(data):
		return i, false
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		digits()
	default:
		return i, false
	}
	if i < len(data) && data[i] == '.' {
		i++
		if digits() == 0 {
			return i, false
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, false
		}
	}
	return i, true
}
