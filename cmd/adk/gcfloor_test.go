package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestFloorPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name                string
		live, scaled, floor uint64
		want                int
	}{
		{"small heap", 6 * mib, 8 * mib, 64 * mib, 725},
		{"nothing live yet: the heap minimum bounds it", 0, 1 * mib, 64 * mib, 1600},
		{"no scaled part", 0, 0, 64 * mib, 1600},
		{"half the floor live", 32 * mib, 33 * mib, 64 * mib, 100},
		{"past the floor", 80 * mib, 81 * mib, 64 * mib, 100},
		{"floor below the heap minimum", 0, 1 * mib, 2 * mib, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := floorPercent(tc.live, tc.scaled, tc.floor); got != tc.want {
				t.Fatalf("floorPercent(%d, %d, %d) = %d, want %d", tc.live, tc.scaled, tc.floor, got, tc.want)
			}
		})
	}
}

// TestHoldGCFloor checks the floor's lifetime: raised while held,
// applied again after each collection, and GOGC's default back once the
// last holder releases it.
func TestHoldGCFloor(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT set: the floor is the operator's")
	}
	gcPercent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }
	// Another test may have left the percentage changed: wait for
	// GOGC's default first.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.GC(); gcPercent() != 100; runtime.GC() {
		if time.Now().After(deadline) {
			t.Fatalf("GC percent %d 10 s after start, want the default 100", gcPercent())
		}
		time.Sleep(time.Millisecond)
	}
	release1 := holdGCFloor()
	release2 := holdGCFloor()
	if p := gcPercent(); p <= 100 {
		t.Fatalf("GC percent %d while the floor is held, want above 100", p)
	}
	// Each cycle's cleanup applies it again: set it back by hand, and
	// the next collections raise it again.
	debug.SetGCPercent(100)
	deadline = time.Now().Add(10 * time.Second)
	for runtime.GC(); gcPercent() <= 100; runtime.GC() {
		if time.Now().After(deadline) {
			t.Fatalf("GC percent %d 10 s after collections with the floor held, want above 100", gcPercent())
		}
		time.Sleep(time.Millisecond)
	}
	release1()
	release1() // a second call of one release does nothing
	if p := gcPercent(); p <= 100 {
		t.Fatalf("GC percent %d with one holder left, want above 100", p)
	}
	release2()
	if p := gcPercent(); p != 100 {
		t.Fatalf("GC percent %d after the last release, want 100", p)
	}
	// A cleanup armed before the release finds its generation gone.
	for range 20 {
		runtime.GC()
		time.Sleep(time.Millisecond)
		if p := gcPercent(); p != 100 {
			t.Fatalf("GC percent %d after a collection past the release, want 100", p)
		}
	}
}
