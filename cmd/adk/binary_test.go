package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
)

// adkBinary builds cmd/adk (with -race under the race detector) once per
// test process.
func adkBinary(t *testing.T) string {
	t.Helper()
	if raceEnabled {
		return testutil.Binary(t, ".", "-race")
	}
	return testutil.Binary(t, ".")
}

// execResult is what one run of the binary produced.
type execResult struct {
	stdout, stderr string
	code           int
}

// runADK runs the built binary in dir with extra environment variables.
// A test that only runs the binary in its own temporary directory against
// its own servers on 127.0.0.1:0 calls t.Parallel; one that times calls,
// sets the process's environment (t.Setenv), runs adk in process, or opens
// a browser stays serial.
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
