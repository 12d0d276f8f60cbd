package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// gcFloor is the least heap goal of `adk worker` and of a local `adk
// eval run`: while what is live is small, the collector runs when the
// heap reaches about this much, not at twice what is live; above it, GOGC
// paces it as before.
//
// Why: both allocate fast while little stays live. A worker's live heap
// is small (6-7 MiB at 64 slots: its runners' and connections' buffers,
// the job specs) and it allocates ~55 KiB per task (the agent's session
// and events, the model call, the tracer's records, the result), so with
// GOGC=100 it collected every ~130 tasks, 4-5 times in each 2-second
// fleetbench job. A local eval run allocates ~24 KiB per sample and keeps
// ~4 KiB (the sample's result and its encoding): a 5,000-sample run
// collected 5 times (at 32 MiB once, then at 28-44 MiB goals, 28-86 ms
// of CPU each), and with the floor twice. Each cycle
// scans every goroutine's stack (256 workers and their connections'),
// makes allocating samples assist, and shrinks the runners' stacks,
// which the next sample grows and copies again (bench/RESULTS.md, "worker
// GC floor", and session 15's "GC floor for eval run").
//
// Bounded: the heap stays within about max(gcFloor, what GOGC=100
// allows), in the range evalheap.Ready backs with huge pages, so the
// floor's first touches cost a page fault per 2 MiB. A plain memory limit
// with GOGC=off would give the same floor, but a process whose live heap
// grew past it (a large job's specs and results, a 10,000-sample
// document) would then collect without end; the floor gives way instead.
const gcFloor = 64 << 20

// gcFloorHolders keeps the GC floor: armed by the first holdGCFloor of a
// process and given up by its last release (tests run several workers and
// evals in one process).
var gcFloorHolders struct {
	mu    sync.Mutex
	users int
	gen   int // bumped at each arm and disarm: an older cycle's cleanup does nothing
}

// holdGCFloor keeps the heap goal at gcFloor or more until
// release is called, re-applying it after every collection (the goal is
// live + (live + stacks + globals) × GOGC/100, so the percentage that
// keeps it at the floor changes with what each cycle found live). It
// leaves the GC alone when GOGC or GOMEMLIMIT is set: the operator's
// choice wins.
func holdGCFloor() (release func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	gcFloorHolders.mu.Lock()
	gcFloorHolders.users++
	if gcFloorHolders.users == 1 {
		gcFloorHolders.gen++
		applyGCFloor(gcFloorHolders.gen)
	}
	gcFloorHolders.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			gcFloorHolders.mu.Lock()
			defer gcFloorHolders.mu.Unlock()
			if gcFloorHolders.users--; gcFloorHolders.users == 0 {
				gcFloorHolders.gen++
				debug.SetGCPercent(100)
			}
		})
	}
}

// gcSentinel holds a pointer so that it is not tiny-allocated alongside
// other objects that might keep its block alive.
type gcSentinel struct{ _ *byte }

// applyGCFloor sets the percentage for the next cycle and leaves a
// sentinel whose cleanup, run after that cycle, applies it again with
// what the cycle found live. Called with gcFloorHolders.mu held.
func applyGCFloor(gen int) {
	debug.SetGCPercent(gcFloorPercent(gcFloor))
	runtime.AddCleanup(new(gcSentinel), func(gen int) {
		gcFloorHolders.mu.Lock()
		defer gcFloorHolders.mu.Unlock()
		if gcFloorHolders.gen == gen {
			applyGCFloor(gen)
		}
	}, gen)
}

// gcFloorPercent is the GC percentage whose goal, with what the last
// cycle marked live, is floor, and at least GOGC's default of 100.
func gcFloorPercent(floor uint64) int {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			return 100
		}
	}
	return floorPercent(s[0].Value.Uint64(), s[0].Value.Uint64()+s[1].Value.Uint64()+s[2].Value.Uint64(), floor)
}

// runtimeHeapMinimum is the runtime's least heap goal at GOGC=100; it
// scales with the percentage (4 MiB × GOGC/100), so a percentage above
// floor/runtimeHeapMinimum × 100 would put the goal past the floor even
// with nothing live.
const runtimeHeapMinimum = 4 << 20

// floorPercent is the GC percentage that puts a goal of live + scaled ×
// percent/100 at floor: at least 100 (GOGC's default, once live has grown
// past about half the floor) and at most the percentage whose heap
// minimum is the floor.
func floorPercent(live, scaled, floor uint64) int {
	top := max(100, floor*100/runtimeHeapMinimum)
	if scaled == 0 {
		return int(top)
	}
	if live >= floor {
		return 100
	}
	pct := (floor - live) * 100 / scaled
	return int(max(100, min(pct, top)))
}
