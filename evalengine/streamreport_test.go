package evalengine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// renderStreamBytes opens data as a stream file and renders it.
func renderStreamBytes(t *testing.T, data []byte, format string) ([]byte, error) {
	t.Helper()
	f, err := evalengine.OpenStreamFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = evalengine.RenderStream(&out, f, format, evalengine.ExportOptions{})
	return out.Bytes(), err
}

// shuffleSamples reverses the order of the sample lines (a real run
// writes them in finish order, not case order).
func shuffleSamples(data []byte) []byte {
	lines := strings.SplitAfter(string(data), "\n")
	var head, samples, tail []string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, `{"type":"sample"`):
			samples = append(samples, l)
		case len(samples) == 0:
			head = append(head, l)
		default:
			tail = append(tail, l)
		}
	}
	slices.Reverse(samples)
	return []byte(strings.Join(slices.Concat(head, samples, tail), ""))
}

// TestRenderStream_ByteIdenticalToRender: for results that fit one
// document, the streamed report of the jsonl form is exactly Render's, in
// any sample order: the golden stream, both fixed results, and a 60-case
// run with failures and three samples a case.
func TestRenderStream_ByteIdenticalToRender(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "result.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	o := opts(func(o *evalengine.Options) { o.Samples = 3; o.Concurrency = 8 })
	run, err := evalengine.Run(context.Background(), streamSet(t, 60), evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: evalengine.DefaultCriteria(), Options: o})
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*evalengine.Result{"failing": fixedResult(t, true), "passing": fixedResult(t, false), "run": run} {
		data, err := evalengine.Render(r, evalengine.FormatJSONL, evalengine.ExportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		inputs := map[string][]byte{"case order": data, "reversed": shuffleSamples(data)}
		if name == "failing" {
			inputs["golden"] = golden
		}
		for in, stream := range inputs {
			for _, format := range evalengine.StreamFormats() {
				want, err := evalengine.Render(r, format, evalengine.ExportOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got, err := renderStreamBytes(t, stream, format)
				if err != nil {
					t.Fatalf("%s %s %s: %v", name, in, format, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s %s %s: streamed report differs\n got %q\nwant %q", name, in, format, got, want)
				}
			}
			// html with a baseline comparison (the passing result's)
			// is RenderHTML's page of both.
			cmp, err := evalengine.Compare(fixedResult(t, false), r, evalengine.CompareOptions{})
			if err != nil {
				cmp, err = evalengine.Compare(r, r, evalengine.CompareOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			want, err := evalengine.RenderHTML(r, cmp, evalengine.ExportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			f, err := evalengine.OpenStreamFile(bytes.NewReader(stream), int64(len(stream)))
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := evalengine.RenderStreamCompared(&got, f, cmp, evalengine.FormatHTML, evalengine.ExportOptions{}); err != nil || !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("%s %s: the streamed html with its comparison differs: %v", name, in, err)
			}
		}
	}
}

func TestRenderStream_RefusesAndRejects(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "result.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{evalengine.FormatJSON, evalengine.FormatJSONL} {
		_, err := renderStreamBytes(t, golden, format)
		wantCode(t, err, evalengine.CodeReportNotStreamable)
		if !strings.Contains(err.Error(), format) || !strings.Contains(err.Error(), "markdown") {
			t.Fatalf("%s: the error names neither the format nor the alternative: %v", format, err)
		}
	}
	_, err = renderStreamBytes(t, golden, "pdf")
	wantCode(t, err, evalengine.CodeInvalidReportFormat)
	lines := strings.SplitAfter(string(golden), "\n")
	for name, bad := range map[string]string{
		"truncated":        string(golden[:len(golden)-10]),
		"no summary":       strings.Join(lines[:len(lines)-2], ""),
		"duplicate sample": lines[0] + lines[1] + strings.Join(lines[1:], ""),
		"missing sample":   lines[0] + strings.Join(lines[2:], ""),
		"forged count":     strings.Replace(string(golden), `"passed_case_count":1`, `"passed_case_count":2`, 1),
		"forged case":      strings.Replace(string(golden), `"passed_sample_count":2`, `"passed_sample_count":1`, 1),
	} {
		if _, err := renderStreamBytes(t, []byte(bad), evalengine.FormatMarkdown); evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalStream {
			t.Fatalf("%s: want invalid_eval_stream, got %v", name, err)
		}
	}
}

// bigStream writes a stream of n cases × 2 samples, every tenth case
// failing, each sample padded with pad bytes of metadata, built from the
// golden stream's two cases with new case ids. It returns the path and
// how many cases failed.
func bigStream(t *testing.T, n, pad int) (string, int) {
	t.Helper()
	r := goldenStreamResult(t)
	path := filepath.Join(t.TempDir(), "big.jsonl")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	set := &evalengine.Set{ID: r.EvalSetID, Version: r.EvalSetVersion, Cases: make([]evalengine.Case, n)}
	hdr := evalengine.NewStreamHeader(set, r.SampleCount, nil)
	sw, err := evalengine.NewStreamWriter(file, &hdr, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	padding := strings.Repeat("p", pad)
	// Golden case 0 passed, case 1 failed.
	caseOf := func(i int) (evalengine.CaseResult, string) {
		if i%10 == 9 {
			return r.Cases[1], "case-" + itoa(i)
		}
		return r.Cases[0], "case-" + itoa(i)
	}
	for si := range r.SampleCount {
		for i := range n {
			c, id := caseOf(i)
			s := c.Samples[si]
			s.CaseID = id
			s.SampleID = evalengine.SampleID(r.EvalSetID, r.EvalSetVersion, id, si)
			s.Metadata = map[string]any{"pad": padding}
			if err := sw.WriteSample(i, &s); err != nil {
				t.Fatal(err)
			}
		}
	}
	sum := *r
	sum.Cases = make([]evalengine.CaseResult, n)
	failed := 0
	for i := range n {
		c, id := caseOf(i)
		c.CaseID = id
		c.Samples = nil
		sum.Cases[i] = c
		if !c.Passed {
			failed++
		}
	}
	sum.CaseCount, sum.PassedCaseCount = n, n-failed
	if err := sw.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	return path, failed
}

// heapWatcher is an output that counts markdown case rows and, every
// few writes, measures the live heap after a collection. It keeps only
// the last bytes written, so it holds nothing that grows.
type heapWatcher struct {
	writes, rows int
	tail         []byte
	maxLive      uint64
}

func (h *heapWatcher) Write(p []byte) (int, error) {
	h.writes++
	buf := append(h.tail, p...)
	h.rows += bytes.Count(buf, []byte("\n| case-"))
	h.tail = append(h.tail[:0], buf[max(0, len(buf)-8):]...)
	if h.writes%16 == 1 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		h.maxLive = max(h.maxLive, ms.HeapAlloc)
	}
	return len(p), nil
}

// TestRenderStream_LargerThanOneDocument: a stream over 16 MiB (one
// document's bound, so `adk eval report` refused it before) renders as
// markdown, junit and sarif while the live heap stays far below the
// stream's size: memory is one case plus 24 bytes a sample of index
// (html: one page, itself within the bound).
// The samples are padded so the stream is large with few lines (the test
// runs under -race in CI).
func TestRenderStream_LargerThanOneDocument(t *testing.T) {
	const n = 500
	path, failed := bigStream(t, n, 17500)
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	info, _ := file.Stat()
	if info.Size() <= evalengine.MaxExportBytes {
		t.Fatalf("the stream is only %d bytes", info.Size())
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	f, err := evalengine.OpenStreamFile(file, info.Size())
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range evalengine.StreamFormats() {
		w := &heapWatcher{}
		if err := evalengine.RenderStream(w, f, format, evalengine.ExportOptions{}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if grown := int64(w.maxLive) - int64(base.HeapAlloc); grown > info.Size()/8 {
			t.Fatalf("%s: live heap grew by %d bytes rendering a %d-byte stream", format, grown, info.Size())
		}
		if format == evalengine.FormatMarkdown && w.rows != n {
			t.Fatalf("markdown has %d case rows, want %d", w.rows, n)
		}
	}
	var out bytes.Buffer
	if err := evalengine.RenderStream(&out, f, evalengine.FormatSARIF, evalengine.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			Results []json.RawMessage `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Runs) != 1 || len(doc.Runs[0].Results) != failed {
		t.Fatalf("sarif is not one document with %d results: %v", failed, err)
	}
}

// TestRenderStream_HTMLPage: html of a stream over one page (MaxBytes,
// lowered here as the 16 MiB default is in use) is one page within the
// bound: the failed cases first, in case order, then passed ones as they
// fit, under a note with the counts; when not even every failed case
// fits, no passed case is shown.
func TestRenderStream_HTMLPage(t *testing.T) {
	const n = 200
	path, failed := bigStream(t, n, 0)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := renderStreamBytes(t, data, evalengine.FormatHTML)
	if err != nil || bytes.Contains(whole, []byte(`class="paged"`)) {
		t.Fatalf("a result that fits is paged: %v", err)
	}
	f, err := evalengine.OpenStreamFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	rowRE := regexp.MustCompile(`<tr><td><a href="#case-(\d+)">case-\d+</a></td><td><span class="badge (\w+)">`)
	for _, tc := range []struct {
		name      string
		max       int
		allFailed bool
	}{{"room for some passed", len(whole) / 2, true}, {"not every failed", len(whole) / 12, false}} {
		var out bytes.Buffer
		if err := evalengine.RenderStream(&out, f, evalengine.FormatHTML, evalengine.ExportOptions{MaxBytes: tc.max}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		page := out.String()
		if len(page) > tc.max || !strings.HasSuffix(page, "</html>\n") {
			t.Fatalf("%s: %d bytes (bound %d), ends %q", tc.name, len(page), tc.max, page[max(0, len(page)-20):])
		}
		rows := rowRE.FindAllStringSubmatch(page, -1)
		details := strings.Count(page, "<details id=")
		shownFailed, lastFailed, lastPassed := 0, -1, -1
		for _, r := range rows {
			i, _ := strconv.Atoi(r[1])
			if r[2] == "passed" {
				if i < lastPassed {
					t.Fatalf("%s: passed cases out of order", tc.name)
				}
				lastPassed = i
				continue
			}
			if lastPassed >= 0 || i < lastFailed {
				t.Fatalf("%s: failed case %d after a passed one or out of order", tc.name, i)
			}
			lastFailed = i
			shownFailed++
		}
		if details != len(rows) || len(rows) == 0 || len(rows) >= n {
			t.Fatalf("%s: %d rows, %d details of %d cases", tc.name, len(rows), details, n)
		}
		if tc.allFailed != (shownFailed == failed) || (!tc.allFailed && lastPassed >= 0) {
			t.Fatalf("%s: %d of %d failed shown, passed shown: %t", tc.name, shownFailed, failed, lastPassed >= 0)
		}
		note := fmt.Sprintf("This page shows %d of %d cases</strong>", len(rows), n)
		if !strings.Contains(page, note) || !strings.Contains(page, fmt.Sprintf("(%d of %d shown)", shownFailed, failed)) || !strings.Contains(page, "adk eval report RESULT.jsonl --format markdown") {
			t.Fatalf("%s: the note is missing or wrong (want %q)", tc.name, note)
		}
	}
}

// FuzzOpenStreamFile holds the indexed stream reader to its contract on
// any input: no panic, a typed error or a stream that renders in every
// streamed format; and when the whole-result reader accepts the same
// input, the streamed report is exactly the document renderer's.
func FuzzOpenStreamFile(f *testing.F) {
	good, err := os.ReadFile(filepath.Join("testdata", "golden", "result.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(shuffleSamples(good))
	f.Add(good[:len(good)/2])
	f.Add([]byte(`{"type":"header","format":"adk-eval-stream","version":1,"eval_set_id":"s","eval_set_version":"1","case_count":0,"sample_count":1,"digests":{}}` + "\n"))
	f.Add([]byte("{}\n{}\n"))
	// Values the checks read by JSON type only (streamscan.go), given
	// the wrong one, and a case line with samples.
	f.Add(bytes.Replace(good, []byte(`"metadata":{}`), []byte(`"metadata":"x"`), 1))
	f.Add(bytes.Replace(good, []byte(`"turn_id":`), []byte(`"events":{},"turn_id":`), 1))
	f.Add(bytes.Replace(good, []byte(`"turn_id":`), []byte(`"events":[{"a":null}],"turn_id":`), -1))
	f.Add(bytes.Replace(good, []byte(`"samples":null`), []byte(`"samples":[]`), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := evalengine.OpenStreamFile(bytes.NewReader(data), int64(len(data)))
		// The comparison side's reader (no index) accepts exactly the
		// same streams, and reads the same side.
		rs, rerr := evalengine.ReadStreamSide(bytes.NewReader(data))
		if (err == nil) != (rerr == nil) || rerr != nil && evalengine.ErrorCode(rerr) != evalengine.CodeInvalidEvalStream {
			t.Fatalf("OpenStreamFile: %v; ReadStreamSide: %v", err, rerr)
		}
		if err != nil {
			if evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalStream {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if ss, err := evalengine.StreamSide(sf); err == nil && sf.Summary.ResultSchemaVersion == evalengine.ResultSchemaVersion {
			a, aerr := evalengine.CompareSides(ss, rs, evalengine.CompareOptions{})
			b, berr := evalengine.CompareSides(rs, ss, evalengine.CompareOptions{})
			if aerr != nil || berr != nil || !a.Passed || !b.Passed {
				t.Fatalf("a stream's two sides differ: %v %v %+v", aerr, berr, a)
			}
		}
		var whole *evalengine.Result
		if st, err := evalengine.ReadStream(bytes.NewReader(data)); err == nil {
			whole, _ = evalengine.StreamToResult(st)
		}
		for _, format := range evalengine.StreamFormats() {
			var out bytes.Buffer
			err := evalengine.RenderStream(&out, sf, format, evalengine.ExportOptions{})
			if err != nil {
				if evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalStream {
					t.Fatalf("%s: untyped error %v", format, err)
				}
				continue
			}
			if whole == nil {
				continue
			}
			if want, err := evalengine.Render(whole, format, evalengine.ExportOptions{}); err == nil && !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("%s: streamed report differs from Render", format)
			}
		}
	})
}
