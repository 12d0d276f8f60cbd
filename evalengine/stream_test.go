package evalengine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// countingAdapter echoes every turn, counting sessions per sample id.
type countingAdapter struct {
	mu     sync.Mutex
	calls  map[string]int
	before func() // called in every NewSession, e.g. to cancel mid-run
}

func (a *countingAdapter) NewSession(ctx context.Context, info evalengine.SampleInfo) (evalengine.Session, error) {
	a.mu.Lock()
	if a.calls == nil {
		a.calls = map[string]int{}
	}
	a.calls[info.SampleID]++
	f := a.before
	a.mu.Unlock()
	if f != nil {
		f()
	}
	return &echoSession{}, nil
}

type echoSession struct{}

func (echoSession) Turn(ctx context.Context, in evalengine.TurnInput) (evalengine.TurnOutput, error) {
	if err := ctx.Err(); err != nil {
		return evalengine.TurnOutput{}, err
	}
	return evalengine.TurnOutput{Output: in.Input}, nil
}
func (echoSession) Close() error { return nil }

func streamSet(t *testing.T, n int) *evalengine.Set {
	var b strings.Builder
	b.WriteString(`{"id":"s","version":"1","cases":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		out := "in" + itoa(i)
		if i%3 == 0 {
			out = "other"
		}
		b.WriteString(`{"id":"c` + itoa(i) + `","input":"in` + itoa(i) + `","expected":"` + out + `"}`)
	}
	b.WriteString(`]}`)
	return mustSet(t, b.String())
}

// zeroTimings clears every duration so two runs compare equal.
func zeroTimings(r *evalengine.Result) {
	r.DurationMS = 0
	for ci := range r.Cases {
		r.Cases[ci].DurationMS = 0
		for si := range r.Cases[ci].Samples {
			s := &r.Cases[ci].Samples[si]
			s.DurationMS = 0
			for ti := range s.Turns {
				s.Turns[ti].AdapterMetadata["runtime_latency_ms"] = 0
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRun_ResumeFromStream interrupts a run, keeps its journal as a
// stream, resumes from it and gets the uninterrupted result; no sample
// runs twice.
func TestRun_ResumeFromStream(t *testing.T) {
	set := streamSet(t, 40)
	o := opts(func(o *evalengine.Options) { o.Samples = 3; o.Concurrency = 4 })
	metrics := evalengine.DefaultCriteria()

	full, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: metrics, Options: o})
	if err != nil {
		t.Fatal(err)
	}

	var journal bytes.Buffer
	hdr := evalengine.NewStreamHeader(set, o.Samples, map[string]string{"eval_set": "x"})
	sw, err := evalengine.NewStreamWriter(&journal, &hdr, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &countingAdapter{}
	var mu sync.Mutex
	n := 0
	a.before = func() {
		mu.Lock()
		defer mu.Unlock()
		if n++; n == 50 {
			cancel()
		}
	}
	_, err = evalengine.Run(ctx, set, evalengine.RunConfig{Adapter: a, Metrics: metrics, Options: o,
		OnSample: func(ci int, s *evalengine.SampleResult) {
			if err := sw.WriteSample(ci, s); err != nil {
				t.Error(err)
			}
		}})
	wantCode(t, err, evalengine.CodeEvaluationCancelled)
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	st, err := evalengine.ReadStream(bytes.NewReader(journal.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Samples) == 0 || len(st.Samples) >= 120 {
		t.Fatalf("journal holds %d samples", len(st.Samples))
	}
	if st.Header.Digests["eval_set"] != "x" || st.Summary != nil {
		t.Fatalf("header %+v summary %v", st.Header, st.Summary)
	}

	sw2, err := evalengine.NewStreamWriter(&journal, nil, st.Size, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := &countingAdapter{}
	got, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: b, Metrics: metrics, Options: o,
		Finished: st.Samples,
		OnSample: func(ci int, s *evalengine.SampleResult) { _ = sw2.WriteSample(ci, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := sw2.WriteSummary(got); err != nil {
		t.Fatal(err)
	}
	for id, c := range b.calls {
		if c != 1 {
			t.Fatalf("sample %s ran %d times on resume", id, c)
		}
	}
	for _, s := range st.Samples {
		if b.calls[s.Sample.SampleID] != 0 {
			t.Fatalf("finished sample %s ran again", s.Sample.SampleID)
		}
	}
	if len(b.calls)+len(st.Samples) != 120 {
		t.Fatalf("resume ran %d + journal %d samples, want 120", len(b.calls), len(st.Samples))
	}
	zeroTimings(full)
	zeroTimings(got)
	if mustJSON(t, full) != mustJSON(t, got) {
		t.Fatalf("resumed result differs from the uninterrupted one")
	}

	// The completed journal is a whole stream: it decodes to the result.
	st2, err := evalengine.ReadStream(bytes.NewReader(journal.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	back, err := evalengine.StreamToResult(st2)
	if err != nil {
		t.Fatal(err)
	}
	zeroTimings(back)
	if mustJSON(t, back) != mustJSON(t, full) {
		t.Fatalf("stream decodes to a different result")
	}
}

func TestRun_FinishedChecked(t *testing.T) {
	set := streamSet(t, 2)
	s := evalengine.ErrorSample(set, 0, 0, "timeout")
	s.SampleID = "sample-forged"
	_, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: evalengine.DefaultCriteria(),
		Options: opts(nil), Finished: []evalengine.StreamSample{{CaseIndex: 0, Sample: s}}})
	wantCode(t, err, evalengine.CodeInvalidSampleResults)
}

// TestStream_Decoding covers the format's strictness: a writer's output
// reads back; every corruption is invalid_eval_stream, never a result.
func TestStream_Decoding(t *testing.T) {
	set := streamSet(t, 5)
	o := opts(nil)
	var buf bytes.Buffer
	hdr := evalengine.NewStreamHeader(set, 1, nil)
	sw, _ := evalengine.NewStreamWriter(&buf, &hdr, 0, 0)
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: evalengine.DefaultCriteria(), Options: o,
		OnSample: func(ci int, s *evalengine.SampleResult) { _ = sw.WriteSample(ci, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.WriteSummary(r); err != nil {
		t.Fatal(err)
	}
	good := buf.String()
	st, err := evalengine.ReadStream(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	back, err := evalengine.StreamToResult(st)
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, back) != mustJSON(t, r) {
		t.Fatal("round trip differs")
	}
	lines := strings.SplitAfter(good, "\n")
	lines = lines[:len(lines)-1]

	// A journal cut mid-line (a crash) reads, without the torn line.
	torn := strings.Join(lines[:3], "") + lines[3][:20]
	st, err = evalengine.ReadStream(strings.NewReader(torn))
	if err != nil || !st.Truncated || len(st.Samples) != 2 || st.Size != int64(len(strings.Join(lines[:3], ""))) {
		t.Fatalf("torn: %v %+v", err, st)
	}
	if _, err := evalengine.StreamToResult(st); evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalStream {
		t.Fatalf("incomplete stream to result: %v", err)
	}

	for name, doc := range map[string]string{
		"no header":       strings.Join(lines[1:], ""),
		"bad json":        lines[0] + "{\n",
		"unknown type":    lines[0] + `{"type":"other"}` + "\n",
		"duplicate":       lines[0] + lines[1] + lines[1],
		"after summary":   good + lines[1],
		"forged status":   lines[0] + strings.Replace(lines[1], `"status":"passed"`, `"status":"failed"`, 1),
		"forged id":       lines[0] + strings.Replace(lines[1], `"sample_id":"sample-`, `"sample_id":"sample-0`, 1),
		"out of range":    lines[0] + strings.Replace(lines[1], `"case_index":`, `"case_index":9`, 1),
		"unknown key":     lines[0] + strings.Replace(lines[1], `{"type":"sample",`, `{"type":"sample","x":1,`, 1),
		"wrong version":   strings.Replace(lines[0], `"version":1`, `"version":2`, 1),
		"forged summary":  strings.Join(lines[:len(lines)-1], "") + strings.Replace(lines[len(lines)-1], `"passed_case_count":`, `"passed_case_count":1`, 1),
		"empty":           "",
		"header only bad": `{"type":"header"}` + "\n",
	} {
		st, err := evalengine.ReadStream(strings.NewReader(doc))
		if err == nil {
			_, err = evalengine.StreamToResult(st)
		}
		if evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalStream {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestStreamWriter_Bound stops a journal at its byte bound without a
// partial line.
func TestStreamWriter_Bound(t *testing.T) {
	set := streamSet(t, 3)
	var buf bytes.Buffer
	hdr := evalengine.NewStreamHeader(set, 1, nil)
	sw, err := evalengine.NewStreamWriter(&buf, &hdr, 0, 600)
	if err != nil {
		t.Fatal(err)
	}
	var full error
	for i := range 3 {
		s := evalengine.ErrorSample(set, i, 0, "timeout")
		if err := sw.WriteSample(i, &s); err != nil {
			full = err
			break
		}
	}
	if full != evalengine.ErrStreamFull {
		t.Fatalf("want ErrStreamFull, got %v (%d bytes)", full, buf.Len())
	}
	_ = sw.Flush()
	if buf.Len() > 600 || !strings.HasSuffix(buf.String(), "\n") {
		t.Fatalf("%d bytes, tail %q", buf.Len(), buf.String()[max(0, buf.Len()-10):])
	}
	if _, err := evalengine.ReadStream(&buf); err != nil {
		t.Fatal(err)
	}
}

// writerOnly hides a destination's type: a stream into it is batched.
type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(b []byte) (int, error) { return w.w.Write(b) }

// TestStreamWriter_IntoMemoryLikeIntoAWriter writes the same lines into a
// bytes.Buffer (each line straight into it) and into a writer of another
// type (batched): the bytes and every error are the same, with and
// without a byte bound, a line filter and a line over the line bound.
func TestStreamWriter_IntoMemoryLikeIntoAWriter(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "result.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := evalengine.ReadStream(bytes.NewReader(golden))
	if err != nil {
		t.Fatal(err)
	}
	r, err := evalengine.StreamToResult(st)
	if err != nil {
		t.Fatal(err)
	}
	huge := st.Samples[0].Sample
	huge.Error = strings.Repeat("x", evalengine.MaxStreamLineBytes)
	write := func(w io.Writer, maxBytes int64, filter bool) []string {
		var errs []string
		note := func(err error) {
			if err != nil {
				errs = append(errs, err.Error())
			}
		}
		sw, err := evalengine.NewStreamWriter(w, &st.Header, 0, maxBytes)
		note(err)
		if sw == nil {
			return errs
		}
		if filter {
			sw.SetLineFilter(func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("passed"), []byte("PASSED")) })
		}
		for i, s := range st.Samples {
			note(sw.WriteSample(s.CaseIndex, &s.Sample))
			if i == 0 {
				note(sw.WriteSample(0, &huge))
			}
		}
		note(sw.WriteSummary(r))
		note(sw.Flush())
		errs = append(errs, strconv.FormatInt(sw.Written(), 10))
		return errs
	}
	for _, tc := range []struct {
		name     string
		maxBytes int64
		filter   bool
	}{{"unbounded", 0, false}, {"bounded", int64(len(golden) / 2), false}, {"filtered", 0, true}, {"filtered, bounded", int64(len(golden) / 3), true}} {
		t.Run(tc.name, func(t *testing.T) {
			var mem, batched bytes.Buffer
			memErrs := write(&mem, tc.maxBytes, tc.filter)
			batchedErrs := write(writerOnly{&batched}, tc.maxBytes, tc.filter)
			if !bytes.Equal(mem.Bytes(), batched.Bytes()) {
				t.Fatalf("into memory:\n%s\nbatched:\n%s", mem.Bytes(), batched.Bytes())
			}
			if !slices.Equal(memErrs, batchedErrs) {
				t.Fatalf("errors and size into memory %q, batched %q", memErrs, batchedErrs)
			}
			if len(memErrs) < 2 || !strings.Contains(memErrs[0], "line_too_large") {
				t.Fatalf("errors %q: want the huge line refused first", memErrs)
			}
			if tc.maxBytes > 0 && (int64(mem.Len()) > tc.maxBytes || !strings.Contains(strings.Join(memErrs, " "), evalengine.ErrStreamFull.Error())) {
				t.Fatalf("%d bytes with a bound of %d, errors %q", mem.Len(), tc.maxBytes, memErrs)
			}
			if tc.maxBytes == 0 && !tc.filter && !bytes.Equal(mem.Bytes(), golden) {
				t.Fatalf("the stream rewritten differs from the one read:\n%s\n%s", mem.Bytes(), golden)
			}
		})
	}
}

// FuzzReadStream holds the stream reader to its contract on any input: no
// panic, and whatever it accepts either rebuilds a result that renders as
// a stream again or is refused with invalid_eval_stream.
func FuzzReadStream(f *testing.F) {
	good, err := os.ReadFile(filepath.Join("testdata", "golden", "result.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(`{"type":"header","format":"adk-eval-stream","version":1,"eval_set_id":"s","eval_set_version":"1","case_count":1,"sample_count":1,"digests":{}}` + "\n"))
	f.Add([]byte("{}\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := evalengine.ReadStream(bytes.NewReader(data))
		if err != nil {
			if evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalStream {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if st.Size > int64(len(data)) {
			t.Fatalf("size %d > input %d", st.Size, len(data))
		}
		r, err := evalengine.StreamToResult(st)
		if err != nil {
			if evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalStream {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if _, err := evalengine.Render(r, evalengine.FormatJSONL, evalengine.ExportOptions{}); err != nil {
			t.Fatalf("accepted stream does not render: %v", err)
		}
	})
}

// TestRun_DropSamples streams every sample out and keeps only case
// aggregates: the stream decodes to the result a normal run gives.
func TestRun_DropSamples(t *testing.T) {
	set := streamSet(t, 50)
	o := opts(func(o *evalengine.Options) { o.Samples = 3; o.Concurrency = 8; o.SampleConcurrency = 2 })
	metrics := evalengine.DefaultCriteria()
	full, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: metrics, Options: o})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	hdr := evalengine.NewStreamHeader(set, o.Samples, nil)
	sw, _ := evalengine.NewStreamWriter(&buf, &hdr, 0, 0)
	sum, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: metrics, Options: o,
		DropSamples: true, OnSample: func(ci int, s *evalengine.SampleResult) { _ = sw.WriteSample(ci, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Cases != nil {
		t.Fatal("a dropped-samples result kept case results (they are kept compactly until WriteSummary)")
	}
	if _, err := evalengine.Render(sum, evalengine.FormatJSON, evalengine.ExportOptions{}); err == nil {
		t.Fatal("rendered a result without samples as a document")
	}
	if err := sw.WriteSummary(sum); err != nil {
		t.Fatal(err)
	}
	st, err := evalengine.ReadStream(&buf)
	if err != nil {
		t.Fatal(err)
	}
	back, err := evalengine.StreamToResult(st)
	if err != nil {
		t.Fatal(err)
	}
	zeroTimings(full)
	zeroTimings(back)
	if mustJSON(t, full) != mustJSON(t, back) {
		t.Fatal("streamed result differs from the normal run's")
	}
	_, err = evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: metrics, Options: o, DropSamples: true})
	wantCode(t, err, evalengine.CodeInvalidEvalOptions)
}

// TestRun_DropSamplesMemoryPerCaseIsConstant is the unit check of issue
// 19: with samples streamed out, allocations per case do not grow with
// the number of cases (the same count and bytes per case at 500 and 4,000
// cases, within 25 %), so the run's memory is the aggregates, O(1) each.
func TestRun_DropSamplesMemoryPerCaseIsConstant(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation measurement")
	}
	perCase := func(n int) (allocs, bytes float64) {
		set := streamSet(t, n)
		o := opts(func(o *evalengine.Options) { o.Concurrency = 4 })
		rc := evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: evalengine.DefaultCriteria(), Options: o,
			DropSamples: true, OnSample: func(int, *evalengine.SampleResult) {}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := evalengine.Run(context.Background(), set, rc); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / float64(n), float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
	}
	perCase(200) // warm up
	a1, b1 := perCase(500)
	a2, b2 := perCase(4000)
	t.Logf("per case: %.1f allocs, %.0f B at 500 cases; %.1f allocs, %.0f B at 4,000", a1, b1, a2, b2)
	if a2 > a1*1.25 || b2 > b1*1.25 {
		t.Fatalf("allocations per case grow with the set: %.1f -> %.1f allocs, %.0f -> %.0f B", a1, a2, b1, b2)
	}
}

// TestRun_DropSamplesKeepsCasesCompactly bounds what a dropped-samples
// run keeps per case until its summary is written (issue 19: a
// 100,000-case run's peak memory was its per-case results, about 670 B
// each with their per-metric maps): the heap the result holds, per case.
func TestRun_DropSamplesKeepsCasesCompactly(t *testing.T) {
	if testing.Short() {
		t.Skip("heap measurement")
	}
	const n = 20_000
	set := streamSet(t, n)
	o := opts(func(o *evalengine.Options) { o.Concurrency = 4 })
	rc := evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: evalengine.DefaultCriteria(), Options: o,
		DropSamples: true, OnSample: func(int, *evalengine.SampleResult) {}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := evalengine.Run(context.Background(), set, rc)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perCase := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
	t.Logf("the result holds %.0f B per case (%d metrics)", perCase, len(rc.Metrics))
	if perCase > 400 {
		t.Fatalf("a dropped-samples result holds %.0f B per case, want at most 400", perCase)
	}
	var buf bytes.Buffer
	hdr := evalengine.NewStreamHeader(set, o.Samples, nil)
	sw, _ := evalengine.NewStreamWriter(&buf, &hdr, 0, 0)
	if err := sw.WriteSummary(r); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(buf.Bytes(), []byte(`{"type":"case",`)); got != n {
		t.Fatalf("the summary wrote %d case lines, want %d", got, n)
	}
}
