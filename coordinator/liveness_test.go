package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
)

func TestLiveness_OwnerRenewalsAreSweptAndBounded(t *testing.T) {
	l := newLiveness()
	t0 := time.Unix(1_000_000, 0)
	l.renewOwner("old", t0)
	l.renewOwner("recent", t0.Add(api.MaxOwnerTTL))
	// A minute past the first sweep, past MaxOwnerTTL for "old" only.
	l.renewOwner("new", t0.Add(api.MaxOwnerTTL+2*ownerSweepEvery))
	if _, ok := l.owner("old"); ok {
		t.Fatal("an owner silent for longer than MaxOwnerTTL was kept")
	}
	for _, id := range []string{"recent", "new"} {
		if _, ok := l.owner(id); !ok {
			t.Fatalf("owner %s was swept", id)
		}
	}

	t.Run("capacity", func(t *testing.T) {
		l := newLiveness()
		now := time.Unix(2_000_000, 0)
		for i := range maxOwners {
			l.owners[fmt.Sprintf("o%d", i)] = now
		}
		l.renewOwner("one-too-many", now)
		if _, ok := l.owner("one-too-many"); ok || l.ownersDropped.Load() != 1 {
			t.Fatalf("a renewal past capacity was kept (dropped=%d)", l.ownersDropped.Load())
		}
		later := now.Add(time.Second)
		l.renewOwner("o7", later) // known owners still renew
		if at, _ := l.owner("o7"); !at.Equal(later) {
			t.Fatalf("a known owner's renewal was refused at capacity: %v", at)
		}
	})
}
