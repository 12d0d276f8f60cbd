package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"unsafe"
)

// evalHeapHuge is how much of the Go heap a local `adk eval run` asks
// the kernel to back with transparent huge pages.
//
// Why: a local run's CPU is dominated, at its start, by first touches of
// fresh memory. Each new 4 KiB page is a page fault, and in a virtual
// machine (our Firecracker CI and bench host) a fault costs ~10-15 µs, so
// a 1,000-sample run spent ~100 ms of its ~500 ms of CPU on ~8,000 faults:
// worker stacks, connection buffers and the first GC cycles' heap
// (bench/RESULTS.md, "fourth pass"). A huge page costs one fault per
// 2 MiB. With transparent_hugepage in "madvise" mode (the common default)
// the runtime's heap gets none unless asked, and Go no longer asks, so we
// do, for a range sized to a run's whole heap: 128 MiB covers the heap of
// a 10,000-sample JSON run (peak RSS ~100 MiB with the binary; 64 MiB left
// it ~5,000 faults beyond the range). Beyond it the heap grows in
// ordinary pages. RSS does not grow by the range: it is only address space
// until the heap uses it, and a run touches what it allocates (rounded up
// to whole 2 MiB pages: 2-7 MiB more peak RSS in bench/RESULTS.md).
const evalHeapHuge = 128 << 20

// hugePage is the transparent huge page size of x86-64 (and of arm64 with
// 4 KiB pages). Only the block's whole huge pages are advised, so no
// memory outside the block is.
const hugePage = 2 << 20

// prepareEvalHeap makes the next evalHeapHuge bytes of the Go heap
// eligible for transparent huge pages. It allocates one block that size,
// which the runtime maps fresh (a large object takes a new span), advises
// its whole huge pages MADV_HUGEPAGE, and frees it with a GC cycle, so
// the heap's next spans and goroutine stacks are carved from that range.
// The advice changes only how the kernel backs the memory, never its
// contents, and it is a no-op where THP is "never" or "always". Errors
// are ignored: without it the run is only slower.
func prepareEvalHeap() {
	if thpDisabled(os.Getenv("GODEBUG")) {
		return // the operator asked the runtime for no huge pages
	}
	// Allocating the block would start a GC cycle (the heap is far past
	// its goal) that may still see it live; off while it exists, so the
	// one cycle below is the only one.
	gcPercent := debug.SetGCPercent(-1)
	adviseHugeBlock()
	debug.SetGCPercent(gcPercent)
	// The block is garbage now; a cycle while the heap is still small
	// (start-up) frees its span for reuse at once, instead of at the
	// first GC of the run, after the run had grown past it.
	runtime.GC()
}

// adviseHugeBlock allocates the block and advises its whole huge pages.
func adviseHugeBlock() {
	b := make([]byte, evalHeapHuge)
	base := uintptr(unsafe.Pointer(&b[0]))
	lo := (base + hugePage - 1) &^ (hugePage - 1)
	hi := (base + evalHeapHuge) &^ (hugePage - 1)
	if lo < hi {
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, syscall.MADV_HUGEPAGE)
	}
	runtime.KeepAlive(b)
}

// thpDisabled reports whether GODEBUG (the variable's value) sets
// disablethp=1, the runtime's switch for no transparent huge pages in the
// heap, parsed as the runtime parses it (comma-separated key=value, the
// last setting of a key wins).
func thpDisabled(godebug string) bool {
	off := false
	for _, kv := range strings.Split(godebug, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == "disablethp" {
			off = v == "1"
		}
	}
	return off
}
