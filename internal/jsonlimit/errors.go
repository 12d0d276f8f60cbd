package jsonlimit

import (
	"errors"
	"strconv"
	"strings"
)

// Error codes. The limit codes are the contract's stable strings; the others
// name the remaining ways an untrusted document is refused.
const (
	CodeDepth        = "eval_data_depth_exceeded"
	CodeNodes        = "eval_data_nodes_exceeded"
	CodeString       = "eval_binary_too_large"
	CodeStringBudget = "eval_binary_budget_exceeded"
	CodeList         = "eval_list_too_large"
	CodeObject       = "eval_map_too_large"
	CodeTooLarge     = "eval_data_too_large"

	CodeInvalidJSON  = "invalid_json"  // syntax error, truncation, trailing data
	CodeInvalidUTF8  = "invalid_utf8"  // invalid UTF-8 or an unpaired surrogate escape
	CodeDuplicateKey = "duplicate_key" // an object repeats a key
	CodeUnknownField = "unknown_field" // Unmarshal: a key the target struct lacks
	CodeType         = "invalid_type"  // Unmarshal: a value of the wrong JSON type
	CodeInvalidValue = "invalid_value" // Unmarshal: the target rejected a value
)

// maxPathInError bounds the path an error reports; deeper paths end in "...".
const maxPathInError = 256

// maxKeyInError bounds how much of an offending key an error repeats.
const maxKeyInError = 64

// Error is the typed error for every refused document. Callers match on Code
// (errors.As, or ErrorCode). The message is bounded and never repeats input
// beyond a key name truncated to 64 bytes.
type Error struct {
	Code   string // one of the Code constants
	Limit  int    // the limit exceeded, for the limit codes
	Path   string // where, like $.cases[3].turns; the container for list/object/depth limits
	Key    string // for duplicate_key and unknown_field: the key, truncated to 64 bytes
	Offset int    // byte offset into the document, for invalid_json and invalid_utf8
	Reason string // short fixed description for invalid_json / invalid_utf8 / invalid_type

	cause error // the underlying encoding/json error for invalid_value; not printed
}

// Error formats the code, limit, path, key and reason.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("jsonlimit: ")
	b.WriteString(e.Code)
	if e.Limit > 0 {
		b.WriteString(" (limit ")
		b.WriteString(strconv.Itoa(e.Limit))
		b.WriteString(")")
	}
	if e.Path != "" {
		b.WriteString(" at ")
		b.WriteString(e.Path)
	}
	if e.Key != "" {
		b.WriteString(" key ")
		b.WriteString(strconv.Quote(e.Key))
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	if e.Code == CodeInvalidJSON || e.Code == CodeInvalidUTF8 {
		b.WriteString(" (offset ")
		b.WriteString(strconv.Itoa(e.Offset))
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the underlying decode error for invalid_value, if any.
func (e *Error) Unwrap() error { return e.cause }

// ErrorCode returns the Code of the first *Error in err's chain, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// truncateKey bounds a key for an error message, cutting on a rune boundary.
func truncateKey(k string) string {
	if len(k) <= maxKeyInError {
		return k
	}
	cut := maxKeyInError
	for cut > 0 && !runeStart(k[cut]) {
		cut--
	}
	return k[:cut] + "..."
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }

// UnknownFieldError is the error Unmarshal gives for key, a key the
// target struct lacks: for a decoder that reads a document through a
// Scanner in one pass and must refuse what Unmarshal refuses.
func UnknownFieldError(key []byte) *Error {
	return &Error{Code: CodeUnknownField, Path: "$", Key: truncateKey(string(key))}
}

// TypeError is the error Unmarshal gives for a value of the wrong JSON
// type at path ("$" or "$.field").
func TypeError(path string) *Error {
	return &Error{Code: CodeType, Path: path}
}
