// Package evalheap prepares the Go heap of a local `adk eval run` for
// transparent huge pages, so that the run's first touches of fresh memory
// cost one page fault per 2 MiB instead of one per 4 KiB. `adk worker`
// calls Ready too: the range covers its GC floor (cmd/adk/gcfloor.go).
//
// The preparation (a block the size of a run's heap, advised and freed by
// a GC cycle; the heap below it collapsed into huge pages) begins in the
// package's init when the process's arguments are `eval run`, so that its
// GC cycle runs while the rest of the binary's packages initialise instead
// of after them, and Ready waits for it before the run allocates. With one
// CPU (GOMAXPROCS 1: a pinned run, a one-CPU container) nothing runs beside
// the inits, so the init runs the cycle itself before them. Without
// that early start (another argument order, tests) Ready prepares the heap
// itself. The same init turns off heap profile sampling for a run that
// writes no heap profile.
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
