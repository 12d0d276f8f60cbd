package testutil

import (
	"os/exec"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { VerifyTestMain(m) }

// TestBinary_NonRaceBuildIsStatic: a binary built without -race is built
// as make build builds bin/adk (CGO_ENABLED=0), so the tests run what
// users run and share make build's compile.
func TestBinary_NonRaceBuildIsStatic(t *testing.T) {
	bin := Binary(t, "github.com/fadcedab/adk/bench/openaifake")
	out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "CGO_ENABLED=0") {
		t.Fatalf("Binary's non-race build is not static (CGO_ENABLED=0):\n%s", out)
	}
	// A second call in the process gives the same executable.
	if again := Binary(t, "github.com/fadcedab/adk/bench/openaifake"); again != bin {
		t.Fatalf("Binary built twice: %s, then %s", bin, again)
	}
}
