package httpx

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/internal/samplescope"
)

// sampleOf starts a sample of a worker's scope under parent, as the eval
// engine's run loop does; both end with the test.
func sampleOf(t *testing.T, parent context.Context, timeout time.Duration) (context.Context, *samplescope.Scope) {
	t.Helper()
	wctx, scope, stop := samplescope.New(parent)
	ctx, cancel := context.WithTimeout(wctx, timeout)
	scope.Begin(ctx, cancel)
	t.Cleanup(func() {
		scope.End()
		stop()
	})
	return ctx, scope
}

// stallServer answers nothing until the client closes the connection,
// which it reports on gone.
func stallServer(t *testing.T, started chan<- struct{}) (*leanServer, <-chan struct{}) {
	t.Helper()
	gone := make(chan struct{}, 4)
	s := newLeanServer(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
		if started != nil {
			started <- struct{}{}
		}
		select {
		case <-r.Context().Done():
			gone <- struct{}{}
		case <-time.After(30 * time.Second):
		}
	})
	return s, gone
}

func waitGone(t *testing.T, gone <-chan struct{}) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the aborted connection was not closed")
	}
}

func TestLean_SampleScope(t *testing.T) {
	t.Run("a sample's deadline ends the call as its context's end did", func(t *testing.T) {
		s, gone := stallServer(t, nil)
		c := leanClient(t, newPool(4, 8, time.Minute))
		ctx, scope := sampleOf(t, context.Background(), 100*time.Millisecond)
		// The deadline itself, not 100 ms from a later clock reading: under
		// load the call was seen to end 94.7 ms after such a reading, at
		// the deadline.
		deadline, _ := ctx.Deadline()
		_, me := call(c, ctx, s.URL, "{}")
		ended := time.Now()
		// Read at once: the call returns only once ctx says why.
		err := ctx.Err()
		if me == nil || me.Class != model.ClassTimeout || me.Retryable {
			t.Fatalf("err %v: want a timeout", me)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Fatalf("the call returned with its context %v (cause %v); want DeadlineExceeded", err, context.Cause(ctx))
		}
		if ended.Before(deadline) || ended.Sub(deadline) > 10*time.Second {
			t.Fatalf("the call ended %v after the sample's deadline: want at it", ended.Sub(deadline))
		}
		waitGone(t, gone)
		if s.requests.Load() != 1 || c.pool.idleCount() != 0 {
			t.Fatalf("requests %d, idle %d: want one, not retried, not pooled", s.requests.Load(), c.pool.idleCount())
		}
		if scope.Disarm(1) { // the first token of a fresh scope: the call's
			t.Fatal("the call left its abort armed on the scope")
		}
	})

	t.Run("a cancel from above ends the call cancelled, with its cause", func(t *testing.T) {
		started := make(chan struct{}, 1)
		s, gone := stallServer(t, started)
		c := leanClient(t, newPool(4, 8, time.Minute))
		cause := errors.New("job cancelled")
		parent, cancelParent := context.WithCancelCause(context.Background())
		defer cancelParent(nil)
		ctx, _ := sampleOf(t, parent, time.Minute)
		go func() {
			<-started
			cancelParent(cause)
		}()
		_, me := call(c, ctx, s.URL, "{}")
		err := ctx.Err()
		if me == nil || me.Class != model.ClassCancelled {
			t.Fatalf("err %v: want cancelled", me)
		}
		if !errors.Is(err, context.Canceled) || context.Cause(ctx) != cause {
			t.Fatalf("the call returned with its context %v (cause %v)", err, context.Cause(ctx))
		}
		waitGone(t, gone)
	})

	t.Run("an earlier attempt timeout is still the attempt's", func(t *testing.T) {
		s, gone := stallServer(t, nil)
		c := leanClient(t, newPool(4, 8, time.Minute))
		c.Timeout = 100 * time.Millisecond
		ctx, _ := sampleOf(t, context.Background(), time.Minute)
		if _, me := call(c, ctx, s.URL, "{}"); me == nil || me.Class != model.ClassTimeout {
			t.Fatalf("err %v: want the attempt's timeout", me)
		}
		if ctx.Err() != nil {
			t.Fatalf("the attempt's timeout ended the sample: %v", ctx.Err())
		}
		waitGone(t, gone)
	})

	t.Run("a call of a reused connection shares the scope and registers nothing", func(t *testing.T) {
		s := newLeanServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, `{"ok":true}`)
		})
		c := leanClient(t, newPool(4, 8, time.Minute))
		ctx, _ := sampleOf(t, context.Background(), time.Minute)
		for i := range 3 {
			if _, me := call(c, ctx, s.URL, "{}"); me != nil {
				t.Fatalf("call %d: %v", i, me)
			}
		}
		if s.opened.Load() != 1 || c.pool.idleCount() != 1 {
			t.Fatalf("opened %d, idle %d: want one connection reused", s.opened.Load(), c.pool.idleCount())
		}
	})
}

// TestLean_ArmUsesTheSampleScope checks what a call arms: on the scope of
// its sample's own context, no context registration at all (arm and disarm
// allocate nothing), and the sample's deadline when it comes first; on any
// other context, context.AfterFunc as before.
func TestLean_ArmUsesTheSampleScope(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	c := &conn{nc: client, aborted: make(chan struct{})}
	c.abortFn = c.abort
	defer c.close()
	ctx, _ := sampleOf(t, context.Background(), time.Minute)
	sampleDeadline, _ := ctx.Deadline()
	later := time.Now().Add(time.Hour)

	if end := c.arm(ctx, later); !end.Equal(sampleDeadline) || c.scope == nil || c.stopCtx != nil {
		t.Fatalf("arm on the sample's context: end %v (want %v), scope %v, context registration %v",
			end, sampleDeadline, c.scope != nil, c.stopCtx != nil)
	}
	if !c.disarm() {
		t.Fatal("disarm reports an abort")
	}
	if end := c.arm(ctx, time.Now().Add(time.Second)); !end.IsZero() || c.scope == nil {
		t.Fatalf("an earlier attempt deadline: end %v, want zero (the attempt's timer is the attempt's)", end)
	}
	c.disarm()
	if n := testing.AllocsPerRun(100, func() {
		c.arm(ctx, later)
		c.disarm()
	}); n != 0 {
		t.Fatalf("arm and disarm on the sample's scope allocate %v times; want 0", n)
	}

	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	for name, other := range map[string]context.Context{"a derived context": derived, "no scope": context.Background()} {
		if end := c.arm(other, later); !end.IsZero() || c.scope != nil || c.stopCtx == nil {
			t.Fatalf("%s: end %v, scope %v, context registration %v; want context.AfterFunc", name, end, c.scope != nil, c.stopCtx != nil)
		}
		if !c.disarm() {
			t.Fatalf("%s: disarm reports an abort", name)
		}
	}
}
