package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// evalGCFloor is about the heap a local `adk eval run` grows to before
// its first garbage collection; from that collection on, GOGC is what it
// was.
//
// Why: with GOGC=100 a run's heap goal starts at 4 MiB, so a 1,000-sample
// run collected three times while its heap was at most 16 MiB, the first
// during the ramp of its first 256 calls, each cycle scanning the stacks
// of hundreds of goroutines and slowing the others with assists and write
// barriers. Without those cycles the same run used ~15% less CPU and its
// peak RSS grew by ~3 MiB: it allocates ~20 MiB in all (bench/RESULTS.md,
// "GC floor"). A bigger run collects once at the floor (a few MiB more
// with 256 workers' stacks, which the runtime's goal scales too) and is
// then paced by GOGC as before, so the heap stays within max(about the
// floor, what GOGC allows).
const evalGCFloor = 32 << 20

var relaxEvalGCOnce sync.Once

// relaxEvalGC raises the GC percentage so that the next cycle's goal is
// evalGCFloor, and sets it back once that cycle has run. It leaves the GC
// alone when GOGC or GOMEMLIMIT is set (the operator's choice wins), when
// the heap's goal is already at or past the floor, and after the first
// call in a process (tests run many evals in one).
func relaxEvalGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	relaxEvalGCOnce.Do(func() { raiseGCFloor(evalGCFloor) })
}

// raiseGCFloor sets the GC percentage so that the next cycle's goal is
// about floor and has a cleanup set it back after that cycle. It reports
// whether it changed anything.
func raiseGCFloor(floor uint64) bool {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return false
	}
	cur := debug.SetGCPercent(100)
	pct, ok := gcFloorPercent(s[0].Value.Uint64(), s[1].Value.Uint64(), cur, floor)
	if !ok {
		debug.SetGCPercent(cur)
		return false
	}
	debug.SetGCPercent(pct)
	// The sentinel is garbage at once: the first cycle that runs from
	// here on finds it, and its cleanup puts the percentage back.
	runtime.AddCleanup(new(gcSentinel), func(pct int) { debug.SetGCPercent(pct) }, cur)
	return true
}

// gcSentinel holds a pointer so that it is not tiny-allocated alongside
// other objects that might keep its block alive.
type gcSentinel struct{ _ *byte }

// gcFloorPercent is the GC percentage that moves a heap goal of goal bytes
// (with live bytes marked live, at percentage cur) to floor. The runtime's
// goal is live + (live + stacks + globals) * percent / 100, so the part
// that scales with the percentage is goal - live at cur. ok is false when
// the goal is already at or past the floor, or when the figures do not
// fit that formula.
func gcFloorPercent(goal, live uint64, cur int, floor uint64) (int, bool) {
	if cur <= 0 || goal <= live || goal >= floor {
		return 0, false
	}
	scaled := (goal - live) * 100 / uint64(cur) // (live + stacks + globals)
	if scaled == 0 {
		return 0, false
	}
	pct := (floor - live) * 100 / scaled
	if pct <= uint64(cur) || pct > 1<<20 {
		return 0, false
	}
	return int(pct), true
}
