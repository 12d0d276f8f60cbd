package evalheap

import (
	"os"
	"runtime"
	"sync"
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

// maxCollapse bounds the heap below the block that is collapsed into
// huge pages: the heap of the packages initialised before this one is
// well under one huge page (a larger span means something else is off).
const maxCollapse = 8 * hugePage

// madvCollapse is MADV_COLLAPSE (Linux 6.1): back a range with huge pages
// now, copying the pages it has, whatever the THP mode says.
const madvCollapse = 25

var (
	readyOnce sync.Once
	// preparedInInit reports that init prepared the heap (its block
	// advised and freed by a GC cycle) before the later package inits.
	preparedInInit bool
)

// init prepares the heap for `adk eval run` (a cluster run's client
// gets it too: an advised range costs it only address space) before the
// packages after this one initialise, so that they and the run allocate
// into the freed, advised range; Ready then has nothing left to do.
func init() {
	if !evalRunArgs(os.Args[1:]) {
		return
	}
	if os.Getenv(envHeapProfile) == "" {
		// A run writes a heap profile only when ADK_EVAL_MEMPROFILE asks
		// for one (and then sets its own rate): sampling costs every
		// other run stack walks and first touches of their tables.
		runtime.MemProfileRate = 0
	}
	// The cycle runs here, whatever the CPU count, not in a goroutine
	// beside the later inits (as with two CPUs until session 20, when
	// there were two cycles): it takes ~1 ms, and beside them the inits
	// allocated above the still-live block, outside the advised range,
	// a 4 KiB fault at a time, and the second cycle's end flushed the
	// spans they had cached into fresh span-set blocks: ~230 more
	// faults a run. With
	// one CPU a goroutine ran only once main blocked on Ready, after
	// every later init. bench/RESULTS.md, sessions 19 (h25u) and 20
	// (h26u).
	prepare()
	preparedInInit = true
}

// Ready returns once the next evalHeapHuge bytes of the heap are eligible
// for transparent huge pages: at once when init prepared them, else after
// preparing them now (another argument order, tests). Later calls return
// at once: a process prepares its heap once (tests run many evals in one).
func Ready() {
	readyOnce.Do(func() {
		if !preparedInInit {
			prepare()
		}
	})
}

// prepare makes the next evalHeapHuge bytes of the Go heap eligible for
// transparent huge pages. It allocates one block that size, which the
// runtime maps fresh (a large object takes a new span), advises its whole
// huge pages MADV_HUGEPAGE, and frees it with a GC cycle, so the heap's
// next spans and goroutine stacks are carved from that range. The advice
// changes only how the kernel backs the memory, never its contents, and
// it is a no-op where THP is "never" or "always". Errors are ignored:
// without it the run is only slower.
func prepare() {
	if thpDisabled(os.Getenv("GODEBUG")) {
		return // the operator asked the runtime for no huge pages
	}
	// The collector is off from the block's allocation to the end of the
	// cycle that frees it (adviseHugeBlock says why): an allocation of
	// another goroutine's between the two, with the old percentage back
	// and the block live, would begin a cycle that sees it.
	old := setGCPercent(-1)
	defer setGCPercent(old)
	adviseHugeBlock()
	// The block is garbage now; a cycle while the heap is still small
	// (start-up) frees its span for reuse at once, instead of at the
	// first GC of the run, after the run had grown past it. It is the
	// only cycle (runtime.GC runs one with the collector off too).
	runtime.GC()
}

// evalRunArgs reports whether a process's arguments (without the program
// name) are `adk eval run`: its first two arguments that are not flags
// are eval and run. Only a persistent flag before the command, given its
// value as a separate argument, would hide a run from it, which only
// costs that run the early start.
func evalRunArgs(args []string) bool {
	var words []string
	for _, a := range args {
		if a == "--" {
			break
		}
		if len(a) > 0 && a[0] == '-' {
			continue
		}
		if words = append(words, a); len(words) == 2 {
			break
		}
	}
	return len(words) == 2 && words[0] == "eval" && words[1] == "run"
}

// adviseHugeBlock allocates the block and advises its whole huge pages,
// then collapses the heap below them into huge pages. The heap grows
// upwards, and its first spans (the runtime's, the earlier packages')
// share their huge page with free pages that the heap fills before it
// reaches the advised range: one fault each, a few hundred at start-up,
// against one collapse that copies the pages in use. The collapse is best
// effort: EAGAIN (pages the kernel could not isolate at that moment) is
// tried again twice, other errors are ignored (a kernel before 6.1 has no
// collapse): without it the start is only slower. It returns the
// collapse's errno, or errNoCollapse when there was nothing to collapse.
func adviseHugeBlock() syscall.Errno {
	// With the collector on, the block's allocation, 30 times the heap
	// goal of a process's start, began a cycle that saw the block live
	// (gc1 in gctrace), so that freeing it took a second one. Beside the
	// first, the new mark workers' stacks and the other P's page cache
	// came from above the live block, outside the advised range, which
	// the heap then kept filling a 4 KiB fault at a time (~100 faults
	// in half the runs), and the runtime's background scavenger, woken
	// by each cycle's end, returned pieces of the collapsed huge page
	// below the block to the kernel, splitting it (up to ~200 faults):
	// bench/RESULTS.md, session 24 (h30s). So prepare turns the collector
	// off around this and its runtime.GC, which alone frees the block.
	// Nothing else sets the percentage meanwhile: cmd/adk's GC floor is
	// held only after Ready, which returns once prepare has run.
	b := make([]byte, evalHeapHuge)
	base := uintptr(unsafe.Pointer(&b[0]))
	lo := (base + hugePage - 1) &^ (hugePage - 1)
	hi := (base + evalHeapHuge) &^ (hugePage - 1)
	errno := errNoCollapse
	if lo < hi {
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, syscall.MADV_HUGEPAGE)
		// os.Args is among the runtime's first heap objects.
		start := uintptr(unsafe.Pointer(unsafe.SliceData(os.Args))) &^ (hugePage - 1)
		if start < lo && lo-start <= maxCollapse {
			for range 3 {
				if _, _, errno = syscall.Syscall(syscall.SYS_MADVISE, start, lo-start, madvCollapse); errno != syscall.EAGAIN {
					break
				}
			}
		}
	}
	runtime.KeepAlive(b)
	return errno
}

// setGCPercent is runtime/debug.SetGCPercent without its package: the
// runtime provides it under that name (its `//go:linkname setGCPercent
// runtime/debug.setGCPercent`), and importing runtime/debug would move
// this package's init behind most of the binary's (doc.go). Were the
// runtime to drop the name, the build would fail at link time, not run
// without it.
//
//go:linkname setGCPercent runtime/debug.setGCPercent
func setGCPercent(percent int32) int32

// errNoCollapse is adviseHugeBlock's answer when the heap below the block
// was not in reach (over maxCollapse) or there was no block to advise.
const errNoCollapse = syscall.Errno(^uintptr(0))

// thpDisabled reports whether GODEBUG (the variable's value) sets
// disablethp=1, the runtime's switch for no transparent huge pages in the
// heap, parsed as the runtime parses it (comma-separated key=value, the
// last setting of a key wins).
func thpDisabled(godebug string) bool {
	off := false
	for godebug != "" {
		kv := godebug
		if i := indexByte(godebug, ','); i >= 0 {
			kv, godebug = godebug[:i], godebug[i+1:]
		} else {
			godebug = ""
		}
		if i := indexByte(kv, '='); i >= 0 && kv[:i] == "disablethp" {
			off = kv[i+1:] == "1"
		}
	}
	return off
}

// indexByte is strings.IndexByte, which the package does not import
// (doc.go).
func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// envHeapProfile is cmd/adk's ADK_EVAL_MEMPROFILE (evalprofile.go).
const envHeapProfile = "ADK_EVAL_MEMPROFILE"
