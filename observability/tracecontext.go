package observability

import (
	"net/http"
	"strings"
)

// W3C trace-context limits (CONTRACTS §3).
const (
	// TraceparentLen is the only accepted traceparent length (version 00).
	TraceparentLen = 55
	// MaxTraceHeaderBytes bounds a traceparent or tracestate header value
	// before any parsing.
	MaxTraceHeaderBytes = 1024
	// MaxTracestateBytes bounds a tracestate value.
	MaxTracestateBytes = 512
	// MaxTracestateMembers bounds the list members of a tracestate.
	MaxTracestateMembers = 32
)

// Trace-context error kinds (TraceContextError.Kind): the contract's tags.
const (
	KindInvalidTraceparent = "invalid_traceparent"
	KindInvalidTracestate  = "invalid_tracestate"
	KindInvalidTraceHeader = "invalid_trace_header"
)

// Trace-context rejection reasons (TraceContextError.Reason).
const (
	ReasonInvalidTraceID     = "invalid_trace_id"
	ReasonInvalidSpanID      = "invalid_span_id"
	ReasonInvalidTraceFlags  = "invalid_trace_flags"
	ReasonInvalidLength      = "invalid_length_or_delimiters"
	ReasonForbiddenVersion   = "forbidden_version"
	ReasonUnsupportedVersion = "unsupported_version"
	ReasonInvalidVersion     = "invalid_version"
	ReasonDuplicateHeader    = "duplicate_header"
	ReasonEmpty              = "empty"
	ReasonTooLarge           = "too_large"
	ReasonTooManyMembers     = "too_many_members"
	ReasonInvalidMember      = "invalid_member"
	ReasonInvalidKey         = "invalid_key"
	ReasonInvalidValue       = "invalid_value"
	ReasonDuplicateKey       = "duplicate_key"
	ReasonTraceparentHeader  = "traceparent"
	ReasonTracestateHeader   = "tracestate"
)

// TraceContextError is a structural trace-context rejection. It never
// carries the offending input.
type TraceContextError struct {
	Kind   string // KindInvalidTraceparent, KindInvalidTracestate, KindInvalidTraceHeader
	Reason string // one of the Reason constants
}

// Error implements error.
func (e *TraceContextError) Error() string { return e.Kind + ": " + e.Reason }

// Pre-built errors: parsing is on the request path and must not allocate.
var (
	errTPTraceID     = &TraceContextError{KindInvalidTraceparent, ReasonInvalidTraceID}
	errTPSpanID      = &TraceContextError{KindInvalidTraceparent, ReasonInvalidSpanID}
	errTPFlags       = &TraceContextError{KindInvalidTraceparent, ReasonInvalidTraceFlags}
	errTPLength      = &TraceContextError{KindInvalidTraceparent, ReasonInvalidLength}
	errTPForbidden   = &TraceContextError{KindInvalidTraceparent, ReasonForbiddenVersion}
	errTPUnsupported = &TraceContextError{KindInvalidTraceparent, ReasonUnsupportedVersion}
	errTPVersion     = &TraceContextError{KindInvalidTraceparent, ReasonInvalidVersion}
	errTSEmpty       = &TraceContextError{KindInvalidTracestate, ReasonEmpty}
	errTSTooLarge    = &TraceContextError{KindInvalidTracestate, ReasonTooLarge}
	errTSTooMany     = &TraceContextError{KindInvalidTracestate, ReasonTooManyMembers}
	errTSMember      = &TraceContextError{KindInvalidTracestate, ReasonInvalidMember}
	errTSKey         = &TraceContextError{KindInvalidTracestate, ReasonInvalidKey}
	errTSValue       = &TraceContextError{KindInvalidTracestate, ReasonInvalidValue}
	errTSDupKey      = &TraceContextError{KindInvalidTracestate, ReasonDuplicateKey}
	errTSDupHeader   = &TraceContextError{KindInvalidTracestate, ReasonDuplicateHeader}
	errHeaderTP      = &TraceContextError{KindInvalidTraceHeader, ReasonTraceparentHeader}
	errHeaderTS      = &TraceContextError{KindInvalidTraceHeader, ReasonTracestateHeader}
)

// TraceID is a W3C trace id. The zero value is invalid on the wire.
type TraceID [16]byte

// SpanID is a W3C span (parent) id. The zero value means "none".
type SpanID [8]byte

// IsZero reports whether t is the all-zero (invalid) trace id.
func (t TraceID) IsZero() bool { return t == TraceID{} }

// IsZero reports whether s is the all-zero span id.
func (s SpanID) IsZero() bool { return s == SpanID{} }

// String returns the 32 lowercase hex digits of t.
func (t TraceID) String() string {
	var b [32]byte
	hexEncode(b[:], t[:])
	return string(b[:])
}

// String returns the 16 lowercase hex digits of s.
func (s SpanID) String() string {
	var b [16]byte
	hexEncode(b[:], s[:])
	return string(b[:])
}

// ParseTraceID parses 32 lowercase hex digits; all-zero and uppercase are
// rejected with invalid_trace_id.
func ParseTraceID(s string) (TraceID, error) {
	var t TraceID
	if len(s) != 32 || !hexDecode(t[:], s) || t.IsZero() {
		return TraceID{}, errTPTraceID
	}
	return t, nil
}

// ParseSpanID parses 16 lowercase hex digits; all-zero and uppercase are
// rejected with invalid_span_id.
func ParseSpanID(s string) (SpanID, error) {
	var id SpanID
	if len(s) != 16 || !hexDecode(id[:], s) || id.IsZero() {
		return SpanID{}, errTPSpanID
	}
	return id, nil
}

// ParseTraceFlags parses exactly two lowercase hex digits ("GG" and "0" are
// invalid_trace_flags).
func ParseTraceFlags(s string) (byte, error) {
	var b [1]byte
	if len(s) != 2 || !hexDecode(b[:], s) {
		return 0, errTPFlags
	}
	return b[0], nil
}

// TraceFlagsFromInt checks that f is in 0..255.
func TraceFlagsFromInt(f int) (byte, error) {
	if f < 0 || f > 255 {
		return 0, errTPFlags
	}
	return byte(f), nil
}

// Traceparent is a parsed W3C traceparent header.
type Traceparent struct {
	TraceID TraceID
	SpanID  SpanID
	Flags   byte
}

// Sampled reports whether the sampled bit (0x01) is set.
func (tp Traceparent) Sampled() bool { return tp.Flags&1 == 1 }

// ParseTraceparent strictly parses a version-00 traceparent:
// exactly "00-<32 hex>-<16 hex>-<2 hex>", lowercase only.
//
// Unlike the W3C recommendation, future versions are not parsed
// forward-compatibly: any version other than 00 is unsupported_version
// (ff is forbidden_version). We would rather drop an inbound trace than
// continue one whose fields we only guess at; the caller starts a new root.
func ParseTraceparent(s string) (Traceparent, error) {
	var tp Traceparent
	if len(s) < 3 || s[2] != '-' {
		return tp, errTPLength
	}
	var v [1]byte
	if !hexDecode(v[:], s[:2]) {
		return tp, errTPVersion
	}
	switch {
	case v[0] == 0xff:
		return tp, errTPForbidden
	case v[0] != 0:
		return tp, errTPUnsupported
	case len(s) > TraceparentLen:
		return tp, errTPUnsupported // 00 with trailing data
	case len(s) != TraceparentLen || s[35] != '-' || s[52] != '-':
		return tp, errTPLength
	}
	if !hexDecode(tp.TraceID[:], s[3:35]) || tp.TraceID.IsZero() {
		return Traceparent{}, errTPTraceID
	}
	if !hexDecode(tp.SpanID[:], s[36:52]) || tp.SpanID.IsZero() {
		return Traceparent{}, errTPSpanID
	}
	var f [1]byte
	if !hexDecode(f[:], s[53:55]) {
		return Traceparent{}, errTPFlags
	}
	tp.Flags = f[0]
	return tp, nil
}

// FormatTraceparent renders tp as a version-00 header. Zero ids are
// rejected with the id errors.
func FormatTraceparent(tp Traceparent) (string, error) {
	if tp.TraceID.IsZero() {
		return "", errTPTraceID
	}
	if tp.SpanID.IsZero() {
		return "", errTPSpanID
	}
	return tp.format(), nil
}

func (tp Traceparent) format() string {
	var b [TraceparentLen]byte
	b[0], b[1], b[2] = '0', '0', '-'
	hexEncode(b[3:35], tp.TraceID[:])
	b[35] = '-'
	hexEncode(b[36:52], tp.SpanID[:])
	b[52] = '-'
	hexEncode(b[53:55], []byte{tp.Flags})
	return string(b[:])
}

// ParseTracestate validates a tracestate value and returns its canonical
// form: members trimmed of optional whitespace (space, tab) and joined by
// "," with no spaces, order preserved. The empty string is rejected
// (ReasonEmpty); an absent header is the caller's "no tracestate".
func ParseTracestate(s string) (string, error) {
	if s == "" {
		return "", errTSEmpty
	}
	if len(s) > MaxTracestateBytes {
		return "", errTSTooLarge
	}
	if strings.Count(s, ",")+1 > MaxTracestateMembers {
		return "", errTSTooMany
	}
	var keys [MaxTracestateMembers]string
	n := 0
	var out strings.Builder
	out.Grow(len(s))
	rest := s
	for {
		member, tail, more := strings.Cut(rest, ",")
		member = trimOWS(member)
		key, value, ok := strings.Cut(member, "=")
		if !ok {
			return "", errTSMember
		}
		if !validTracestateKey(key) {
			return "", errTSKey
		}
		if !validTracestateValue(value) {
			return "", errTSValue
		}
		for _, k := range keys[:n] {
			if k == key {
				return "", errTSDupKey
			}
		}
		keys[n] = key
		n++
		if out.Len() > 0 {
			out.WriteByte(',')
		}
		out.WriteString(member)
		if !more {
			break
		}
		rest = tail
	}
	return out.String(), nil
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func isLcalphaDigit(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func isKeyChar(c byte) bool {
	return isLcalphaDigit(c) || c == '_' || c == '-' || c == '*' || c == '/'
}

// validTracestateKey: simple = [a-z0-9][a-z0-9_\-*/]{0,255};
// multi-tenant = tenant@system, tenant [a-z0-9][a-z0-9_\-*/.]{0,240},
// system [a-z][a-z0-9_\-*/]{0,13}; at most one '@'.
func validTracestateKey(k string) bool {
	tenant, system, multi := strings.Cut(k, "@")
	if !multi {
		if len(k) == 0 || len(k) > 256 || !isLcalphaDigit(k[0]) {
			return false
		}
		for i := 1; i < len(k); i++ {
			if !isKeyChar(k[i]) {
				return false
			}
		}
		return true
	}
	if len(tenant) == 0 || len(tenant) > 241 || !isLcalphaDigit(tenant[0]) {
		return false
	}
	for i := 1; i < len(tenant); i++ {
		if !isKeyChar(tenant[i]) && tenant[i] != '.' {
			return false
		}
	}
	if len(system) == 0 || len(system) > 14 || system[0] < 'a' || system[0] > 'z' {
		return false
	}
	for i := 1; i < len(system); i++ {
		if !isKeyChar(system[i]) {
			return false // includes a second '@'
		}
	}
	return true
}

// validTracestateValue: 1..256 printable ASCII (0x20-0x7E) except ',' and
// '=', not ending in a space.
func validTracestateValue(v string) bool {
	if len(v) == 0 || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

// RemoteContext is a trace context extracted from inbound headers.
type RemoteContext struct {
	Traceparent
	// Tracestate is canonical, or "" when the header was absent.
	Tracestate string
}

// Extract reads traceparent and tracestate from h. Header names match
// case-insensitively (h need not be canonicalised). It returns
// ErrTraceparentNotFound when no traceparent is present (a tracestate alone
// is ignored), ErrDuplicateTraceparent for more than one traceparent value,
// and a *TraceContextError for every other rejection; nothing is partly
// accepted.
func Extract(h http.Header) (RemoteContext, error) {
	var tpVal, tsVal string
	tpN, tsN := 0, 0
	for name, vals := range h {
		switch {
		case strings.EqualFold(name, "traceparent"):
			tpN += len(vals)
			if len(vals) > 0 {
				tpVal = vals[0]
			}
		case strings.EqualFold(name, "tracestate"):
			tsN += len(vals)
			if len(vals) > 0 {
				tsVal = vals[0]
			}
		}
	}
	if tpN == 0 {
		return RemoteContext{}, ErrTraceparentNotFound
	}
	if tpN > 1 {
		return RemoteContext{}, ErrDuplicateTraceparent
	}
	if tsN > 1 {
		return RemoteContext{}, errTSDupHeader
	}
	if len(tpVal) > MaxTraceHeaderBytes {
		return RemoteContext{}, errHeaderTP
	}
	if len(tsVal) > MaxTraceHeaderBytes {
		return RemoteContext{}, errHeaderTS
	}
	tp, err := ParseTraceparent(tpVal)
	if err != nil {
		return RemoteContext{}, err
	}
	rc := RemoteContext{Traceparent: tp}
	if tsN == 1 {
		if rc.Tracestate, err = ParseTracestate(tsVal); err != nil {
			return RemoteContext{}, err
		}
	}
	return rc, nil
}

// Inject writes c's traceparent (and tracestate when non-empty, in canonical
// form) into h, first removing any existing traceparent/tracestate under any
// casing. Other headers are kept. On error h is unchanged.
//
// The contract writes lowercase names; in Go we write the canonical keys
// (Traceparent, Tracestate) so h.Get finds them. Header names are
// case-insensitive on the wire, and HTTP/2 lowercases them anyway.
func Inject(h http.Header, c Correlation) error {
	if c.TraceID.IsZero() || c.SpanID.IsZero() {
		if c.TraceID.IsZero() {
			return errTPTraceID
		}
		return errTPSpanID
	}
	ts := ""
	if c.TraceState != "" {
		var err error
		if ts, err = ParseTracestate(c.TraceState); err != nil {
			return err
		}
	}
	for name := range h {
		if strings.EqualFold(name, "traceparent") || strings.EqualFold(name, "tracestate") {
			delete(h, name)
		}
	}
	h.Set("Traceparent", Traceparent{c.TraceID, c.SpanID, c.Flags}.format())
	if ts != "" {
		h.Set("Tracestate", ts)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

func hexEncode(dst, src []byte) {
	for i, b := range src {
		dst[2*i] = hexDigits[b>>4]
		dst[2*i+1] = hexDigits[b&0xf]
	}
}

// hexDecode decodes lowercase hex only; len(s) must be 2*len(dst).
func hexDecode(dst []byte, s string) bool {
	_ = s[2*len(dst)-1]
	for i := range dst {
		hi, lo := hexTable[s[2*i]], hexTable[s[2*i+1]]
		if hi|lo == 0xff {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// hexTable maps lowercase hex digits to their value; 0xff marks every other
// byte (so hi|lo == 0xff iff either is invalid, values being <= 0x0f).
var hexTable = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
	}
	return t
}()
