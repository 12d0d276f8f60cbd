package evalstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

const (
	req1 = "0123456789abcdef0123456789abcdef"
	req2 = "fedcba9876543210fedcba9876543210"
)

// TestStore_RequestIDsNameTheirJob: a request id recorded with its job
// answers a submit of the same digest with that job, one of another
// digest with a typed conflict naming the field, and nothing in another
// scope; it is forgotten after RequestTTLMS, and past MaxRequests the
// oldest goes first. It survives a snapshot and its restore.
func TestStore_RequestIDsNameTheirJob(t *testing.T) {
	s := open(t, evalstore.Limits{MaxRequests: 3})
	st := set("app", "s", "v1", `{"k":"v"}`)
	idx := uint64(0)
	up := func(fn func(tx *evalstore.Tx) error) error { idx++; return update(t, s, idx, fn) }
	if err := up(func(tx *evalstore.Tx) error {
		if _, err := tx.CreateEvaluation(st, job("app", "eval-1", st), adm, 100); err != nil {
			return err
		}
		return tx.RecordRequest("app", req1, "d1", "eval-1", 100)
	}); err != nil {
		t.Fatal(err)
	}
	lookup := func(s *evalstore.Store, scope, id, digest string, now int64) (j *evalrecord.Job, err error) {
		_ = s.View(func(tx *evalstore.Tx) error { j, err = tx.SubmittedJob(scope, id, digest, now); return nil })
		return j, err
	}
	if j, err := lookup(s, "app", req1, "d1", 200); err != nil || j == nil || j.JobID != "eval-1" {
		t.Fatalf("same id, same digest: %v, %v; want eval-1", j, err)
	}
	if _, err := lookup(s, "app", req1, "d2", 200); evalrecord.Code(err) != evalrecord.CodeRequestIDConflict || !strings.Contains(err.Error(), "submit.request_id") {
		t.Fatalf("same id, other digest: %v; want %s naming submit.request_id", err, evalrecord.CodeRequestIDConflict)
	}
	if j, err := lookup(s, "other", req1, "d1", 200); err != nil || j != nil {
		t.Fatalf("another scope: %v, %v; want none", j, err)
	}
	if j, err := lookup(s, "app", req1, "d1", 100+evalstore.RequestTTLMS+1); err != nil || j != nil {
		t.Fatalf("expired: %v, %v; want none", j, err)
	}

	t.Run("survives a snapshot", func(t *testing.T) {
		snap := s.Snapshot()
		var buf bytes.Buffer
		if _, err := snap.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		snap.Release()
		b := open(t, evalstore.Limits{})
		if err := b.Restore(&buf); err != nil {
			t.Fatal(err)
		}
		if j, err := lookup(b, "app", req1, "d1", 200); err != nil || j == nil || j.JobID != "eval-1" {
			t.Fatalf("after restore: %v, %v; want eval-1", j, err)
		}
	})

	t.Run("bounded by count and by age", func(t *testing.T) {
		// Three more ids (the bound is 3): req1, the oldest, goes.
		for i := range 3 {
			if err := up(func(tx *evalstore.Tx) error {
				return tx.RecordRequest("app", fmt.Sprintf("id-%014d", i), "d", "eval-1", int64(300+i))
			}); err != nil {
				t.Fatal(err)
			}
		}
		_ = s.View(func(tx *evalstore.Tx) error {
			if n, err := tx.RequestCount(); err != nil || n != 3 {
				t.Fatalf("count %d, %v; want 3", n, err)
			}
			if _, found, err := tx.Request("app", req1, 400); err != nil || found {
				t.Fatalf("the oldest id past the bound: found %v, %v", found, err)
			}
			if _, found, err := tx.Request("app", "id-00000000000002", 400); err != nil || !found {
				t.Fatalf("the newest id: found %v, %v", found, err)
			}
			return nil
		})
		// A record long after: every expired id is forgotten.
		if err := up(func(tx *evalstore.Tx) error {
			return tx.RecordRequest("app", req2, "d", "eval-1", 400+evalstore.RequestTTLMS)
		}); err != nil {
			t.Fatal(err)
		}
		_ = s.View(func(tx *evalstore.Tx) error {
			if n, err := tx.RequestCount(); err != nil || n != 1 {
				t.Fatalf("count %d, %v; want 1 after expiry", n, err)
			}
			return nil
		})
	})

	t.Run("invalid ids", func(t *testing.T) {
		for _, id := range []string{"", "short", strings.Repeat("a", evalrecord.MaxRequestIDBytes+1), "0123456789abcdef 0123", "0123456789abcdef/0123", "0123456789abcdéf0123"} {
			if evalrecord.ValidRequestID(id) {
				t.Errorf("%q valid", id)
			}
			err := up(func(tx *evalstore.Tx) error { return tx.RecordRequest("app", id, "d", "eval-1", 500) })
			if evalrecord.Code(err) != evalrecord.CodeInvalidStoreRecord {
				t.Errorf("record %q: %v", id, err)
			}
		}
		for _, id := range []string{req1, "123e4567-e89b-12d3-a456-426614174000", strings.Repeat("Z_", 32)} {
			if !evalrecord.ValidRequestID(id) {
				t.Errorf("%q invalid", id)
			}
		}
	})
}

// FuzzRequestIDs: request id keys are injective over (scope, id) (a scope
// may hold any UTF-8, NUL included), and forgetting an expired id through
// its age key deletes that id's record and no other.
func FuzzRequestIDs(f *testing.F) {
	f.Add("app", req1, "app", req1)
	f.Add("app", req1, "app", req2)
	f.Add("a", "bc0123456789abcdef", "ab", "c0123456789abcdef")
	f.Add("a\x00", "0123456789abcdef", "a", "\x000123456789abcdef")
	s, err := evalstore.Open(evalstore.Options{Dir: f.TempDir(), MemTableSize: 8 << 20})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	rollback := errors.New("rollback")
	var idx uint64
	f.Fuzz(func(t *testing.T, scopeA, idA, scopeB, idB string) {
		if evalstore.ValidScope(scopeA) != nil || evalstore.ValidScope(scopeB) != nil || !evalrecord.ValidRequestID(idA) || !evalrecord.ValidRequestID(idB) {
			t.Skip()
		}
		same := scopeA == scopeB && idA == idB
		idx++
		_, err := s.Update(idx, func(tx *evalstore.Tx) error {
			if err := tx.RecordRequest(scopeA, idA, "d", "eval-a", 1000); err != nil {
				t.Fatal(err)
			}
			if _, found, err := tx.Request(scopeB, idB, 1000); err != nil || found != same {
				t.Fatalf("(%q, %q) recorded, (%q, %q) found %v, %v", scopeA, idA, scopeB, idB, found, err)
			}
			// B, long after: A expires and is forgotten through its age key.
			if err := tx.RecordRequest(scopeB, idB, "d", "eval-b", 1000+evalstore.RequestTTLMS+1); err != nil {
				t.Fatal(err)
			}
			late := int64(1000 + evalstore.RequestTTLMS + 1)
			_, foundA, _ := tx.Request(scopeA, idA, late)
			rec, foundB, _ := tx.Request(scopeB, idB, late)
			if n, _ := tx.RequestCount(); n != 1 || !foundB || rec.JobID != "eval-b" || (foundA && !same) {
				t.Fatalf("after expiry: count %d, A found %v, B %v %+v", n, foundA, foundB, rec)
			}
			return rollback
		})
		if !errors.Is(err, rollback) {
			t.Fatal(err)
		}
	})
}
