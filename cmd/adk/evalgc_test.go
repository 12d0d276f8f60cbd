package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCFloorPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name              string
		goal, live, floor uint64
		cur               int
		want              int
		ok                bool
	}{
		{"start-up heap", 4 * mib, 0, 32 * mib, 100, 800, true},
		{"live and stacks", 6 * mib, 2 * mib, 32 * mib, 100, 750, true},
		{"at the floor", 32 * mib, 16 * mib, 32 * mib, 100, 0, false},
		{"past the floor", 40 * mib, 20 * mib, 32 * mib, 100, 0, false},
		{"gc off", 4 * mib, 0, 32 * mib, -1, 0, false},
		{"no scaled part", 4 * mib, 4 * mib, 32 * mib, 100, 0, false},
		{"other percent", 3 * mib, 1 * mib, 33 * mib, 50, 800, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := gcFloorPercent(tc.goal, tc.live, tc.cur, tc.floor)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("gcFloorPercent(%d, %d, %d, %d) = %d, %v; want %d, %v", tc.goal, tc.live, tc.cur, tc.floor, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestRaiseGCFloor_SetsPercentBackAfterOneCycle checks the floor's
// lifetime: raised until the next collection, then GOGC as it was.
func TestRaiseGCFloor_SetsPercentBackAfterOneCycle(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC set: the floor is the operator's")
	}
	gcPercent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }
	// An in-process eval that ran earlier in this test binary raised the
	// floor too, and its cleanup may still be pending (cleanups run after
	// the cycle, on their own goroutine): wait for GOGC's default back,
	// or that cleanup would reset the percentage under this test.
	const before = 100
	deadline := time.Now().Add(10 * time.Second)
	for runtime.GC(); gcPercent() != before; runtime.GC() {
		if time.Now().After(deadline) {
			t.Fatalf("GC percent %d 10 s after start, want the default %d", gcPercent(), before)
		}
		time.Sleep(time.Millisecond)
	}
	runtime.GC() // a small heap goal to raise
	if !raiseGCFloor(1 << 30) {
		t.Fatal("raiseGCFloor(1 GiB) changed nothing")
	}
	if p := gcPercent(); p <= before {
		t.Fatalf("GC percent %d after raising the floor, want above %d", p, before)
	}
	deadline = time.Now().Add(10 * time.Second)
	for gcPercent() != before {
		if time.Now().After(deadline) {
			t.Fatalf("GC percent %d 10 s after a collection, want %d back", gcPercent(), before)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}
