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

func TestOwnerLapsed_NewLeaderGrantsNoFreshLease(t *testing.T) {
	ttl := 2 * time.Second
	t0 := time.Unix(3_000_000, 0)
	created := t0
	last := t0.Add(10 * time.Second) // the owner's last renewal heard
	for _, c := range []struct {
		name       string
		listenFrom time.Time
		heard      bool
		now        time.Time
		want       bool
	}{
		// A follower listening all along becomes leader 1.5 s after the
		// owner's last renewal, then 2.1 s after: the silence counts from
		// the renewal, not from its election.
		{"listening follower, within the lease", t0, true, last.Add(1500 * time.Millisecond), false},
		{"listening follower, lease over", t0, true, last.Add(2100 * time.Millisecond), true},
		// A node that started (or reconnected to NATS) after the renewal
		// may have missed the next ones: the silence counts from then.
		{"reconnected after the renewal", last.Add(time.Second), true, last.Add(2100 * time.Millisecond), false},
		{"reconnected, a lease since", last.Add(time.Second), true, last.Add(3100 * time.Millisecond), true},
		{"never heard, within the lease of the submit", t0, false, created.Add(1900 * time.Millisecond), false},
		{"never heard, lease of the submit over", t0, false, created.Add(2100 * time.Millisecond), true},
		{"not listening now", time.Time{}, true, last.Add(time.Hour), false},
	} {
		if got := ownerLapsed(ttl, created, c.listenFrom, last, c.heard, c.now); got != c.want {
			t.Errorf("%s: lapsed %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLiveness_ListeningFollowsTheConnection(t *testing.T) {
	l := newLiveness()
	t0 := time.Unix(4_000_000, 0)
	l.setListening(t0)
	if got := l.listening(t0.Add(time.Second), true); !got.Equal(t0) {
		t.Fatalf("listening since %v, want %v", got, t0)
	}
	if got := l.listening(t0.Add(time.Second), false); !got.IsZero() {
		t.Fatalf("disconnected, listening since %v", got)
	}
	l.setListening(time.Time{}) // DISCONNECTED, and the CONNECTED event lost
	later := t0.Add(5 * time.Second)
	if got := l.listening(later, true); !got.Equal(later) {
		t.Fatalf("connected again: listening since %v, want %v", got, later)
	}
}
