// Package evalheap prepares the Go heap of a local `adk eval run` for
// transparent huge pages, so that the run's first touches of fresh memory
// cost one page fault per 2 MiB instead of one per 4 KiB. `adk worker`
// calls Ready too: the range covers its GC floor (cmd/adk/workergc.go).
//
// The preparation (a block the size of a run's heap, advised and freed by
// a GC cycle) begins in the package's init when the process's arguments
// are `eval run`, so that its GC cycle runs while the rest of the
// binary's packages initialise instead of after them, and Ready waits for
// it before the run allocates. Without that early start (another argument
// order, tests) Ready prepares the heap itself.
//
// It imports only the standard library.
package evalheap
