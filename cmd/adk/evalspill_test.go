package main

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// The report bounds below are lowered with --max-report-bytes (the one
// flag that sets the 16 MiB of one document), so results "over one
// document" take a few kilobytes here. The fixture's two cases × two
// samples charge 7,168 bytes before any sample (evalengine.ResultFixedBytes):
// 5000 streams from the start, 7300 switches after the first samples.

// TestEvalRun_OverOneDocument: a run whose result passes the document
// bound still reports in every format: the same report as a run that fits
// (trace ids and durations aside, which differ per run), rendered from
// its stream, kept as FILE.jsonl, which adk eval report renders to the
// same bytes; json becomes the stream itself. stdout and --output hold
// the same bytes, a line on stderr says what happened, and no journal or
// temporary stream is left behind.
func TestEvalRun_OverOneDocument(t *testing.T) {
	t.Parallel()
	dir := fixture(t)
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"TMPDIR=" + tmp}
	base := []string{"eval", "run", "--config", "bad.json", "--eval-set", "set.json", "--criteria", "criteria.json", "--samples", "2", "--concurrency", "2"}
	perRun := regexp.MustCompile(`\(trace [0-9a-f]+\)|time="[0-9.]+"|[0-9]+ ms<|"duration_ms":[0-9]+`)
	// The input digests of json's stream with --output (made before the
	// run, for its journal), which the stream to stdout makes only when it
	// starts streaming.
	var outputDigests map[string]string
	// Each binary run costs under -race: markdown takes both ways past
	// the bound and the stdout-only run, the others the switch mid-run.
	for _, format := range []string{"markdown", "junit", "sarif", "annotations", "html", "json"} {
		var fits execResult
		if format != "html" && format != "json" {
			fits = runADK(t, dir, env, append(base, "--format", format)...)
			if fits.code != exitFailed || fits.stderr != "" {
				t.Fatalf("%s: a run that fits: exit %d, stderr %q", format, fits.code, fits.stderr)
			}
		}
		bounds := []string{"7300"}
		if format == "markdown" {
			bounds = []string{"5000", "7300"}
		}
		for _, bound := range bounds {
			out := filepath.Join(dir, bound+"."+format)
			r := runADK(t, dir, env, append(base, "--format", format, "--max-report-bytes", bound, "--output", out)...)
			if r.code != exitFailed || !strings.Contains(r.stderr, "over one "+bound+"-byte") || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("%s over %s: exit %d, stderr %q", format, bound, r.code, r.stderr)
			}
			if got, _ := os.ReadFile(out); string(got) != r.stdout {
				t.Fatalf("%s over %s: --output differs from stdout", format, bound)
			}
			if _, err := os.Stat(out + journalSuffix); !os.IsNotExist(err) {
				t.Fatalf("%s over %s: the journal was left behind: %v", format, bound, err)
			}
			if format == "json" {
				// The stream itself, which renders as the run's markdown.
				if !strings.HasPrefix(r.stdout, `{"type":"header"`) || !strings.Contains(r.stderr, out+" holds it as JSON Lines") {
					t.Fatalf("json over %s: not the stream (stderr %q)", bound, r.stderr)
				}
				md := runADK(t, dir, nil, "eval", "report", out, "--format", "markdown")
				if md.code != exitOK || !strings.Contains(md.stdout, "## Failures") {
					t.Fatalf("json over %s: its stream does not render: exit %d, stderr %q", bound, md.code, md.stderr)
				}
				outputDigests = streamDigests(t, r.stdout)
				continue
			}
			kept := out + ".jsonl"
			if !strings.Contains(r.stderr, "kept as "+kept) {
				t.Fatalf("%s over %s: stderr does not name the stream: %q", format, bound, r.stderr)
			}
			again := runADK(t, dir, nil, "eval", "report", kept, "--format", format, "--max-report-bytes", bound)
			if again.code != exitOK || again.stdout != r.stdout {
				t.Fatalf("%s over %s: adk eval report of the kept stream differs (exit %d, stderr %q)", format, bound, again.code, again.stderr)
			}
			if format == "html" {
				if len(r.stdout) > 7300 || !strings.Contains(r.stdout, `class="paged"`) || !strings.HasSuffix(r.stdout, "</html>\n") {
					t.Fatalf("html over %s: not one bounded page with its note (%d bytes)", bound, len(r.stdout))
				}
				continue
			}
			if got, want := perRun.ReplaceAllString(r.stdout, ""), perRun.ReplaceAllString(fits.stdout, ""); got != want {
				t.Fatalf("%s over %s: the report differs from the run that fits\n%s\nwant\n%s", format, bound, got, want)
			}
		}
		if format != "markdown" && format != "json" {
			continue
		}
		// stdout only: the temporary stream is removed.
		r := runADK(t, dir, env, append(base, "--format", format, "--max-report-bytes", "5000")...)
		if r.code != exitFailed || (format != "json" && !strings.Contains(r.stderr, "not kept")) {
			t.Fatalf("%s to stdout: exit %d, stderr %q", format, r.code, r.stderr)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Fatalf("%s to stdout: %d temporary files left", format, len(left))
		}
		if format == "json" {
			if got := streamDigests(t, r.stdout); got["eval_set"] == "" || !maps.Equal(got, outputDigests) {
				t.Fatalf("json to stdout: the stream's digests %v, want those of the run with --output %v", got, outputDigests)
			}
		}
	}
}

// TestEvalReport_OverOneDocument: adk eval report renders a jsonl result
// over --max-report-bytes in every format: annotations case by case
// (the golden bytes), html as one bounded page, json as the stream
// itself; a result document whose html is over the bound is paged too;
// the flag's range is checked.
func TestEvalReport_OverOneDocument(t *testing.T) {
	t.Parallel()
	golden := filepath.Join(repoRoot(t), "evalengine", "testdata", "golden")
	dir := t.TempDir()
	stream := filepath.Join(golden, "result.jsonl")
	want, err := os.ReadFile(filepath.Join(golden, "result.annotations"))
	if err != nil {
		t.Fatal(err)
	}
	r := runADK(t, dir, nil, "eval", "report", stream, "--format", "annotations", "--max-report-bytes", "1000")
	if r.code != exitOK || r.stdout != string(want) || !strings.Contains(r.stderr, "case by case") {
		t.Fatalf("annotations: exit %d, stderr %q, golden: %t", r.code, r.stderr, r.stdout == string(want))
	}
	jsonl, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "r.json")
	r = runADK(t, dir, nil, "eval", "report", stream, "--format", "json", "--max-report-bytes", "1000", "--output", out)
	if got, _ := os.ReadFile(out); r.code != exitOK || r.stdout != string(jsonl) || string(got) != r.stdout || !strings.Contains(r.stderr, "JSON Lines form") {
		t.Fatalf("json: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, in := range []string{stream, filepath.Join(golden, "result.json")} {
		r = runADK(t, dir, nil, "eval", "report", in, "--format", "html", "--max-report-bytes", "6000")
		if r.code != exitOK || len(r.stdout) > 6000 || !strings.Contains(r.stdout, `class="paged"`) || !strings.Contains(r.stderr, "one page") {
			t.Fatalf("html of %s: exit %d, %d bytes, stderr %q", filepath.Base(in), r.code, len(r.stdout), r.stderr)
		}
	}
	oneErrorLine(t, runADK(t, dir, nil, "eval", "report", stream, "--max-report-bytes", "16777217"), "invalid_positive_int")
	oneErrorLine(t, runADK(t, dir, nil, "eval", "report", stream, "--max-report-bytes", "0"), "invalid_positive_int")
}

// TestScrubWriter_SameAsScrubReport: the streamed scrub gives the bytes
// scrubReport gives on the whole, however the stream is cut into writes,
// with secrets split across writes, overlapping and HTML-escaped.
func TestScrubWriter_SameAsScrubReport(t *testing.T) {
	secrets := []string{"sk-a&b<c>", "aaaa", "AIza-Kq3V"}
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{"x", "aa", "aaaaa", "sk-a&amp;b&lt;c&gt;", "sk-a&b<c>", "AIza-Kq3V", "AIza-", "Kq3V", "\n", "<pre>"}
	for i := range 300 {
		var doc strings.Builder
		for range rng.IntN(60) {
			doc.WriteString(parts[rng.IntN(len(parts))])
		}
		data := []byte(doc.String())
		want := scrubReport(bytes.Clone(data), secrets)
		var got bytes.Buffer
		sw := newScrubWriter(&got, secrets)
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(7))
			if _, err := sw.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := sw.Close(); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Fatalf("case %d: %q\nscrubbed on the stream %q\nwhole %q", i, data, got.String(), want)
		}
	}
}

// TestEvalRun_AnnotationsCapBeforeRunning: annotations hold at most
// 10,000 cases by contract; a bigger set is refused before any model call
// instead of after the run.
func TestEvalRun_AnnotationsCapBeforeRunning(t *testing.T) {
	dir := fixture(t)
	var b strings.Builder
	b.WriteString(`{"id":"big","version":"1","cases":[`)
	for i := range 10_001 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"id":"c` + strconv.Itoa(i) + `","input":"Weather in Pune?","expected":"Sunny"}`)
	}
	b.WriteString("]}")
	writeFile(t, dir, "big.json", b.String())
	r := runADK(t, dir, nil, "eval", "run", "--config", "bad.json", "--eval-set", "big.json", "--format", "annotations", "--output", "a.json")
	oneErrorLine(t, r, "report_render_failed: eval_annotation_limit_exceeded (annotations hold at most 10000 cases, the set has 10001")
	if _, err := os.Stat(filepath.Join(dir, "a.json"+journalSuffix)); !os.IsNotExist(err) {
		t.Fatalf("a journal was started: %v", err)
	}
}

// streamDigests returns the input digests in a jsonl stream's header.
func streamDigests(t *testing.T, stream string) map[string]string {
	t.Helper()
	st, err := evalengine.ReadStream(strings.NewReader(stream))
	if err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	return st.Header.Digests
}
