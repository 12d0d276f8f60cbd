package samplescope

import (
	"context"
	"sync"
	"time"
)

type scopeKey struct{}

// Scope is one engine worker's cancel scope, lent to its samples one at a
// time. The zero value is not usable; use New.
type Scope struct {
	// fired is closed when the worker context's hook has run (stop).
	fired chan struct{}

	mu sync.Mutex
	// The current sample: its context's Done (nil between samples), its
	// deadline and its cancel.
	done     <-chan struct{}
	deadline time.Time
	cancel   context.CancelFunc
	claim    uint64 // the claiming run's token; 0: none
	abort    func() // the armed call's abort; nil: none
	armed    uint64 // the armed call's token
	seq      uint64 // the last token given out
	ended    bool   // the worker's context is done
}

// New returns ctx carrying a new Scope for a series of samples whose
// contexts derive from ctx, and stop, which unregisters the scope from
// ctx; if ctx had already ended, stop waits for the scope's hook to
// finish. The caller calls stop when it has run its last sample.
func New(ctx context.Context) (context.Context, *Scope, func()) {
	s := &Scope{fired: make(chan struct{})}
	unhook := context.AfterFunc(ctx, s.parentDone)
	stop := func() {
		if !unhook() {
			<-s.fired
		}
	}
	return context.WithValue(ctx, scopeKey{}, s), s, stop
}

// Of returns the Scope ctx carries, or nil. It does not check that ctx is
// the current sample's context: ClaimRun and Arm do.
func Of(ctx context.Context) *Scope {
	s, _ := ctx.Value(scopeKey{}).(*Scope)
	return s
}

// Begin makes ctx, a context derived from the scope's with cancel as its
// cancel func, the scope's current sample.
func (s *Scope) Begin(ctx context.Context, cancel context.CancelFunc) {
	done := ctx.Done()
	deadline, _ := ctx.Deadline()
	s.mu.Lock()
	s.done, s.deadline, s.cancel = done, deadline, cancel
	s.claim = 0
	s.mu.Unlock()
}

// End ends the current sample: it cancels the sample's context, and then
// aborts a call still armed (a stray goroutine's), which so sees its
// context done as it would have through context.AfterFunc.
func (s *Scope) End() {
	s.mu.Lock()
	cancel, abort := s.cancel, s.abort
	s.done, s.deadline, s.cancel, s.abort = nil, time.Time{}, nil, nil
	s.claim = 0
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if abort != nil {
		abort()
	}
}

// currentLocked reports whether done is the current sample's; s.mu is
// held.
func (s *Scope) currentLocked(done <-chan struct{}) bool {
	return done != nil && done == s.done
}

// ClaimRun lends the scope to one Runner run of the sample: it succeeds
// (a token other than 0) when ctx's Done is the current sample's and no
// other run holds it. The run then uses ctx as its own context;
// ReleaseRun with the token gives the scope back.
func (s *Scope) ClaimRun(ctx context.Context) (token uint64) {
	if s == nil {
		return 0
	}
	done := ctx.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.currentLocked(done) || s.claim != 0 {
		return 0
	}
	s.seq++
	s.claim = s.seq
	return s.claim
}

// ReleaseRun ends the claim ClaimRun gave token for, if it still holds.
func (s *Scope) ReleaseRun(token uint64) {
	s.mu.Lock()
	if s.claim == token {
		s.claim = 0
	}
	s.mu.Unlock()
}

// CancelSample cancels the sample's context for the run holding token
// (its consumer stopped iterating), and then aborts the armed call, as
// End does; a claim of an ended sample cancels nothing more.
func (s *Scope) CancelSample(token uint64) {
	s.mu.Lock()
	if token == 0 || s.claim != token {
		s.mu.Unlock()
		return
	}
	cancel, abort := s.cancel, s.abort
	s.abort = nil
	s.mu.Unlock()
	cancel()
	if abort != nil {
		abort()
	}
}

// Arm makes abort run when the current sample's context ends through the
// worker's context, once that context is done, or when the sample is
// ended or cancelled (End, CancelSample), after its context is. It
// succeeds (a token other than 0) when ctx's Done is the current
// sample's, that context is not done, the worker's context has not ended
// and no other call is armed. deadline is the sample's
// deadline (zero: none), which the caller enforces itself: when it
// passes, the sample's context is done or about to be. Disarm with the
// token undoes it.
func (s *Scope) Arm(ctx context.Context, abort func()) (token uint64, deadline time.Time) {
	if s == nil {
		return 0, time.Time{}
	}
	done := ctx.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.currentLocked(done) || s.ended || s.abort != nil {
		return 0, time.Time{}
	}
	select {
	case <-done:
		return 0, time.Time{} // context.AfterFunc runs the abort at once
	default:
	}
	s.seq++
	s.armed, s.abort = s.seq, abort
	return s.armed, s.deadline
}

// Disarm takes back the abort Arm gave token for. It reports whether the
// abort had not been taken to run (as context.AfterFunc's stop does):
// false once End or the worker's end took it, even if another call has
// been armed since.
func (s *Scope) Disarm(token uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.abort == nil || s.armed != token {
		return false
	}
	s.abort = nil
	return true
}

// parentDone runs (in its own goroutine, context.AfterFunc's) when the
// worker's context ends: the current sample's context, derived from it,
// ends too, and an armed call is aborted once it has.
func (s *Scope) parentDone() {
	defer close(s.fired)
	s.mu.Lock()
	s.ended = true
	done, abort := s.done, s.abort
	s.abort = nil
	s.mu.Unlock()
	if abort != nil {
		<-done
		abort()
	}
}
