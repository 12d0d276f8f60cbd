package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestRelease_StaticBinary runs `make release` for this machine's
// platform into a temp dir: the binary is statically linked (file(1)
// says so) and `adk version --json` reports the git-describe version.
// A CGO_ENABLED=0 -trimpath build shares no cache with the test build and
// takes minutes on a loaded 2-core machine, so it runs only with
// ADK_TEST_RELEASE=1.
func TestRelease_StaticBinary(t *testing.T) {
	if os.Getenv("ADK_TEST_RELEASE") != "1" {
		t.Skip("set ADK_TEST_RELEASE=1 to build the release binary (minutes)")
	}
	if _, err := exec.LookPath("file"); err != nil {
		t.Skip("file(1) not installed")
	}
	root := repoRoot(t)
	dist := t.TempDir()
	cmd := exec.Command("make", "release", "DIST="+dist, "RELEASE_PLATFORMS=linux/"+runtime.GOARCH)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	bins, _ := filepath.Glob(filepath.Join(dist, "adk-*-linux-"+runtime.GOARCH))
	if len(bins) != 1 {
		t.Fatalf("release binaries %v", bins)
	}
	out, err := exec.Command("file", bins[0]).Output()
	if err != nil || !strings.Contains(string(out), "statically linked") {
		t.Fatalf("file: %v %s", err, out)
	}
	desc, err := exec.Command("git", "-C", root, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatal(err)
	}
	vout, err := exec.Command(bins[0], "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v versionInfo
	if err := json.Unmarshal(vout, &v); err != nil || v.Version != strings.TrimSpace(string(desc)) || v.Arch != runtime.GOARCH ||
		!strings.HasPrefix(v.Commit, strings.TrimSpace(string(head))) {
		t.Fatalf("version --json %s (%v), want version %s commit %s", vout, err, desc, head)
	}
}
