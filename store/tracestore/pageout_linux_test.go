package tracestore

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestPageOutMapped_AdvisesOnlyTheDirsMatchingFilesAndKeepsTheirBytes: the
// value log's mappings are paged out (their bytes read back unchanged,
// written ones included), other files' are not.
func TestPageOutMapped_AdvisesOnlyTheDirsMatchingFilesAndKeepsTheirBytes(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mapFile := func(name string, size int) []byte {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(int64(size)); err != nil {
			t.Fatal(err)
		}
		b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Munmap(b) })
		return b
	}
	const size = 1 << 20
	vlog, sst := mapFile("000001.vlog", size), mapFile("000001.sst", size)
	want := bytes.Repeat([]byte("adk-value-log-"), size/14)
	copy(vlog, want)
	copy(sst, want)
	if got := pageOutMapped(dir, ".vlog"); got != size {
		t.Fatalf("advised %d bytes, want the value log's %d", got, size)
	}
	if got := pageOutMapped(filepath.Join(dir, "elsewhere"), ".vlog"); got != 0 {
		t.Fatalf("advised %d bytes of another directory", got)
	}
	if !bytes.Equal(vlog[:len(want)], want) || !bytes.Equal(sst[:len(want)], want) {
		t.Fatal("a paged-out mapping lost its bytes")
	}
}
