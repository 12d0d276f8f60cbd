package coded

import "strings"

// Domain fixes how one package's errors print. Its methods are called on
// the zero value. Most domains are empty structs; a domain with fields is
// also the place for the package's own structured fields (tracestore's
// replay gap), held in Error.Fields.
type Domain interface {
	// Prefix begins every message of the domain ("evalengine: "), or "".
	Prefix() string
	// DetailInParens prints the detail as " (detail)" after the code and
	// reason; otherwise it follows them as ": detail".
	DetailInParens() bool
}

// Error is a stable Code with an optional Reason and Detail. Neither
// Reason nor Detail may carry a value from untrusted input beyond a bounded
// identifier, so an Error is safe to print and log. Err is the cause for
// errors.Is/As; it is never printed nor encoded. Fields holds the
// domain's own structured fields, if it has any; it is neither printed nor
// encoded here (a package that ships them says how).
type Error[D Domain] struct {
	Code   string `msgpack:"code"`
	Reason string `msgpack:"reason,omitempty"`
	Detail string `msgpack:"detail,omitempty"`
	Fields D      `msgpack:"-" json:"-"`
	Err    error  `msgpack:"-"`
}

// Error formats "prefix code: reason: detail", or with the domain's
// DetailInParens "prefix code: reason (detail)"; empty parts are left out.
func (e *Error[D]) Error() string {
	var d D
	var b strings.Builder
	b.Grow(len(d.Prefix()) + len(e.Code) + len(e.Reason) + len(e.Detail) + 5) // one allocation
	b.WriteString(d.Prefix())
	b.WriteString(e.Code)
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	if e.Detail != "" {
		if d.DetailInParens() {
			b.WriteString(" (")
			b.WriteString(e.Detail)
			b.WriteString(")")
		} else {
			b.WriteString(": ")
			b.WriteString(e.Detail)
		}
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error[D]) Unwrap() error { return e.Err }

// Is reports whether target is an *Error of the same domain with the same
// Code, and the same Reason when target sets one, so the packages' sentinels
// work with errors.Is whatever the detail.
func (e *Error[D]) Is(target error) bool {
	t, ok := target.(*Error[D])
	return ok && t.Code == e.Code && (t.Reason == "" || t.Reason == e.Reason)
}
