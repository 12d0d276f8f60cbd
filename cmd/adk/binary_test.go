package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// binaryM owns the directory the adk binary is built into (lazily, once,
// by the first end-to-end test) and removes it after the tests.
type binaryM struct{ m *testing.M }

var builtBinary struct {
	dir  string
	once sync.Once
	path string
	err  error
}

func (b binaryM) Run() int {
	dir, err := os.MkdirTemp("", "adk-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	builtBinary.dir = dir
	return b.m.Run()
}

// adkBinary builds cmd/adk with `go build` once per test process.
func adkBinary(t *testing.T) string {
	t.Helper()
	builtBinary.once.Do(func() {
		path := filepath.Join(builtBinary.dir, "adk")
		args := []string{"build", "-o", path}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			builtBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		builtBinary.path = path
	})
	if builtBinary.err != nil {
		t.Fatal(builtBinary.err)
	}
	return builtBinary.path
}

// execResult is what one run of the binary produced.
type execResult struct {
	stdout, stderr string
	code           int
}

// runADK runs the built binary in dir with extra environment variables.
func runADK(t *testing.T, dir string, env []string, args ...string) execResult {
	t.Helper()
	cmd := exec.Command(adkBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run adk %v: %v", args, err)
	}
	return execResult{stdout: out.String(), stderr: errb.String(), code: code}
}

// repoRoot is the module root, from cmd/adk.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// oneErrorLine checks the error contract: exit 1, empty stdout, one line
// on stderr starting "adk: <code>".
func oneErrorLine(t *testing.T, r execResult, code string) {
	t.Helper()
	if r.code != exitError {
		t.Errorf("exit %d, want 1 (stderr %q)", r.code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want empty", r.stdout)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") || !strings.HasPrefix(r.stderr, "adk: "+code) {
		t.Errorf("stderr %q, want one line starting %q", r.stderr, "adk: "+code)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Errorf("stderr has a stack trace: %q", r.stderr)
	}
}

// noFilesBut fails if dir holds anything besides the named files (a
// partial report or a leftover temporary file).
func noFilesBut(t *testing.T, dir string, keep ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, k := range keep {
		allowed[k] = true
	}
	for _, e := range entries {
		if !allowed[e.Name()] {
			t.Errorf("unexpected file %s left in %s", e.Name(), dir)
		}
	}
}
