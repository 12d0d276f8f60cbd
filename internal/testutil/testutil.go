// Package testutil holds the helpers every package's tests share: the goleak
// options for TestMain and condition polling with deadlines.
//
// It must not import any adk package outside internal.
package testutil

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// LeakOptions are the goleak options every package's TestMain uses. The
// ignore list may only name goroutines owned by third-party code that outlive
// a test by design (process-wide singletons), each with the reason; never our
// own.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		// Badger's process-wide ristretto/z memory-stats goroutine, started once
		// on first Open and never stopped.
		goleak.IgnoreAnyFunction("github.com/dgraph-io/ristretto/v2/z.(*AllocatorPool).freeupAllocators"),
		// fasthttp's process-wide Date refresher, started by the first server
		// and never stopped.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	}
}

// VerifyTestMain runs the package's tests and fails if goroutines leak;
// afterwards it removes the binaries Binary built.
func VerifyTestMain(m *testing.M) {
	goleak.VerifyTestMain(cleanupM{m}, LeakOptions()...)
}

// WaitFor polls cond until it returns true or the timeout passes, then fails
// the test with msg. It is how tests in this module wait for asynchronous
// state: never a bare sleep.
func WaitFor(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, msg)
		}
		time.Sleep(wait)
		if wait < 50*time.Millisecond {
			wait *= 2
		}
	}
}
