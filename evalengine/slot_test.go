package evalengine_test

import (
	"context"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/samplescope"
)

// probeAdapter's turns report what the sample's context lends: whether a
// Runner given it could claim its scope (samplescope), and its deadline.
// inner, when set, runs within the turn (a nested sample).
type probeAdapter struct {
	claimed  []bool
	deadline time.Time
	inner    func(ctx context.Context)
}

func (a *probeAdapter) NewSession(context.Context, evalengine.SampleInfo) (evalengine.Session, error) {
	return probeSession{a}, nil
}

type probeSession struct{ a *probeAdapter }

func (s probeSession) Turn(ctx context.Context, in evalengine.TurnInput) (evalengine.TurnOutput, error) {
	scope := samplescope.Of(ctx)
	claim := scope.ClaimRun(ctx)
	if claim != 0 {
		defer scope.ReleaseRun(claim)
	}
	s.a.claimed = append(s.a.claimed, claim != 0)
	s.a.deadline, _ = ctx.Deadline()
	if s.a.inner != nil {
		s.a.inner(ctx)
	}
	return evalengine.TurnOutput{Output: in.Input}, nil
}

func (probeSession) Close() error { return nil }

type probeKey struct{}

// TestSampleRunner_RunInSlotLendsItsScope checks which samples a slot's
// scope is lent to: one whose parent is the slot's context, values aside;
// not one under a context with a cancel of its own, nor one run while
// another runs in the slot, nor a sample run by Run; and that the
// sample's deadline is the earlier of the one given and the case
// timeout's.
func TestSampleRunner_RunInSlotLendsItsScope(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","input":"q","expected":"q"}]}`)
	o := opts(func(o *evalengine.Options) { o.CaseTimeoutMS = 60_000 })
	r, err := evalengine.NewSampleRunner(set, evalengine.DefaultCriteria(), o)
	if err != nil {
		t.Fatal(err)
	}
	slot := evalengine.NewSampleSlot(context.Background())
	defer slot.Close()
	derived, cancel := context.WithCancel(slot.Context())
	defer cancel()
	other := evalengine.NewSampleSlot(context.Background())
	defer other.Close()
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		deadline time.Time
		lent     bool
	}{
		{"the slot's context", slot.Context(), time.Time{}, true},
		{"with a value", context.WithValue(slot.Context(), probeKey{}, 1), later, true},
		{"with a cancel of its own", derived, time.Time{}, false},
		{"another slot's context", other.Context(), time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &probeAdapter{}
			before := time.Now()
			s, err := r.RunInSlot(tc.ctx, slot, tc.deadline, a, nil, 0, 0)
			if err != nil || !s.Passed {
				t.Fatalf("sample %+v, %v", s, err)
			}
			if len(a.claimed) != 1 || a.claimed[0] != tc.lent {
				t.Fatalf("scope claimed %v, want [%v]", a.claimed, tc.lent)
			}
			want := before.Add(time.Minute) // the case timeout's, before a later deadline
			if !tc.deadline.IsZero() && tc.deadline.Before(want) {
				want = tc.deadline
			}
			if d := a.deadline.Sub(want); d < 0 || d > 5*time.Second {
				t.Fatalf("deadline %v, want about %v", a.deadline, want)
			}
		})
	}
	t.Run("an earlier deadline", func(t *testing.T) {
		a := &probeAdapter{}
		at := time.Now().Add(10 * time.Second).Truncate(time.Millisecond)
		if _, err := r.RunInSlot(slot.Context(), slot, at, a, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
		if !a.deadline.Equal(at) {
			t.Fatalf("deadline %v, want %v", a.deadline, at)
		}
	})
	t.Run("nested in a sample of the slot", func(t *testing.T) {
		in := &probeAdapter{}
		a := &probeAdapter{inner: func(context.Context) {
			if _, err := r.RunInSlot(slot.Context(), slot, time.Time{}, in, nil, 0, 0); err != nil {
				t.Error(err)
			}
		}}
		if _, err := r.RunInSlot(slot.Context(), slot, time.Time{}, a, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
		if len(a.claimed) != 1 || !a.claimed[0] || len(in.claimed) != 1 || in.claimed[0] {
			t.Fatalf("outer claimed %v, inner %v: want [true], [false]", a.claimed, in.claimed)
		}
	})
	t.Run("Run lends none", func(t *testing.T) {
		a := &probeAdapter{}
		if _, err := r.Run(slot.Context(), a, 0, 0); err != nil {
			t.Fatal(err)
		}
		if len(a.claimed) != 1 || a.claimed[0] {
			t.Fatalf("scope claimed %v, want [false]", a.claimed)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		s := evalengine.NewSampleSlot(context.Background())
		defer s.Close()
		a := &probeAdapter{inner: func(context.Context) { s.Cancel() }}
		res, err := r.RunInSlot(s.Context(), s, time.Time{}, a, nil, 0, 0)
		if err != nil || res.Error != evalengine.TagCancelled {
			t.Fatalf("error %q (%v), want %q", res.Error, err, evalengine.TagCancelled)
		}
		res, err = r.RunInSlot(s.Context(), s, time.Time{}, &probeAdapter{}, nil, 0, 0)
		if err != nil || res.Error != evalengine.TagCancelled {
			t.Fatalf("after the cancel: error %q (%v), want %q", res.Error, err, evalengine.TagCancelled)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		a := &probeAdapter{inner: func(ctx context.Context) { <-ctx.Done() }}
		res, err := r.RunInSlot(slot.Context(), slot, time.Now().Add(20*time.Millisecond), a, nil, 0, 0)
		if err != nil || res.Error != evalengine.TagTimeout {
			t.Fatalf("error %q (%v), want %q", res.Error, err, evalengine.TagTimeout)
		}
		if slot.Context().Err() != nil {
			t.Fatal("a sample's timeout ended its slot")
		}
	})
}
