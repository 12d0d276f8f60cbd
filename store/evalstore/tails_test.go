package evalstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// TestStore_TailsAreBoundedAndGoWithTheirJobs: a tail reads back as
// stored (its head and chunks), a node keeps at most MaxTails (the
// oldest go first, head and chunks), the tail of a job the store no
// longer holds goes at the next put, and a tail put again replaces
// itself. The head's failed-case ranks answer both parts of the
// failures-first order.
func TestStore_TailsAreBoundedAndGoWithTheirJobs(t *testing.T) {
	s := open(t, evalstore.Limits{})
	st := set("app", "s", "v1", `{"x":1}`)
	many := evalstore.Admission{MaxConcurrency: 1000, MaxQueue: 1000, MaxQueueBytes: 1 << 20}
	total := evalstore.MaxTails + 2
	for i := range total {
		if err := update(t, s, uint64(i+1), func(tx *evalstore.Tx) error {
			_, err := tx.CreateEvaluation(st, job("app", fmt.Sprintf("eval-%03d", i), st), many, 100)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(id string, built int64) {
		t.Helper()
		h := &evalstore.TailHead{JobID: id, Records: 3, Digest: "d", Cases: 3, Header: []byte("h\n"), Summary: []byte("s\n"),
			Failed: []byte{0, 0, 0, 1}, Built: built}
		if err := s.PutTail(h, [][]byte{[]byte(id + " c0\n" + id + " c1\n"), []byte(id + " c2\n")}); err != nil {
			t.Fatal(err)
		}
	}
	has := func(id string) bool {
		t.Helper()
		var h *evalstore.TailHead
		err := s.View(func(tx *evalstore.Tx) (err error) {
			if h, err = tx.TailHead(id); err != nil {
				return err
			}
			for c, want := range []string{id + " c0\n" + id + " c1\n", id + " c2\n"} {
				b, err := tx.TailChunk(id, c)
				if err != nil || string(b) != want {
					return fmt.Errorf("chunk %d: %q, %v", c, b, err)
				}
			}
			return nil
		})
		if errors.Is(err, evalrecord.ErrNotFound) {
			// Its chunks went with it.
			if s.View(func(tx *evalstore.Tx) error { _, err := tx.TailChunk(id, 0); return err }) == nil {
				t.Fatalf("%s: chunks without a head", id)
			}
			return false
		}
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if h.JobID != id || h.FailedCount() != 1 || h.FailedAt(0) != 1 || h.PassedAt(0) != 0 || h.PassedAt(1) != 2 || !bytes.Equal(h.Summary, []byte("s\n")) {
			t.Fatalf("%s: head %+v", id, h)
		}
		return true
	}
	for i := range total {
		put(fmt.Sprintf("eval-%03d", i), int64(i))
	}
	for i := range total {
		if want := i >= 2; has(fmt.Sprintf("eval-%03d", i)) != want {
			t.Fatalf("eval-%03d kept: want %v", i, want)
		}
	}
	// A tail put again replaces itself, and evicts nothing else.
	put("eval-010", 1000)
	if !has("eval-010") || !has("eval-002") {
		t.Fatal("a tail put again evicted another")
	}
	// A job the store no longer holds loses its tail at the next put.
	put("eval-gone", 1001) // over the bound: the oldest goes
	if has("eval-002") || !has("eval-gone") {
		t.Fatal("the oldest tail was not evicted for a new one")
	}
	put("eval-011", 1002)
	if has("eval-gone") || !has("eval-003") {
		t.Fatal("the tail of a job that is gone was kept, or another went instead")
	}
}
