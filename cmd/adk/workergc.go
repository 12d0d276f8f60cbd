package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// workerGCFloor is the least heap goal of `adk worker`: while what is
// live is small, the collector runs when the heap reaches about this
// much, not at twice what is live; above it, GOGC paces it as before.
//
// Why: a worker's live heap is small (6-7 MiB at 64 slots: its runners'
// and connections' buffers, the job specs) and it allocates ~55 KiB per
// task (the agent's session and events, the model call, the tracer's
// records, the result), so with GOGC=100 it collected every ~130 tasks,
// 4-5 times in each 2-second fleetbench job. Each cycle scans every
// goroutine's stack, makes allocating samples assist, and shrinks the
// runners' stacks, which the next sample grows and copies again. With the
// floor a worker collects about once per thousand tasks (bench/RESULTS.md,
// "worker GC floor").
//
// Bounded: the heap stays within about max(workerGCFloor, what GOGC=100
// allows). A plain memory limit with GOGC=off would give the same floor,
// but a worker whose live heap grew past it (a large job's specs and
// results) would then collect without end; the floor gives way instead.
const workerGCFloor = 64 << 20

// workerGC keeps the worker's GC floor: armed by the first holdWorkerGCFloor
// of a process and given up by its last release (tests run several workers
// in one process).
var workerGC struct {
	mu    sync.Mutex
	users int
	gen   int // bumped at each arm and disarm: an older cycle's cleanup does nothing
}

// holdWorkerGCFloor keeps the heap goal at workerGCFloor or more until
// release is called, re-applying it after every collection (the goal is
// live + (live + stacks + globals) × GOGC/100, so the percentage that
// keeps it at the floor changes with what each cycle found live). It
// leaves the GC alone when GOGC or GOMEMLIMIT is set: the operator's
// choice wins.
func holdWorkerGCFloor() (release func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	workerGC.mu.Lock()
	workerGC.users++
	if workerGC.users == 1 {
		workerGC.gen++
		applyWorkerGCFloor(workerGC.gen)
	}
	workerGC.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			workerGC.mu.Lock()
			defer workerGC.mu.Unlock()
			if workerGC.users--; workerGC.users == 0 {
				workerGC.gen++
				debug.SetGCPercent(100)
			}
		})
	}
}

// applyWorkerGCFloor sets the percentage for the next cycle and leaves a
// sentinel whose cleanup, run after that cycle, applies it again with
// what the cycle found live. Called with workerGC.mu held.
func applyWorkerGCFloor(gen int) {
	debug.SetGCPercent(workerGCPercent(workerGCFloor))
	runtime.AddCleanup(new(gcSentinel), func(gen int) {
		workerGC.mu.Lock()
		defer workerGC.mu.Unlock()
		if workerGC.gen == gen {
			applyWorkerGCFloor(gen)
		}
	}, gen)
}

// workerGCPercent is the GC percentage whose goal, with what the last
// cycle marked live, is floor, and at least GOGC's default of 100.
func workerGCPercent(floor uint64) int {
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
