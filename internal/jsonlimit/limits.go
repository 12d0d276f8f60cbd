package jsonlimit

import (
	"errors"
	"fmt"
)

// Contract defaults (adk_eval_limits). They are also the ceilings: a caller
// may configure any limit lower, never higher.
const (
	DefaultMaxDepth       = 64
	DefaultMaxNodes       = 100_000
	DefaultMaxString      = 1 << 20 // one string, decoded bytes
	DefaultMaxStringTotal = 8 << 20 // all strings and keys, decoded bytes
	DefaultMaxList        = 10_000
	DefaultMaxObjectKeys  = 10_000
	DefaultMaxBytes       = 16 << 20 // the serialized document
)

// ErrInvalidLimits is returned (wrapped) when a Limits value has a negative
// field or a field above its default. Raising a limit is a configuration
// error rather than a silent clamp, so that a mistaken setting is noticed.
var ErrInvalidLimits = errors.New("jsonlimit: invalid limits")

// Limits bounds one JSON document. A zero field means "the default", so
// Limits{} is DefaultLimits() and Limits{MaxList: 100} tightens only the list
// length. Every field must be between 1 and its default once zero fields are
// filled in.
//
// Depth counts nested containers: MaxDepth 64 accepts 64 arrays or objects
// inside each other and rejects the 65th. Nodes counts every value and every
// object key. String limits count decoded bytes of values and keys alike.
type Limits struct {
	MaxDepth       int // nested arrays/objects
	MaxNodes       int // values plus object keys
	MaxString      int // bytes of one decoded string or key
	MaxStringTotal int // bytes of all decoded strings and keys
	MaxList        int // elements of one array
	MaxObjectKeys  int // keys of one object
	MaxBytes       int // bytes of the serialized document

	// large marks limits derived from OwnDocumentLimits: their ceilings are
	// that profile's, not the contract defaults.
	large bool
}

// Ceilings of OwnDocumentLimits. A 16 MiB result of 10,000 samples holds
// about 600,000 nodes; these leave room for that and still bound the
// decoded size.
const (
	OwnDocumentMaxNodes       = 2_000_000
	OwnDocumentMaxStringTotal = 16 << 20
	OwnDocumentMaxList        = 100_000
)

// OwnDocumentLimits bounds documents that adk itself writes and later
// reads back, such as eval results and baseline comparisons, which the
// engine already caps at 16 MiB (max_report_bytes). Their node, string and
// list ceilings are higher than the contract defaults, which fit inputs
// people write (eval sets, configs) but not a 10,000-sample result. Depth,
// one string, object keys and document size keep the default ceilings.
// Such documents are still untrusted when read from disk: every limit is
// enforced, just with larger ceilings, and Tighten can only lower them.
func OwnDocumentLimits() Limits {
	l := DefaultLimits()
	l.MaxNodes = OwnDocumentMaxNodes
	l.MaxStringTotal = OwnDocumentMaxStringTotal
	l.MaxList = OwnDocumentMaxList
	l.large = true
	return l
}

// DefaultLimits returns the contract defaults, which are also the maxima.
func DefaultLimits() Limits {
	return Limits{
		MaxDepth:       DefaultMaxDepth,
		MaxNodes:       DefaultMaxNodes,
		MaxString:      DefaultMaxString,
		MaxStringTotal: DefaultMaxStringTotal,
		MaxList:        DefaultMaxList,
		MaxObjectKeys:  DefaultMaxObjectKeys,
		MaxBytes:       DefaultMaxBytes,
	}
}

// fields lists the limits with their names and ceilings, in a fixed order,
// so that validation and tightening treat every field alike.
func (l *Limits) fields() []limitField {
	d := DefaultLimits()
	if l.large {
		d = OwnDocumentLimits()
	}
	return []limitField{
		{"MaxDepth", &l.MaxDepth, d.MaxDepth},
		{"MaxNodes", &l.MaxNodes, d.MaxNodes},
		{"MaxString", &l.MaxString, d.MaxString},
		{"MaxStringTotal", &l.MaxStringTotal, d.MaxStringTotal},
		{"MaxList", &l.MaxList, d.MaxList},
		{"MaxObjectKeys", &l.MaxObjectKeys, d.MaxObjectKeys},
		{"MaxBytes", &l.MaxBytes, d.MaxBytes},
	}
}

type limitField struct {
	name string
	v    *int
	max  int
}

// Normalize fills zero fields with their defaults and checks that every field
// is between 1 and its default. The error wraps ErrInvalidLimits.
func (l Limits) Normalize() (Limits, error) {
	for _, f := range l.fields() {
		switch {
		case *f.v == 0:
			*f.v = f.max
		case *f.v < 0 || *f.v > f.max:
			return Limits{}, fmt.Errorf("%w: %s %d not in 1..%d", ErrInvalidLimits, f.name, *f.v, f.max)
		}
	}
	return l, nil
}

// Tighten returns l with every non-zero field of o applied. A field of o may
// only lower the corresponding (normalized) field of l; raising it, or a
// negative value, is an error wrapping ErrInvalidLimits.
func (l Limits) Tighten(o Limits) (Limits, error) {
	l, err := l.Normalize()
	if err != nil {
		return Limits{}, err
	}
	cur, next := l.fields(), o.fields()
	for i, f := range next {
		switch {
		case *f.v == 0:
		case *f.v < 0 || *f.v > *cur[i].v:
			return Limits{}, fmt.Errorf("%w: %s %d not in 1..%d", ErrInvalidLimits, f.name, *f.v, *cur[i].v)
		default:
			*cur[i].v = *f.v
		}
	}
	return l, nil
}
