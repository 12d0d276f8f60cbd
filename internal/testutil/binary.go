package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// builds are the binaries this test process uses, by package and flags,
// linked into one directory VerifyTestMain removes when the tests end.
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
// test's package, or an import path) with `go build flags...` and returns
// the executable's path, once per test process.
//
// The executable is built into the module's bin/testbin/, one file per
// package and flags, under a lock shared by every test process: `go build
// -o` of a target that is up to date (its build ID is the one go build
// would link) leaves it as it is, so a binary is linked once for all the
// test processes of a run (make test's two phases, and the packages that
// build the same one) instead of once per process; a race-built adk is
// ~5 s of CPU to link. Each process uses its own hard link of the file, in
// a directory VerifyTestMain removes after the package's tests, so a later
// build of the same target never changes a running test's executable.
func Binary(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	if strings.HasPrefix(pkg, ".") {
		// "../cmd/adk" and "../../cmd/adk" are one package and one target.
		abs, err := filepath.Abs(pkg)
		if err != nil {
			t.Fatal(err)
		}
		pkg = abs
	}
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
	b.once.Do(func() { b.err = buildShared(b.path, key, pkg, flags) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// buildShared brings the module's shared target for key up to date under
// its lock and links it to path. Without a module root (no go.mod above
// the working directory) it builds to path directly.
func buildShared(path, key, pkg string, flags []string) error {
	root, err := moduleRoot()
	if err != nil {
		return goBuild(path, pkg, flags)
	}
	dir := filepath.Join(root, "bin", "testbin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(key))
	target := filepath.Join(dir, filepath.Base(filepath.Clean(pkg))+"-"+hex.EncodeToString(sum[:6]))
	lock, err := os.OpenFile(target+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close() // and so unlocks
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if err := goBuild(target, pkg, flags); err != nil {
		return err
	}
	// go build replaces a target it relinks (a new file), so this link
	// keeps the executable the tests were given.
	if err := os.Link(target, path); err == nil {
		return nil
	}
	return copyFile(path, target) // another file system
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// goBuild runs go build. A build without -race is static (CGO_ENABLED=0),
// as make build, make release and the image are: the tests run the binary
// users run, and its compile is the one make build and make lint use, so a
// cold build cache does not compile the dependencies once more for the
// tests. The race detector needs cgo, so -race builds keep the
// environment's setting.
func goBuild(out, pkg string, flags []string) error {
	args := append(append([]string{"build", "-o", out}, flags...), pkg)
	cmd := exec.Command("go", args...)
	if !slices.Contains(flags, "-race") {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return nil
}

// moduleRoot is the nearest directory at or above the working directory
// holding a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// removeBuilds deletes this process's directory of links, if any.
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
