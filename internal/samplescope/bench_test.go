package samplescope

import (
	"context"
	"testing"
	"time"
)

// BenchmarkSampleContexts is one sample's context work with one model
// call, on a worker's context: "nested" as before the scope (the sample's
// WithTimeout, the Runner's WithCancel, the call's context.AfterFunc and
// their ends), "scoped" with the worker's scope lent to the Runner and the
// call; "task-nested" and "task-scoped" the same for a fleet worker's task
// (below). Read allocs/op: each is a fresh object a sample touches.
func BenchmarkSampleContexts(b *testing.B) {
	abort := func() {}
	b.Run("nested", func(b *testing.B) {
		wctx, wcancel := context.WithCancel(context.Background())
		defer wcancel()
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(wctx, time.Minute)
			rctx, rcancel := context.WithCancel(ctx)
			stop := context.AfterFunc(rctx, abort)
			stop()
			rcancel()
			cancel()
		}
	})
	// A fleet worker's task: its context is made when the task is
	// accepted (a deadline on the worker's context) and ended after its
	// result; the sample nests under it ("task-nested", before run
	// slots), or runs in the runner's scope with the task's deadline
	// ("task-scoped", evalengine.SampleSlot).
	b.Run("task-nested", func(b *testing.B) {
		wctx, wcancel := context.WithCancel(context.Background())
		defer wcancel()
		b.ReportAllocs()
		for b.Loop() {
			tctx, tcancel := context.WithDeadline(wctx, time.Now().Add(time.Hour))
			ctx, cancel := context.WithTimeout(tctx, time.Minute)
			rctx, rcancel := context.WithCancel(ctx)
			stop := context.AfterFunc(rctx, abort)
			stop()
			rcancel()
			cancel()
			tcancel()
		}
	})
	b.Run("task-scoped", func(b *testing.B) {
		wctx, wcancel := context.WithCancel(context.Background())
		defer wcancel()
		slotCtx, slotCancel := context.WithCancel(wctx)
		defer slotCancel()
		sctx, s, stopScope := New(slotCtx)
		defer stopScope()
		b.ReportAllocs()
		for b.Loop() {
			tctx, tcancel := context.WithDeadline(wctx, time.Now().Add(time.Hour))
			end := time.Now().Add(time.Minute)
			if deadline, _ := tctx.Deadline(); deadline.Before(end) {
				end = deadline
			}
			ctx, cancel := context.WithDeadline(sctx, end)
			s.Begin(ctx, cancel)
			claim := Of(ctx).ClaimRun(ctx)
			token, _ := Of(ctx).Arm(ctx, abort)
			s.Disarm(token)
			s.ReleaseRun(claim)
			s.End()
			tcancel()
		}
	})
	b.Run("scoped", func(b *testing.B) {
		wctx, wcancel := context.WithCancel(context.Background())
		defer wcancel()
		sctx, s, stopScope := New(wctx)
		defer stopScope()
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(sctx, time.Minute)
			s.Begin(ctx, cancel)
			claim := Of(ctx).ClaimRun(ctx)
			token, _ := Of(ctx).Arm(ctx, abort)
			s.Disarm(token)
			s.ReleaseRun(claim)
			s.End()
		}
	})
}
