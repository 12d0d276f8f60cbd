package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

var updateGolden = flag.Bool("update", false, "rewrite cmd/adk/testdata/golden")

// timings are the only bytes that differ between two runs of one eval.
var timings = regexp.MustCompile(`time="[0-9.]+"`)

// traceIDs are the samples' trace ids, new on every run.
var traceIDs = regexp.MustCompile(`[0-9a-f]{32}`)

// htmlDuration is the run's duration in the HTML report's summary.
var htmlDuration = regexp.MustCompile(`<dd>[0-9]+ ms</dd>`)

// TestEvalRun_FailureReasonsInEveryFormat runs a failing eval through the
// binary and holds every report format to a golden file: each names the
// failing metric with score and threshold, the expected versus the actual
// response and the first trajectory mismatch (issue 16, item 1).
func TestEvalRun_FailureReasonsInEveryFormat(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	writeFile(t, dir, "set.json", `{"id":"weather","version":"1","cases":[
 {"id":"pune","expected_trajectory":["get_weather"],"input":"Weather in Pune?","expected":"Sunny"},
 {"id":"oslo","expected_trajectory":[{"tool":"get_weather","args":{"city":"Oslo"}}],"input":"Weather in Oslo?","expected":"Snow"}]}`)
	for _, format := range evalengine.Formats() {
		if format == evalengine.FormatJSON || format == evalengine.FormatJSONL {
			continue // the full result; its reasons are the metrics' metadata
		}
		t.Run(format, func(t *testing.T) {
			r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "set.json",
				"--criteria", "criteria.json", "--format", format)
			if r.code != exitFailed {
				t.Fatalf("exit %d stderr %q", r.code, r.stderr)
			}
			out := timings.ReplaceAll([]byte(r.stdout), []byte(`time="T"`))
			out = htmlDuration.ReplaceAll(out, []byte(`<dd>T ms</dd>`))
			out = traceIDs.ReplaceAll(out, []byte(`TRACE_ID`))
			golden := filepath.Join("testdata", "golden", "reasons."+format)
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if string(want) != string(out) {
				t.Fatalf("%s differs from the golden file:\n%s", golden, out)
			}
		})
	}
}
