package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// builds are the binaries this test process built, by package and flags,
// in one directory VerifyTestMain removes when the tests end.
var builds struct {
	mu   sync.Mutex
	dir  string
	done map[string]*build
}

type build struct {
	once sync.Once
	path string // set when created
	err  error
}

// Binary builds the main package at pkg (a directory, relative to the
// test's package) with `go build flags...` once per test process and
// returns the executable's path. The build directory is removed by
// VerifyTestMain after the package's tests.
func Binary(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	key := pkg + "\x00" + strings.Join(flags, "\x00")
	builds.mu.Lock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "adk-test-bin-")
		if err != nil {
			builds.mu.Unlock()
			t.Fatal(err)
		}
		builds.dir, builds.done = dir, map[string]*build{}
	}
	b := builds.done[key]
	if b == nil {
		b = &build{path: filepath.Join(builds.dir, fmt.Sprintf("%s-%d", filepath.Base(filepath.Clean(pkg)), len(builds.done)))}
		builds.done[key] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		args := append(append([]string{"build", "-o", b.path}, flags...), pkg)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// removeBuilds deletes the build directory, if any.
func removeBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
		builds.dir, builds.done = "", nil
	}
}

// cleanupM runs the tests, then removes what Binary built.
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	defer removeBuilds()
	return c.m.Run()
}
