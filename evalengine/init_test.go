package evalengine_test

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// Every adk process links the report package; its HTML template is parsed
// on the first HTML report, not at init (it was 1,900 allocations of every
// process's start-up).
func TestInit_ReportPackageParsesNoTemplate(t *testing.T) {
	if os.Getenv("ADK_INIT_TRACE_CHILD") != "" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInit_ReportPackageParsesNoTemplate$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "ADK_INIT_TRACE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`init github\.com/fadcedab/adk/evalengine/internal/report @[^,]+, [^,]+, (\d+) bytes, (\d+) allocs`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no init line for the report package in:\n%s", out)
	}
	allocs, _ := strconv.Atoi(string(m[2]))
	if allocs > 300 {
		t.Fatalf("report init: %s bytes, %d allocs; want the HTML template parsed on first use (at init: ~84 KB, ~1,900 allocs)", m[1], allocs)
	}
}
