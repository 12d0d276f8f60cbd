package evalstore

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fadcedab/adk/store/evalrecord"
)

// TestResult_StoredCompressedReadsBothForms checks that a stored result
// round-trips through its compressed form, that a result stored plain by
// an earlier build reads as it is, and that a damaged one is a typed
// error.
func TestResult_StoredCompressedReadsBothForms(t *testing.T) {
	doc := []byte(`{"cases":[` + strings.Repeat(`{"case_id":"c","passed":true,"score":1},`, 5000) + `{}]}`)
	v := compressResult(doc)
	if v[0] != resultS2 || len(v) > len(doc)/10 {
		t.Fatalf("stored %d bytes for %d", len(v), len(doc))
	}
	if got, err := decompressResult(v); err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("round trip: %d bytes, %v", len(got), err)
	}
	if got, err := decompressResult(doc); err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("plain: %d bytes, %v", len(got), err)
	}
	if _, err := decompressResult(v[:len(v)/2]); evalrecord.Code(err) != evalrecord.CodeInvalidStoreRecord {
		t.Fatalf("damaged: %v", err)
	}
}
