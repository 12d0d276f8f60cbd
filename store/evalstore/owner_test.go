package evalstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fadcedab/adk/store/evalstore"
)

// TestStore_SingleOwner: a second Open of a directory that is open gets
// the typed eval_store_already_owned, and the first owner keeps working.
func TestStore_SingleOwner(t *testing.T) {
	dir := t.TempDir()
	first, err := evalstore.Open(evalstore.Options{Dir: dir, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	second, err := evalstore.Open(evalstore.Options{Dir: dir, MemTableSize: 8 << 20})
	if err == nil {
		second.Close()
		t.Fatal("second Open of an owned directory succeeded")
	}
	if !errors.Is(err, evalstore.ErrAlreadyOwned) || !strings.Contains(err.Error(), "eval_store_already_owned") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open: %v, want eval_store_already_owned naming %s", err, dir)
	}
	if _, err := first.Update(1, func(*evalstore.Tx) error { return nil }); err != nil {
		t.Fatalf("the owner after a refused Open: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := evalstore.Open(evalstore.Options{Dir: dir, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatalf("Open after the owner closed: %v", err)
	}
	if got := again.AppliedIndex(); got != 1 {
		t.Errorf("applied index %d after reopen, want 1", got)
	}
	again.Close()
}
