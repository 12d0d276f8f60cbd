package tracestore

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// madvPageout is MADV_PAGEOUT (Linux 5.4): reclaim the range's pages now.
// It never loses data: clean file pages are dropped (a later read faults
// them back from the file), dirty ones are left for writeback, and
// anonymous pages go to swap or stay. So an address range that Badger
// unmapped and the runtime reused between reading /proc/self/maps and the
// call costs at most a page fault, never memory.
const madvPageout = 21

// pageOutMapped asks the kernel to reclaim the resident pages of this
// process's mappings of files under dir whose names end with one of
// suffixes (store/DESIGN.md, "RSS"). It returns the bytes of mapping it
// advised; an old kernel's EINVAL only means nothing is reclaimed.
func pageOutMapped(dir string, suffixes ...string) int64 {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var advised int64
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], prefix) || !hasAnySuffix(f[5], suffixes) {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), madvPageout); errno == 0 {
			advised += int64(end - start)
		}
	}
	return advised
}

func hasAnySuffix(s string, suffixes []string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}
