package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestPrepareEvalHeap_AdvisesHugePages checks that a local run's heap
// range is advised for transparent huge pages: a VMA of at least most of
// evalHeapHuge carries the "hg" (MADV_HUGEPAGE) flag afterwards.
func TestPrepareEvalHeap_AdvisesHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Skip("kernel without transparent huge pages")
	}
	if biggestHugeVMA(t) >= evalHeapHuge/2 {
		t.Skip("the process already has an advised range")
	}
	prepareEvalHeap()
	if got := biggestHugeVMA(t); got < evalHeapHuge-2*hugePage {
		t.Fatalf("largest MADV_HUGEPAGE mapping %d bytes, want at least %d", got, evalHeapHuge-2*hugePage)
	}
}

func TestThpDisabled(t *testing.T) {
	for in, want := range map[string]bool{
		"": false, "disablethp=1": true, "gctrace=1,disablethp=1": true, "disablethp=0": false,
		"disablethp=1,disablethp=0": false, "xdisablethp=1": false, " disablethp=1": false,
	} {
		if got := thpDisabled(in); got != want {
			t.Errorf("thpDisabled(%q) = %v, want %v", in, got, want)
		}
	}
}

// biggestHugeVMA is the size of the largest mapping of this process whose
// VmFlags in /proc/self/smaps include hg.
func biggestHugeVMA(t *testing.T) uint64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	var size, best uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rng, _, ok := strings.Cut(line, " "); ok && strings.Contains(rng, "-") && !strings.HasSuffix(rng, ":") {
			lo, hi, _ := strings.Cut(rng, "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				size = h - l
			}
			continue
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			for _, fl := range strings.Fields(flags) {
				if fl == "hg" && size > best {
					best = size
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return best
}
