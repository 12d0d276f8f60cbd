package agent

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fadcedab/adk/agent/session"
)

// TestInMemorySessionService_ManySessions: the first session (held
// inline) and later ones (in the map) are created, read, appended to and
// deleted alike, and a session created again after its delete starts
// empty without touching a copy read before.
func TestInMemorySessionService_ManySessions(t *testing.T) {
	for _, zero := range []bool{false, true} {
		t.Run(fmt.Sprintf("zero=%v", zero), func(t *testing.T) {
			s := NewInMemorySessionService()
			if zero {
				s = &InMemorySessionService{}
			}
			ids := []string{"a", "b", "c"}
			for _, id := range ids {
				if _, err := s.Create("app", "u", id); err != nil {
					t.Fatalf("create %s: %v", id, err)
				}
			}
			for i, id := range ids {
				for range i + 1 {
					if err := s.Append(id, &session.Event{ID: id, Actions: session.Actions{StateDelta: map[string]any{id: i}}}); err != nil {
						t.Fatalf("append %s: %v", id, err)
					}
				}
			}
			for i, id := range ids {
				got, err := s.Get(id)
				if err != nil {
					t.Fatalf("get %s: %v", id, err)
				}
				if len(got.Events) != i+1 || got.State[id] != i || got.ID != id || s.eventCount(id) != i+1 {
					t.Fatalf("session %s: %d events, state %v, %d counted; want %d and %s=%d", id, len(got.Events), got.State, s.eventCount(id), i+1, id, i)
				}
				n := 0
				s.withEvents(id, -1, func(evs []session.Event) { n = len(evs) })
				if n != i+1 {
					t.Fatalf("withEvents %s: %d events, want %d", id, n, i+1)
				}
			}
			if _, err := s.Create("app", "other", "a"); err == nil {
				t.Fatal("the first session was taken by another user")
			}
			if _, err := s.Create("app", "other", "c"); err == nil {
				t.Fatal("a later session was taken by another user")
			}
			kept, _ := s.Get("a")
			for _, id := range []string{"a", "b"} {
				s.Delete(id)
				if _, err := s.Get(id); !errors.Is(err, ErrSessionNotFound) {
					t.Fatalf("get %s after delete: %v, want %v", id, err, ErrSessionNotFound)
				}
				if err := s.Append(id, &session.Event{}); !errors.Is(err, ErrSessionNotFound) {
					t.Fatalf("append %s after delete: %v", id, err)
				}
				if s.eventCount(id) != 0 {
					t.Fatalf("deleted %s still counts events", id)
				}
			}
			if got, _ := s.Get("c"); len(got.Events) != 3 {
				t.Fatalf("c has %d events after the others' delete, want 3", len(got.Events))
			}
			for _, id := range []string{"a", "d", "b"} {
				got, err := s.Create("app", "other", id)
				if err != nil || len(got.Events) != 0 || got.UserID != "other" {
					t.Fatalf("create %s again: %+v, %v", id, got, err)
				}
				if err := s.Append(id, &session.Event{ID: "new-" + id}); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{"a", "b", "d"} {
				if got, _ := s.Get(id); len(got.Events) != 1 || got.Events[0].ID != "new-"+id {
					t.Fatalf("session %s: %+v", id, got.Events)
				}
			}
			if len(kept.Events) != 1 || kept.Events[0].ID != "a" {
				t.Fatalf("a copy read before the delete changed: %+v", kept.Events)
			}
		})
	}
}

// TestInMemorySessionService_Concurrent: sessions made, appended to and
// read from many goroutines (run it under -race).
func TestInMemorySessionService_Concurrent(t *testing.T) {
	s := NewInMemorySessionService()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			id := fmt.Sprint("s", g)
			if _, err := s.Create("app", "u", id); err != nil {
				t.Error(err)
				return
			}
			for range 50 {
				if err := s.Append(id, &session.Event{}); err != nil {
					t.Error(err)
				}
				_, _ = s.Get(fmt.Sprint("s", (g+1)%8))
			}
			if n := s.eventCount(id); n != 50 {
				t.Errorf("%s: %d events, want 50", id, n)
			}
		})
	}
	wg.Wait()
}

// TestInMemorySessionService_OneSessionOneAllocation: an eval sample's
// service with its one session and the turn's two events is one
// allocation (a map for one session was three more).
func TestInMemorySessionService_OneSessionOneAllocation(t *testing.T) {
	ev := &session.Event{ID: "e"}
	allocs := testing.AllocsPerRun(100, func() {
		s := NewInMemorySessionService()
		if err := s.ensure("app", "u", "sample"); err != nil {
			t.Fatal(err)
		}
		_ = s.Append("sample", ev)
		_ = s.Append("sample", ev)
	})
	if allocs > 1 {
		t.Fatalf("%v allocations, want 1", allocs)
	}
}
