package samplescope

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// newWorker is a worker's context with its scope, stopped with the test.
func newWorker(t *testing.T, parent context.Context) (context.Context, *Scope) {
	t.Helper()
	ctx, s, stop := New(parent)
	t.Cleanup(stop)
	if Of(ctx) != s {
		t.Fatal("Of does not find the scope New put in ctx")
	}
	return ctx, s
}

// begin starts a sample of s under wctx, as the engine does.
func begin(s *Scope, wctx context.Context, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(wctx, timeout)
	s.Begin(ctx, cancel)
	return ctx
}

func TestScope_OnlyTheCurrentSampleContextUsesIt(t *testing.T) {
	wctx, s := newWorker(t, context.Background())
	ctx := begin(s, wctx, time.Minute)
	noop := func() {}

	t.Run("one run claims it at a time", func(t *testing.T) {
		claim := s.ClaimRun(ctx)
		if claim == 0 {
			t.Fatal("the sample's context cannot claim its scope")
		}
		if s.ClaimRun(ctx) != 0 {
			t.Fatal("a second run (a nested Runner) claimed a claimed scope")
		}
		s.ReleaseRun(claim)
		again := s.ClaimRun(ctx)
		if again == 0 {
			t.Fatal("a released scope cannot be claimed again")
		}
		s.ReleaseRun(claim) // a stale token releases nothing
		if s.ClaimRun(ctx) != 0 {
			t.Fatal("a stale token released the current claim")
		}
		s.ReleaseRun(again)
	})
	t.Run("one call is armed at a time, with the sample's deadline", func(t *testing.T) {
		token, deadline := s.Arm(ctx, noop)
		if want, _ := ctx.Deadline(); token == 0 || !deadline.Equal(want) {
			t.Fatalf("Arm = %v, %v; want the sample's deadline %v", token, deadline, want)
		}
		if tok, _ := s.Arm(ctx, noop); tok != 0 {
			t.Fatal("a second call was armed beside the first")
		}
		if !s.Disarm(token) {
			t.Fatal("Disarm of an abort that never ran reports it ran")
		}
		if s.Disarm(token) {
			t.Fatal("a second Disarm reports an abort to take back")
		}
	})
	t.Run("contexts other than the sample's do not use it", func(t *testing.T) {
		derived, cancel := context.WithCancel(ctx)
		defer cancel()
		timed, cancelTimed := context.WithTimeout(ctx, time.Second)
		defer cancelTimed()
		others := map[string]context.Context{
			"a child with its own cancel":  derived,
			"a child with its own timeout": timed,
			"a child without cancel":       context.WithoutCancel(ctx),
			"the worker's context":         wctx,
		}
		for name, c := range others {
			if Of(c) != s {
				t.Fatalf("%s: Of lost the scope", name)
			}
			if s.ClaimRun(c) != 0 {
				t.Fatalf("%s claimed the sample's scope", name)
			}
			if tok, _ := s.Arm(c, noop); tok != 0 {
				t.Fatalf("%s armed a call on the sample's scope", name)
			}
		}
		type key struct{}
		claim := s.ClaimRun(context.WithValue(ctx, key{}, 1))
		if claim == 0 {
			t.Fatal("a value child of the sample's context (same Done) cannot claim")
		}
		s.ReleaseRun(claim)
		var none *Scope
		if Of(context.Background()) != nil || none.ClaimRun(ctx) != 0 {
			t.Fatal("a context without a scope has one")
		}
		if tok, _ := none.Arm(ctx, noop); tok != 0 {
			t.Fatal("a nil scope armed a call")
		}
	})
	t.Run("a previous sample's context does not use the next sample's scope", func(t *testing.T) {
		s.End()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("End left the sample's context %v", ctx.Err())
		}
		if s.ClaimRun(ctx) != 0 {
			t.Fatal("an ended sample's context claimed the scope")
		}
		next := begin(s, wctx, time.Minute)
		defer s.End()
		if tok, _ := s.Arm(ctx, noop); tok != 0 {
			t.Fatal("the previous sample's context armed a call on the next sample")
		}
		if s.ClaimRun(next) == 0 {
			t.Fatal("the next sample cannot claim its scope")
		}
	})
}

func TestScope_ATimeoutIsTheSampleContextsOwn(t *testing.T) {
	wctx, s := newWorker(t, context.Background())
	ctx := begin(s, wctx, 20*time.Millisecond)
	defer s.End()
	token, deadline := s.Arm(ctx, func() { t.Error("the scope aborted a call at the deadline: that is the caller's timer") })
	if token == 0 || deadline.IsZero() {
		t.Fatalf("Arm = %v, %v", token, deadline)
	}
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("Err %v, Cause %v; want DeadlineExceeded", ctx.Err(), context.Cause(ctx))
	}
	if time.Now().Before(deadline) {
		t.Fatal("the sample's context ended before the deadline Arm reported")
	}
	if !s.Disarm(token) {
		t.Fatal("the abort was taken to run at the deadline")
	}
}

func TestScope_TheWorkersEndAbortsTheArmedCallOnceTheSampleIsDone(t *testing.T) {
	cause := errors.New("owner gone")
	parent, cancelParent := context.WithCancelCause(context.Background())
	defer cancelParent(nil)
	wctx, s := newWorker(t, parent)
	ctx := begin(s, wctx, time.Minute)
	defer s.End()
	type seen struct{ err, cause error }
	aborted := make(chan seen, 1)
	token, _ := s.Arm(ctx, func() { aborted <- seen{ctx.Err(), context.Cause(ctx)} })
	if token == 0 {
		t.Fatal("Arm failed")
	}
	cancelParent(cause)
	got := <-aborted
	if !errors.Is(got.err, context.Canceled) || got.cause != cause {
		t.Fatalf("the abort ran with Err %v, Cause %v; want Canceled and the owner's cause", got.err, got.cause)
	}
	if s.Disarm(token) {
		t.Fatal("Disarm reports an abort that ran as taken back")
	}
	if tok, _ := s.Arm(ctx, func() {}); tok != 0 {
		t.Fatal("a call was armed after the worker's context ended")
	}
	claim := s.ClaimRun(ctx)
	if claim == 0 {
		t.Fatal("a Runner cannot claim an ended sample (it fails on its own)")
	}
	s.ReleaseRun(claim)
}

func TestScope_EndCancelsThenAbortsAStrayCall(t *testing.T) {
	wctx, s := newWorker(t, context.Background())
	ctx := begin(s, wctx, time.Minute)
	var got error
	token, _ := s.Arm(ctx, func() { got = ctx.Err() })
	if token == 0 {
		t.Fatal("Arm failed")
	}
	s.End()
	if !errors.Is(got, context.Canceled) {
		t.Fatalf("the stray call was aborted with its context %v; want it cancelled first", got)
	}
	next := begin(s, wctx, time.Minute)
	defer s.End()
	nextToken, _ := s.Arm(next, func() {})
	if nextToken == 0 {
		t.Fatal("the next sample's call cannot arm")
	}
	if s.Disarm(token) {
		t.Fatal("the stray call's Disarm took back the next sample's abort")
	}
	if !s.Disarm(nextToken) {
		t.Fatal("the next sample's call lost its abort to the stray call")
	}
}

func TestScope_CancelSampleCancelsOnlyTheClaimedSample(t *testing.T) {
	wctx, s := newWorker(t, context.Background())
	ctx := begin(s, wctx, time.Minute)
	claim := s.ClaimRun(ctx)
	if claim == 0 {
		t.Fatal("claim failed")
	}
	var abortSaw error
	token, _ := s.Arm(ctx, func() { abortSaw = ctx.Err() })
	s.CancelSample(claim)
	s.ReleaseRun(claim)
	if !errors.Is(ctx.Err(), context.Canceled) || wctx.Err() != nil {
		t.Fatalf("sample %v, worker %v; want only the sample cancelled", ctx.Err(), wctx.Err())
	}
	if !errors.Is(abortSaw, context.Canceled) || s.Disarm(token) {
		t.Fatalf("the armed call was aborted with its context %v; want aborted after the cancel", abortSaw)
	}
	if tok, _ := s.Arm(ctx, func() {}); tok != 0 {
		t.Fatal("a call armed on a cancelled sample: nothing would abort it")
	}
	s.CancelSample(0) // no claim: nothing
	s.End()
	next := begin(s, wctx, time.Minute)
	defer s.End()
	if next.Err() != nil {
		t.Fatalf("the next sample starts %v", next.Err())
	}
	nextClaim := s.ClaimRun(next)
	s.CancelSample(claim) // a stray run of the first sample
	if next.Err() != nil {
		t.Fatalf("a previous sample's run cancelled the next sample: %v", next.Err())
	}
	s.ReleaseRun(nextClaim)
}

func TestScope_StopUnhooksTheScope(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.Background())
	_, s, stop := New(parent)
	stop()
	cancelParent()
	select {
	case <-s.fired:
		t.Fatal("a stopped scope's hook ran at its parent's end")
	case <-time.After(50 * time.Millisecond):
	}
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	if ended {
		t.Fatal("a stopped scope saw its parent's end")
	}
}

func TestScope_StopWaitsForTheHook(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.Background())
	_, s, stop := New(parent)
	cancelParent()
	stop()
	select {
	case <-s.fired:
	default:
		t.Fatal("stop returned before the hook it could not unregister had run")
	}
}

// TestScope_ConcurrentUseIsSafe runs samples on several workers while stray
// goroutines arm calls with whatever sample context they last saw and the
// run is cancelled midway; under -race it checks the scope's locking, and
// that every abort runs at most once and only after its context is done.
func TestScope_ConcurrentUseIsSafe(t *testing.T) {
	run, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	var wg sync.WaitGroup
	var early atomic.Int32
	for range 4 {
		wctx, s := newWorker(t, run)
		var last atomic.Pointer[context.Context]
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 300 {
				if i == 150 && s == Of(wctx) {
					cancelRun()
				}
				ctx := begin(s, wctx, time.Minute)
				last.Store(&ctx)
				if claim := s.ClaimRun(ctx); claim != 0 {
					s.ReleaseRun(claim)
				}
				if tok, _ := s.Arm(ctx, func() {
					if ctx.Err() == nil {
						early.Add(1)
					}
				}); tok != 0 {
					s.Disarm(tok)
				}
				s.End()
			}
		}()
		go func() {
			defer wg.Done()
			for range 300 {
				p := last.Load()
				if p == nil {
					continue
				}
				ctx := *p
				var once atomic.Int32
				if tok, _ := s.Arm(ctx, func() {
					if once.Add(1) > 1 || ctx.Err() == nil {
						early.Add(1)
					}
				}); tok != 0 {
					s.Disarm(tok)
				}
			}
		}()
	}
	wg.Wait()
	if n := early.Load(); n != 0 {
		t.Fatalf("%d aborts ran twice or before their context was done", n)
	}
}
