// Package evalheap prepares the Go heap of a local `adk eval run` for
// transparent huge pages, so that the run's first touches of fresh memory
// cost one page fault per 2 MiB instead of one per 4 KiB. `adk worker`
// calls Ready too: the range covers its GC floor (cmd/adk/gcfloor.go).
//
// The preparation (a block the size of a run's heap, advised and freed by
// a GC cycle; the heap below it collapsed into huge pages) runs in the
// package's init when the process's arguments are `eval run`, before the
// rest of the binary's packages initialise, so that their allocations and
// the run's land in the freed, advised range; Ready then has nothing left
// to do. The collector is off (through the runtime's
// runtime/debug.setGCPercent, by linkname) from the block's allocation to
// the end of the one cycle that frees it: its allocation had started a
// cycle of its own that saw it live (session 24). The init runs the GC cycle itself,
// whatever the CPU count: it takes ~1 ms (gctrace: the heap is small but
// for the block). In a goroutine beside the later inits (two CPUs did so
// until session 20) the cycles, two then, overlapped those inits, which
// then allocated above the still-live block, outside the advised range, a
// 4 KiB fault at a time, and the second cycle's end flushed the spans they
// had cached into fresh span-set blocks: ~230 more faults a run. With one
// CPU the goroutine ran only once main blocked on Ready, after every later
// init. Without that early start (another argument order, tests) Ready
// prepares the heap itself. The same init turns off heap profile sampling
// for a run that writes no heap profile.
//
// The linker runs a package's init once every package it imports, even
// one with no init, has been scheduled, and schedules the ready packages
// in the order of their import paths: strings, strconv, fmt or
// runtime/debug come late in that order, and importing any of them put
// this init after ~150 of the binary's ~260 package inits, where the heap
// that the earlier ones grew faults a page at a time. Its imports are os,
// runtime, sync, syscall and unsafe, which puts it ~26th
// (TestImports_KeepInitEarly holds it to them).
//
// It imports only the standard library.
package evalheap
