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
// call. Read allocs/op: each is a fresh object a sample touches.
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
