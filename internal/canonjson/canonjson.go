package canonjson

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// Error codes.
const (
	CodeNonFinite     = "non_finite_number" // NaN or ±Inf, or a json.Number that overflows float64
	CodeInvalidNumber = "invalid_number"    // a json.Number that is not a JSON number
	CodeInvalidUTF8   = "invalid_utf8"      // a string or key that is not valid UTF-8
	CodeUnsupported   = "unsupported_type"  // a value encoding/json cannot marshal
	CodeTooDeep       = "too_deep"          // nesting beyond MaxDepth (or a cycle)
)

// maxPathInError bounds the path an error reports.
const maxPathInError = 256

// MaxDepth bounds nesting, which also stops cyclic values.
const MaxDepth = 1000

// Error is the typed error of Marshal and Digest. Callers match on Code.
type Error struct {
	Code string
	Path string // where, like $.cases[3].score

	cause error
}

// Error formats the code and path.
func (e *Error) Error() string {
	return "canonjson: " + e.Code + " at " + e.Path
}

// Unwrap returns the encoding/json error behind an unsupported_type error.
func (e *Error) Unwrap() error { return e.cause }

// Marshal returns the canonical JSON encoding of v. v may be built from
// generic values (map[string]any, []any, map[string]string, []string,
// string, json.Number, bool, nil, Go integer and float types) or be any value
// encoding/json can marshal (structs, typed maps, pointers, Marshalers),
// which is first marshaled with encoding/json and then canonicalised, so a
// struct and the equivalent map give the same bytes. (encoding/json replaces
// invalid UTF-8 in such values with U+FFFD; in generic values it is an
// error.) A nil map or slice is written as null, as encoding/json does.
func Marshal(v any) ([]byte, error) {
	e := encoders.Get().(*encoder)
	defer e.release()
	if err := e.value(v); err != nil {
		return nil, err
	}
	if cap(e.buf) > maxPooledBuffer {
		out := e.buf
		e.buf = nil
		return out, nil
	}
	// One allocation of the encoding's size: an eval run encodes every
	// sample as it finishes, and growing a fresh buffer from empty was
	// most of that encoding's allocation and clearing.
	return append(make([]byte, 0, len(e.buf)), e.buf...), nil
}

// Append appends the canonical JSON encoding of v to dst and returns the
// extended buffer: Marshal without its copy, for a writer that encodes
// many small values (the rows of a large document) through one buffer.
// On an error dst is returned as it was.
func Append(dst []byte, v any) ([]byte, error) {
	return appendValue(dst, v, false, 0)
}

// appendValue is Append, and with reflecting AppendNested (v found inside
// depth containers): one encoder from the pool writes v onto dst.
func appendValue(dst []byte, v any, reflecting bool, depth int) ([]byte, error) {
	e := encoders.Get().(*encoder)
	scratch := e.buf
	e.buf = dst
	e.reflecting, e.rdepth = reflecting, depth
	err := e.value(v)
	out := e.buf
	e.buf = scratch
	e.release()
	if err != nil {
		return dst, err
	}
	return out, nil
}

// encoders keeps encoders with their scratch buffers between Marshal calls.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

// maxPooledBuffer is the largest scratch buffer kept in the pool: a big
// document's buffer is handed out as the result instead of copied.
const maxPooledBuffer = 64 << 10

// release resets e and returns it to the pool.
func (e *encoder) release() {
	e.buf, e.path = e.buf[:0], e.path[:0]
	e.reflecting, e.rdepth = false, 0
	encoders.Put(e)
}

// Canonicalize rewrites a JSON document in canonical form. The document is
// read with jsonlimit's default limits, so duplicate keys, invalid UTF-8 and
// oversized input are refused with a *jsonlimit.Error.
func Canonicalize(data []byte) ([]byte, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.Limits{})
	if err != nil {
		return nil, err
	}
	return Marshal(v)
}

// CanonicalizeOwn is Canonicalize under jsonlimit.OwnDocumentLimits: for
// documents adk itself encoded from validated data (an eval set of up to
// 100,000 cases has far more nodes and list items than the defaults).
func CanonicalizeOwn(data []byte) ([]byte, error) {
	v, err := jsonlimit.Decode(data, jsonlimit.OwnDocumentLimits())
	if err != nil {
		return nil, err
	}
	return Marshal(v)
}

// Digest returns the lowercase hex SHA-256 of Marshal(v).
func Digest(v any) (string, error) {
	b, err := Marshal(v)
	if err != nil {
		return "", err
	}
	return DigestBytes(b), nil
}

// DigestBytes returns the lowercase hex SHA-256 of b.
func DigestBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

type segment struct {
	key   string
	index int
	isKey bool
}

type encoder struct {
	buf  []byte
	path []segment
	// reflecting is set while reflected encodes a value; rdepth counts the
	// containers it has entered (reflect.go).
	reflecting bool
	rdepth     int
}

func (e *encoder) fail(code string, cause error) error {
	var b strings.Builder
	b.WriteByte('$')
	for _, s := range e.path {
		if b.Len() > maxPathInError {
			b.WriteString("...")
			break
		}
		if s.isKey {
			k := s.key
			if len(k) > 64 {
				k = strings.ToValidUTF8(k[:64], "") + "..."
			}
			b.WriteByte('[')
			b.WriteString(strconv.Quote(k))
			b.WriteByte(']')
		} else {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		}
	}
	return &Error{Code: code, Path: b.String(), cause: cause}
}

func (e *encoder) value(v any) error {
	if len(e.path)+e.rdepth > MaxDepth {
		return e.fail(CodeTooDeep, nil)
	}
	switch v := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, v)
	case string:
		return e.str(v)
	case json.Number:
		return e.number(string(v))
	case float64:
		return e.float(v)
	case float32:
		// Shortest 32-bit digits, as encoding/json writes a float32, so a
		// struct field and a generic value agree.
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(v), 'g', -1, 32), 64)
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return e.fail(CodeNonFinite, nil)
		}
		return e.float(f)
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case int8:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case int16:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case int32:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case int64:
		e.buf = strconv.AppendInt(e.buf, v, 10)
	case uint:
		e.buf = strconv.AppendUint(e.buf, uint64(v), 10)
	case uint8:
		e.buf = strconv.AppendUint(e.buf, uint64(v), 10)
	case uint16:
		e.buf = strconv.AppendUint(e.buf, uint64(v), 10)
	case uint32:
		e.buf = strconv.AppendUint(e.buf, uint64(v), 10)
	case uint64:
		e.buf = strconv.AppendUint(e.buf, v, 10)
	case []any:
		if v == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		e.buf = append(e.buf, '[')
		for i, el := range v {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.path = append(e.path, segment{index: i})
			if err := e.value(el); err != nil {
				return err
			}
			e.path = e.path[:len(e.path)-1]
		}
		e.buf = append(e.buf, ']')
	case []string:
		if v == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		e.buf = append(e.buf, '[')
		for i, el := range v {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.path = append(e.path, segment{index: i})
			if err := e.str(el); err != nil {
				return err
			}
			e.path = e.path[:len(e.path)-1]
		}
		e.buf = append(e.buf, ']')
	case map[string]any:
		if v == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return object(e, v)
	case map[string]string:
		if v == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return object(e, v)
	default:
		return e.reflected(v)
	}
	return nil
}

// object writes a map with its keys in UTF-16 code unit order.
func object[V any](e *encoder, m map[string]V) error {
	// Most objects are small: their members are sorted on the stack, each
	// taken with its value so that none is looked up again.
	type member struct {
		key string
		val V
	}
	var small [8]member
	members := small[:0]
	if len(m) > len(small) {
		members = make([]member, 0, len(m))
	}
	for k, v := range m {
		members = append(members, member{k, v})
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.key, b.key) })
	e.buf = append(e.buf, '{')
	for i := range members {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		k := members[i].key
		e.path = append(e.path, segment{key: k, isKey: true})
		if err := e.str(k); err != nil {
			return err
		}
		e.buf = append(e.buf, ':')
		if err := e.value(any(members[i].val)); err != nil {
			return err
		}
		e.path = e.path[:len(e.path)-1]
	}
	e.buf = append(e.buf, '}')
	return nil
}

// viaEncodingJSON canonicalises a value only encoding/json understands by
// marshaling it and decoding the result generically.
func (e *encoder) viaEncodingJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		var unsupported *json.UnsupportedValueError
		if errors.As(err, &unsupported) {
			switch {
			case unsupported.Str == "NaN" || unsupported.Str == "+Inf" || unsupported.Str == "-Inf":
				return e.fail(CodeNonFinite, err)
			case strings.HasPrefix(unsupported.Str, "encountered a cycle"):
				return e.fail(CodeTooDeep, err)
			}
		}
		return e.fail(CodeUnsupported, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var g any
	if err := dec.Decode(&g); err != nil {
		return e.fail(CodeUnsupported, err)
	}
	return e.value(g)
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// requires. UTF-8 byte order equals code point order, which differs from
// UTF-16 order only where a supplementary character (a surrogate pair,
// 0xD800..0xDFFF) meets a character in U+E000..U+FFFF.
func compareUTF16(a, b string) int {
	// Most keys are ASCII: past an equal ASCII prefix, two ASCII bytes
	// order as their runes do, and an ASCII prefix of the other string
	// orders by length.
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] && a[i] < utf8.RuneSelf {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return cmp.Compare(a[i], b[i])
	}
	a, b = a[i:], b[i:]
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			if ua, ub := firstUnit(ra), firstUnit(rb); ua != ub {
				return cmp.Compare(ua, ub)
			}
			// Same high surrogate: the low surrogates order like the runes.
			return cmp.Compare(ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

// str writes s as a JSON string: ", \ and control characters escaped (the
// short forms where JSON has one, else \u00xx in lowercase hex), everything
// else verbatim. Invalid UTF-8 is an error, and nothing is written.
func (e *encoder) str(s string) error {
	const hexDigits = "0123456789abcdef"
	mark := len(e.buf)
	e.buf = append(e.buf, '"')
	start := 0
	// One pass: runs of plain ASCII are copied whole; a multi-byte rune
	// is checked where it starts (utf8.ValidString's rules).
	for i := 0; i < len(s); {
		c := s[i]
		if plainASCII[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				e.buf = e.buf[:mark]
				return e.fail(CodeInvalidUTF8, nil)
			}
			i += size
			continue
		}
		e.buf = append(e.buf, s[start:i]...)
		switch c {
		case '"', '\\':
			e.buf = append(e.buf, '\\', c)
		case '\b':
			e.buf = append(e.buf, '\\', 'b')
		case '\f':
			e.buf = append(e.buf, '\\', 'f')
		case '\n':
			e.buf = append(e.buf, '\\', 'n')
		case '\r':
			e.buf = append(e.buf, '\\', 'r')
		case '\t':
			e.buf = append(e.buf, '\\', 't')
		default:
			e.buf = append(e.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	e.buf = append(e.buf, s[start:]...)
	e.buf = append(e.buf, '"')
	return nil
}

// plainASCII holds the bytes str copies as they are: ASCII from space up,
// but " and \\.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// number writes a json.Number: an integer literal keeps its digits (minus
// zero becomes 0); anything with a fraction or exponent is read as a float64
// and written like any other float.
func (e *encoder) number(n string) error {
	integer, ok := scanNumber(n)
	if !ok {
		return e.fail(CodeInvalidNumber, nil)
	}
	if integer {
		if n == "-0" {
			n = "0"
		}
		e.buf = append(e.buf, n...)
		return nil
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return e.fail(CodeInvalidNumber, nil)
	}
	return e.float(f)
}

// scanNumber reports whether n is a JSON number and whether it is an integer
// literal (no fraction, no exponent).
func scanNumber(n string) (integer, ok bool) {
	i := 0
	if i < len(n) && n[i] == '-' {
		i++
	}
	digits := func() int {
		s := i
		for i < len(n) && '0' <= n[i] && n[i] <= '9' {
			i++
		}
		return i - s
	}
	switch {
	case i < len(n) && n[i] == '0':
		i++
	case i < len(n) && '1' <= n[i] && n[i] <= '9':
		digits()
	default:
		return false, false
	}
	integer = true
	if i < len(n) && n[i] == '.' {
		i++
		integer = false
		if digits() == 0 {
			return false, false
		}
	}
	if i < len(n) && (n[i] == 'e' || n[i] == 'E') {
		i++
		integer = false
		if i < len(n) && (n[i] == '+' || n[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false, false
		}
	}
	return integer, i == len(n)
}

// float writes f like ECMAScript Number.prototype.toString (RFC 8785 §3.2.2.3):
// shortest round-trip digits, plain notation from 1e-6 up to 1e21, otherwise
// exponent notation with a signed exponent and no leading zeros; -0 is 0.
func (e *encoder) float(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return e.fail(CodeNonFinite, nil)
	}
	if f == 0 {
		e.buf = append(e.buf, '0')
		return nil
	}
	format := byte('f')
	if abs := math.Abs(f); abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	start := len(e.buf)
	e.buf = strconv.AppendFloat(e.buf, f, format, -1, 64)
	if format == 'e' {
		// strconv writes at least two exponent digits: 1e-07 becomes 1e-7.
		b := e.buf[start:]
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			e.buf = e.buf[:len(e.buf)-1]
		}
	}
	return nil
}
