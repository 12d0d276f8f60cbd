package jsonlimit

import (
	"errors"
	"testing"
)

func TestOwnDocumentLimits(t *testing.T) {
	own := OwnDocumentLimits()
	if own.MaxNodes <= DefaultMaxNodes || own.MaxList <= DefaultMaxList || own.MaxStringTotal <= DefaultMaxStringTotal {
		t.Fatalf("own-document limits %+v are not larger than the defaults", own)
	}
	// A list past the contract default is fine for own documents, and one
	// past their own ceiling is not.
	list := func(n int) []byte {
		b := make([]byte, 0, 2*n+2)
		b = append(b, '[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '0')
		}
		return append(b, ']')
	}
	if _, err := Decode(list(DefaultMaxList+1), own); err != nil {
		t.Errorf("own limits rejected a %d-element list: %v", DefaultMaxList+1, err)
	}
	if _, err := Decode(list(DefaultMaxList+1), DefaultLimits()); ErrorCode(err) != CodeList {
		t.Errorf("default limits: err %v, want %s", err, CodeList)
	}
	if _, err := Decode(list(OwnDocumentMaxList+1), own); ErrorCode(err) != CodeList {
		t.Errorf("own limits past their ceiling: err %v, want %s", err, CodeList)
	}
	// The ceilings stay: raising past them is an error, tightening works.
	raised := own
	raised.MaxNodes = OwnDocumentMaxNodes + 1
	if _, err := raised.Normalize(); !errors.Is(err, ErrInvalidLimits) {
		t.Errorf("raising past the own-document ceiling: err %v", err)
	}
	tight, err := own.Tighten(Limits{MaxList: 5})
	if err != nil || tight.MaxList != 5 || tight.MaxNodes != OwnDocumentMaxNodes {
		t.Errorf("Tighten: %+v, %v", tight, err)
	}
	// A plain Limits value cannot borrow the larger ceilings.
	plain := Limits{MaxNodes: OwnDocumentMaxNodes}
	if _, err := plain.Normalize(); !errors.Is(err, ErrInvalidLimits) {
		t.Errorf("plain limits above the default: err %v", err)
	}
}
