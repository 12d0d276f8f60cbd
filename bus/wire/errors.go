package wire

import (
	"fmt"
)

// Wire error codes. They are stable strings: they may appear in logs,
// metrics and replies, so never rename one.
const (
	// CodeTooLarge: the message, or one string/bin/ext inside it, is larger
	// than the decode limits allow.
	CodeTooLarge = "wire_too_large"
	// CodeDepthExceeded: containers are nested deeper than MaxDepth.
	CodeDepthExceeded = "wire_depth_exceeded"
	// CodeTooManyElements: the message holds more values than MaxElements.
	CodeTooManyElements = "wire_too_many_elements"
	// CodeTruncated: the data ends before a value it declares, including
	// length headers that claim more bytes than remain.
	CodeTruncated = "wire_truncated"
	// CodeMalformed: not a well-formed envelope (reserved byte, trailing
	// bytes, wrong envelope shape, or a body that does not fit the target).
	CodeMalformed = "wire_malformed"
	// CodeBadVersion: the envelope version is not WireVersion.
	CodeBadVersion = "wire_bad_version"
	// CodeWrongKind: the envelope kind is not the one the caller expects.
	CodeWrongKind = "wire_wrong_kind"
	// CodeBadKind: Encode was given a kind that is not a valid kind token.
	CodeBadKind = "wire_bad_kind"
	// CodeEncode: the value could not be encoded.
	CodeEncode = "wire_encode"
	// CodeBadEncoding: a message's body encoding (its compression) is
	// unknown, or the body is not valid in it.
	CodeBadEncoding = "wire_bad_encoding"
)

// WireError is the one error type the codec returns. Code is one of the
// Code* constants; errors.Is matches it against the Err* sentinels by code.
//
// It is not internal/coded's Error: it carries Offset, and its message
// prints the offset and the msgpack cause, where coded never prints a
// cause. Sharing coded would need a per-domain formatting hook as long as
// the Error() it replaces, so the type stays its own.
type WireError struct {
	// Code is the stable error code.
	Code string
	// Offset is the byte offset in the input where the problem was found,
	// or -1 when it does not apply.
	Offset int
	// Detail is a short human-readable explanation. It never contains
	// payload bytes.
	Detail string
	// Err is the underlying cause, if any (for example a msgpack error).
	Err error
}

// Error implements error.
func (e *WireError) Error() string {
	msg := "bus: " + e.Code
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Offset >= 0 {
		msg += fmt.Sprintf(" (offset %d)", e.Offset)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying cause.
func (e *WireError) Unwrap() error { return e.Err }

// Is reports whether target is a *WireError with the same Code, so
// errors.Is(err, bus.ErrWireTruncated) works whatever the offset or detail.
func (e *WireError) Is(target error) bool {
	t, ok := target.(*WireError)
	return ok && t.Code == e.Code
}

func wireErr(code string, off int, detail string) *WireError {
	return &WireError{Code: code, Offset: off, Detail: detail}
}

// Sentinels for errors.Is; each matches every *WireError with its code.
var (
	// ErrWireTooLarge matches CodeTooLarge.
	ErrWireTooLarge = &WireError{Code: CodeTooLarge, Offset: -1}
	// ErrWireDepthExceeded matches CodeDepthExceeded.
	ErrWireDepthExceeded = &WireError{Code: CodeDepthExceeded, Offset: -1}
	// ErrWireTooManyElements matches CodeTooManyElements.
	ErrWireTooManyElements = &WireError{Code: CodeTooManyElements, Offset: -1}
	// ErrWireTruncated matches CodeTruncated.
	ErrWireTruncated = &WireError{Code: CodeTruncated, Offset: -1}
	// ErrWireMalformed matches CodeMalformed.
	ErrWireMalformed = &WireError{Code: CodeMalformed, Offset: -1}
	// ErrWireBadVersion matches CodeBadVersion.
	ErrWireBadVersion = &WireError{Code: CodeBadVersion, Offset: -1}
	// ErrWireWrongKind matches CodeWrongKind.
	ErrWireWrongKind = &WireError{Code: CodeWrongKind, Offset: -1}
	// ErrWireBadKind matches CodeBadKind.
	ErrWireBadKind = &WireError{Code: CodeBadKind, Offset: -1}
	// ErrWireEncode matches CodeEncode.
	ErrWireEncode = &WireError{Code: CodeEncode, Offset: -1}
	// ErrWireBadEncoding matches CodeBadEncoding.
	ErrWireBadEncoding = &WireError{Code: CodeBadEncoding, Offset: -1}
)
