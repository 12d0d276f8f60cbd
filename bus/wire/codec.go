package wire

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// WireVersion is the envelope version this build writes and the only one it
// reads. Bump it when the envelope layout changes, not when a body type
// gains a field (bodies evolve by adding msgpack map keys).
const WireVersion = 1

// Default decode limits. NATS's default max payload is also 1 MiB.
const (
	// DefaultMaxBytes bounds a whole message.
	DefaultMaxBytes = 1 << 20
	// DefaultMaxDepth bounds container nesting, the envelope included.
	DefaultMaxDepth = 32
	// DefaultMaxElements bounds the total number of msgpack values.
	DefaultMaxElements = 1 << 18
	// MaxKindLen bounds an envelope kind.
	MaxKindLen = 64
)

// DecodeLimits bound what Decode accepts from untrusted bytes. A zero field
// takes its default, so DecodeLimits{} is the default limits.
type DecodeLimits struct {
	// MaxBytes rejects longer input before any parsing (default 1 MiB).
	MaxBytes int
	// MaxDepth bounds container nesting; the envelope array is depth 1 and
	// a struct body is depth 2 (default 32).
	MaxDepth int
	// MaxElements bounds the total number of values (default 262144).
	MaxElements int
	// MaxStrLen bounds a single string, bin or ext payload (default
	// MaxBytes).
	MaxStrLen int
}

// DefaultDecodeLimits returns the limits a zero DecodeLimits stands for.
func DefaultDecodeLimits() DecodeLimits {
	return DecodeLimits{}.resolve()
}

// Resolved returns l with every zero field replaced by its default: the
// limits Decode enforces for l.
func (l DecodeLimits) Resolved() DecodeLimits { return l.resolve() }

func (l DecodeLimits) resolve() DecodeLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxElements <= 0 {
		l.MaxElements = DefaultMaxElements
	}
	if l.MaxStrLen <= 0 {
		l.MaxStrLen = l.MaxBytes
	}
	return l
}

// Envelope is the decoded header of a message: what Peek returns.
type Envelope struct {
	// V is the envelope version.
	V uint64
	// Kind names the body type, e.g. "task" or "sample_result".
	Kind string
	// Body is the raw msgpack body. It aliases the input slice.
	Body msgpack.RawMessage
}

// encoderPool holds encoders with our flags set. We do not use msgpack's
// global pool: flags would leak to and from other users of it.
var encoderPool = sync.Pool{New: func() any {
	enc := msgpack.NewEncoder(nil)
	return enc
}}

var decoderPool = sync.Pool{New: func() any {
	return msgpack.NewDecoder(nil)
}}

// Encode writes v as the body of a version-WireVersion envelope of the given
// kind: the msgpack array [WireVersion, kind, v]. Structs are encoded as
// msgpack maps keyed by field name (the `msgpack` struct tag), so receivers
// ignore fields they do not know. Encode does not enforce receive limits;
// a sender that may produce large messages should check len against them.
func Encode(kind string, v any) ([]byte, error) {
	if err := validKind(kind); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(64)
	enc := encoderPool.Get().(*msgpack.Encoder)
	enc.Reset(&buf)
	enc.UseCompactInts(true)
	enc.UseCompactFloats(true)
	err := enc.EncodeArrayLen(3)
	if err == nil {
		err = enc.EncodeUint(WireVersion)
	}
	if err == nil {
		err = enc.EncodeString(kind)
	}
	if err == nil {
		err = enc.Encode(v)
	}
	enc.Reset(nil)
	encoderPool.Put(enc)
	if err != nil {
		return nil, &WireError{Code: CodeEncode, Offset: -1, Detail: "kind " + kind, Err: err}
	}
	return buf.Bytes(), nil
}

// Decode checks data against lim (size first, then a structural scan of
// every byte), checks the envelope version and that its kind is wantKind,
// and only then decodes the body into v, which must be a non-nil pointer.
// Every failure is a *WireError; Decode never panics on any input.
func Decode(data []byte, lim DecodeLimits, wantKind string, v any) error {
	env, err := Peek(data, lim)
	if err != nil {
		return err
	}
	if env.Kind != wantKind {
		return wireErr(CodeWrongKind, -1, "got "+quoteKind(env.Kind)+", want "+quoteKind(wantKind))
	}
	dec := decoderPool.Get().(*msgpack.Decoder)
	dec.Reset(bytes.NewReader(env.Body))
	err = dec.Decode(v)
	dec.Reset(nil)
	decoderPool.Put(dec)
	if err != nil {
		return &WireError{Code: CodeMalformed, Offset: -1, Detail: "body of kind " + quoteKind(wantKind), Err: err}
	}
	return nil
}

// Peek validates data exactly as Decode does and returns its envelope
// without decoding the body, for callers that dispatch on Kind.
func Peek(data []byte, lim DecodeLimits) (Envelope, error) {
	lim = lim.resolve()
	if len(data) > lim.MaxBytes {
		return Envelope{}, wireErr(CodeTooLarge, -1, "message longer than MaxBytes")
	}
	if werr := scanMsgpack(data, scanLimits{
		maxDepth:    lim.MaxDepth,
		maxElements: lim.MaxElements,
		maxStrLen:   lim.MaxStrLen,
	}); werr != nil {
		return Envelope{}, werr
	}
	return parseEnvelope(data)
}

// parseEnvelope reads [version, kind, body] from data that scanMsgpack has
// already accepted, so every length in it is known to fit.
func parseEnvelope(data []byte) (Envelope, error) {
	var env Envelope
	p := 0
	n, ok := readArrayLen(data, &p)
	if !ok || n < 2 {
		return env, wireErr(CodeMalformed, 0, "envelope is not an array [version, kind, body]")
	}
	off := p
	v, ok := readUint(data, &p)
	if !ok {
		return env, wireErr(CodeMalformed, off, "envelope version is not an unsigned integer")
	}
	env.V = v
	if v != WireVersion {
		return env, wireErr(CodeBadVersion, off, "unsupported envelope version")
	}
	if n != 3 {
		return env, wireErr(CodeMalformed, 0, "envelope does not have 3 elements")
	}
	off = p
	kind, ok := readStr(data, &p)
	if !ok {
		return env, wireErr(CodeMalformed, off, "envelope kind is not a string")
	}
	env.Kind = kind
	// The body is the last element, so it runs to the end of the data.
	env.Body = msgpack.RawMessage(data[p:])
	return env, nil
}

func readArrayLen(d []byte, p *int) (uint64, bool) {
	if *p >= len(d) {
		return 0, false
	}
	b := d[*p]
	switch {
	case b >= 0x90 && b <= 0x9f:
		*p++
		return uint64(b & 0x0f), true
	case b == 0xdc && len(d)-*p >= 3:
		*p += 3
		return uint64(binary.BigEndian.Uint16(d[*p-2:])), true
	case b == 0xdd && len(d)-*p >= 5:
		*p += 5
		return uint64(binary.BigEndian.Uint32(d[*p-4:])), true
	}
	return 0, false
}

func readUint(d []byte, p *int) (uint64, bool) {
	if *p >= len(d) {
		return 0, false
	}
	b := d[*p]
	rest := len(d) - *p - 1
	switch {
	case b <= 0x7f:
		*p++
		return uint64(b), true
	case b == 0xcc && rest >= 1:
		*p += 2
		return uint64(d[*p-1]), true
	case b == 0xcd && rest >= 2:
		*p += 3
		return uint64(binary.BigEndian.Uint16(d[*p-2:])), true
	case b == 0xce && rest >= 4:
		*p += 5
		return uint64(binary.BigEndian.Uint32(d[*p-4:])), true
	case b == 0xcf && rest >= 8:
		*p += 9
		return binary.BigEndian.Uint64(d[*p-8:]), true
	}
	return 0, false
}

func readStr(d []byte, p *int) (string, bool) {
	if *p >= len(d) {
		return "", false
	}
	b := d[*p]
	var l, h int
	rest := len(d) - *p - 1
	switch {
	case b >= 0xa0 && b <= 0xbf:
		l, h = int(b&0x1f), 1
	case b == 0xd9 && rest >= 1:
		l, h = int(d[*p+1]), 2
	case b == 0xda && rest >= 2:
		l, h = int(binary.BigEndian.Uint16(d[*p+1:])), 3
	case b == 0xdb && rest >= 4:
		l, h = int(binary.BigEndian.Uint32(d[*p+1:])), 5
	default:
		return "", false
	}
	if l > len(d)-*p-h {
		return "", false
	}
	s := string(d[*p+h : *p+h+l])
	*p += h + l
	return s, true
}

// validKind accepts kinds of 1..MaxKindLen bytes from [a-z0-9_.-].
func validKind(kind string) error {
	if kind == "" || len(kind) > MaxKindLen {
		return wireErr(CodeBadKind, -1, "kind must be 1 to 64 bytes")
	}
	for i := 0; i < len(kind); i++ {
		c := kind[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return wireErr(CodeBadKind, -1, "kind may hold only [a-z0-9_.-]")
		}
	}
	return nil
}

// quoteKind renders a kind for an error message, truncated so a hostile
// kind cannot bloat logs.
func quoteKind(k string) string {
	const max = 64
	if len(k) > max {
		return strconv.Quote(k[:max]) + "..."
	}
	return strconv.Quote(k)
}
