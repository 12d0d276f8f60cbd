package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
)

// fakeOpenAI is an OpenAI-compatible chat server that answers "echo: " +
// the last user message and counts the calls it answered per input. With
// blockAfter > 0 it answers that many calls and then holds every further
// request until the client goes away (those count as not answered: the
// provider was never paid for them).
type fakeOpenAI struct {
	srv        *httptest.Server
	mu         sync.Mutex
	answered   map[string]int
	blockAfter int
	blocked    int
	total      int
}

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	f := &fakeOpenAI{answered: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	input := ""
	for _, m := range req.Messages {
		if m.Role == "user" && m.Content != nil {
			input = *m.Content
		}
	}
	f.mu.Lock()
	if f.blockAfter > 0 && f.total >= f.blockAfter {
		f.blocked++
		f.mu.Unlock()
		<-r.Context().Done()
		f.mu.Lock()
		f.blocked--
		f.mu.Unlock()
		return
	}
	f.total++
	f.answered[input]++
	f.mu.Unlock()
	content, _ := json.Marshal("echo: " + input)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"x","model":"m","choices":[{"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`, content)
}

func (f *fakeOpenAI) snapshot() (answered map[string]int, total, blocked int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.answered))
	for k, v := range f.answered {
		out[k] = v
	}
	return out, f.total, f.blocked
}

func (f *fakeOpenAI) reset(blockAfter int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answered, f.total, f.blockAfter = map[string]int{}, 0, blockAfter
}

// echoSet is n cases whose expected answer is the fake's echo.
func echoSet(n int) string {
	var b strings.Builder
	b.WriteString(`{"id":"echo","version":"1","cases":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":"c%d","input":"in %d","expected":"echo: in %d"}`, i, i, i)
	}
	b.WriteString("]}")
	return b.String()
}

// resultWithoutTimings decodes a result file and zeroes its timings and
// its run identity (every run traces under new run and trace ids).
func resultWithoutTimings(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := evalengine.DecodeResult(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	r.DurationMS = 0
	for ci := range r.Cases {
		r.Cases[ci].DurationMS = 0
		for si := range r.Cases[ci].Samples {
			s := &r.Cases[ci].Samples[si]
			s.DurationMS, s.TraceID = 0, ""
			for ti := range s.Turns {
				s.Turns[ti].AdapterMetadata["runtime_latency_ms"] = 0
				s.Turns[ti].RunID, s.Turns[ti].TraceID = "", ""
			}
		}
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestEvalRun_ResumeAfterSIGINT interrupts a run mid-way with SIGINT,
// resumes it from its journal, and checks the promise: every
// sample was paid for exactly once over both runs, and the result is the
// uninterrupted run's apart from timings.
func TestEvalRun_ResumeAfterSIGINT(t *testing.T) {
	t.Parallel()
	const cases, samples, stopAt = 30, 2, 23
	fake := newFakeOpenAI(t)
	dir := t.TempDir()
	writeFile(t, dir, "set.json", echoSet(cases))
	writeFile(t, dir, "agent.json", `{"schema_version":1,"name":"a","model":{"provider":"openai","model":"m","base_url":"`+fake.srv.URL+`","max_attempts":1}}`)
	args := []string{"eval", "run", "--config", "agent.json", "--eval-set", "set.json", "--samples", "2", "--concurrency", "4"}

	// The uninterrupted run, for reference.
	r := runADK(t, dir, nil, append(args, "--output", "full.json")...)
	if r.code != exitOK {
		t.Fatalf("reference run: exit %d, stderr %q", r.code, r.stderr)
	}
	noFilesBut(t, dir, "set.json", "agent.json", "full.json")

	fake.reset(stopAt)
	cmd := exec.Command(adkBinary(t), append(args, "--output", "out.json")...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the provider to hold calls after the first ones", func() bool {
		_, total, blocked := fake.snapshot()
		return total == stopAt && blocked > 0
	})
	// Every answered sample is journaled (the journal writes out a batch
	// within 200 ms): an answer still in flight at SIGINT would be paid
	// twice, rightly, since its sample never finished.
	testutil.WaitFor(t, 30*time.Second, "the answered samples in the journal", func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "out.json"+journalSuffix))
		return bytes.Count(data, []byte("\n")) == stopAt+1
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitError {
		t.Fatalf("interrupted run: %v, stderr %q", err, errb.String())
	}
	journal := "out.json" + journalSuffix
	lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "adk: interrupted after ") || !strings.Contains(lines[0], fmt.Sprintf(" of %d samples", cases*samples)) ||
		lines[1] != "adk: journal "+journal+"; continue with the same flags and --resume "+journal ||
		lines[2] != "adk: evaluation_failed: evaluation_cancelled" {
		t.Fatalf("stderr %q", errb.String())
	}
	if out.Len() != 0 {
		t.Fatalf("stdout %q", out.String())
	}
	noFilesBut(t, dir, "set.json", "agent.json", "full.json", journal)

	// A fresh run does not overwrite the journal.
	r = runADK(t, dir, nil, append(args, "--output", "out.json")...)
	oneErrorLine(t, r, codeJournalExists)
	// Another criteria file, set or sample count is refused by digest.
	writeFile(t, dir, "criteria.json", `{"criteria":[{"id":"response","criterion":"exact_response","threshold":0.5}]}`)
	r = runADK(t, dir, nil, append(args, "--output", "out.json", "--resume", journal, "--criteria", "criteria.json")...)
	oneErrorLine(t, r, codeJournalMismatch+": criteria")
	r = runADK(t, dir, nil, "eval", "run", "--config", "agent.json", "--eval-set", "set.json", "--samples", "3", "--output", "out.json", "--resume", journal)
	oneErrorLine(t, r, codeJournalMismatch+": options")
	writeFile(t, dir, "other.json", echoSet(cases+1))
	r = runADK(t, dir, nil, "eval", "run", "--config", "agent.json", "--eval-set", "other.json", "--samples", "2", "--output", "out.json", "--resume", journal)
	oneErrorLine(t, r, codeJournalMismatch+": eval_set")
	writeFile(t, dir, "broken.jsonl", `{"type":"header"}`+"\n")
	r = runADK(t, dir, nil, append(args, "--resume", "broken.jsonl")...)
	oneErrorLine(t, r, codeInvalidJournal)
	_ = os.Remove(filepath.Join(dir, "broken.jsonl"))
	_ = os.Remove(filepath.Join(dir, "other.json"))
	_ = os.Remove(filepath.Join(dir, "criteria.json"))

	// Resume: only the unfinished samples are paid for.
	fake.mu.Lock()
	fake.blockAfter = 0
	fake.mu.Unlock()
	r = runADK(t, dir, nil, append(args, "--output", "out.json", "--resume", journal)...)
	if r.code != exitOK {
		t.Fatalf("resumed run: exit %d, stderr %q", r.code, r.stderr)
	}
	answered, total, _ := fake.snapshot()
	if total != cases*samples {
		t.Errorf("provider answered %d calls over both runs, want %d (one per sample)", total, cases*samples)
	}
	for i := range cases {
		if n := answered[fmt.Sprintf("in %d", i)]; n != samples {
			t.Errorf("input %d answered %d times, want %d", i, n, samples)
		}
	}
	noFilesBut(t, dir, "set.json", "agent.json", "full.json", "out.json")
	if a, b := resultWithoutTimings(t, filepath.Join(dir, "full.json")), resultWithoutTimings(t, filepath.Join(dir, "out.json")); a != b {
		t.Fatalf("resumed result differs from the uninterrupted run: %s", firstDiff(a, b))
	}
}

// TestEvalRun_JSONLStreams runs a set above the old 1,000-case bound with
// --format jsonl: stdout is the sample stream, it decodes to the result
// the json format gives, and with --output the file holds the same bytes
// and no journal is left.
func TestEvalRun_JSONLStreams(t *testing.T) {
	t.Parallel()
	const cases = 1500
	dir := t.TempDir()
	writeFile(t, dir, "set.json", echoSet(cases))
	writeFile(t, dir, "agent.json", `{"schema_version":1,"name":"a","model":{"provider":"scripted","rules":[{"match":{"contains":"in 1"},"steps":[{"text":"echo: in 1"}]}],"default":{"steps":[{"text":"echo: in 0"}]}}}`)
	args := []string{"eval", "run", "--config", "agent.json", "--eval-set", "set.json", "--concurrency", "8", "--pass-rate-threshold", "0"}
	ref := runADK(t, dir, nil, append(args, "--format", "json", "--output", "ref.json")...)
	if ref.code != exitOK {
		t.Fatalf("json run: exit %d %q", ref.code, ref.stderr)
	}
	r := runADK(t, dir, nil, append(args, "--format", "jsonl")...)
	if r.code != exitOK {
		t.Fatalf("jsonl run: exit %d %q", r.code, r.stderr)
	}
	st, err := evalengine.ReadStream(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	if st.Header.Digests["eval_set"] == "" || len(st.Samples) != cases || st.Summary == nil {
		t.Fatalf("stream: header %+v, %d samples, summary %v", st.Header, len(st.Samples), st.Summary != nil)
	}
	back, err := evalengine.StreamToResult(st)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(back)
	writeFile(t, dir, "back.json", string(data))
	if a, b := resultWithoutTimings(t, filepath.Join(dir, "ref.json")), resultWithoutTimings(t, filepath.Join(dir, "back.json")); a != b {
		t.Fatalf("the jsonl stream decodes to another result than the json report: %s", firstDiff(a, b))
	}

	r = runADK(t, dir, nil, append(args, "--format", "jsonl", "--output", "out.jsonl")...)
	if r.code != exitOK {
		t.Fatalf("jsonl --output: exit %d %q", r.code, r.stderr)
	}
	file, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if err != nil || string(file) != r.stdout {
		t.Fatalf("file and stdout differ (%v)", err)
	}
	noFilesBut(t, dir, "set.json", "agent.json", "ref.json", "back.json", "out.jsonl")
	// The complete stream renders again without running anything.
	r = runADK(t, dir, nil, append(args, "--format", "markdown", "--resume", "out.jsonl")...)
	if r.code != exitOK || !strings.Contains(r.stdout, "# Evaluation report") {
		t.Fatalf("re-render: exit %d %q", r.code, r.stderr)
	}
}

// firstDiff shows where two documents part.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-150)
	return fmt.Sprintf("at byte %d:\n%s\n%s", i, a[lo:min(len(a), i+80)], b[lo:min(len(b), i+80)])
}

// A local run's digests are made once, when first needed; a cluster run
// (no digestInputs) has none; a failure to make them is the run's error.
func TestFillDigests_OnceWhenNeeded(t *testing.T) {
	var f evalRunFlags
	if err := f.fillDigests(); err != nil || f.digests != nil {
		t.Fatalf("no inputs: %v, %v", f.digests, err)
	}
	calls := 0
	f.digestInputs = func() (map[string]string, error) {
		calls++
		return map[string]string{"eval_set": "sha256:x"}, nil
	}
	for range 2 {
		if err := f.fillDigests(); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 || f.digests["eval_set"] != "sha256:x" {
		t.Fatalf("%d calls, digests %v; want 1 call", calls, f.digests)
	}
	failing := evalRunFlags{digestInputs: func() (map[string]string, error) { return nil, errors.New("boom") }}
	if err := failing.fillDigests(); err == nil || failing.digests != nil {
		t.Fatalf("failing inputs: %v, %v", failing.digests, err)
	}
}
