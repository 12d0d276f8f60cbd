package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
)

// bigTravelSet writes the travel set with its cases repeated copies times
// (new ids), so that many samples give a result of over 1 MiB.
func bigTravelSet(t *testing.T, copies int) string {
	t.Helper()
	data, err := os.ReadFile(travelSet)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	cases := doc["cases"].([]any)
	var all []any
	for i := range copies {
		for _, c := range cases {
			b, _ := json.Marshal(c)
			var cp map[string]any
			_ = json.Unmarshal(b, &cp)
			cp["id"] = cp["id"].(string) + "-" + string(rune('a'+i))
			all = append(all, cp)
		}
	}
	doc["cases"] = all
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, t.TempDir(), "big.json", string(out))
}

// TestClusterEvalLargeResult: a job whose result is larger than the NATS
// server's max_payload (1 MiB) is fetched in pages by `adk eval run
// --cluster` (same report as the local run) and `adk eval result`, and the
// client reassembles the same bytes whatever the page size.
func TestClusterEvalLargeResult(t *testing.T) {
	url := startEvalCluster(t)
	set := bigTravelSet(t, 2)
	args := []string{"--eval-set", set, "--criteria", travelCriteria, "--samples", "60", "--capture-tool-content", "true",
		"--timeout", "600000", "--format", "markdown"}
	local := runCLI(t, exitOK, append([]string{"eval", "run", "--config", travelAgent}, args...)...)
	remote := runCLI(t, exitOK, append([]string{"eval", "run", "--cluster", url, "--agent", "travel"}, args...)...)
	if remote != local {
		t.Fatalf("cluster report differs from the local one:\n--- cluster\n%.2000s\n--- local\n%.2000s", remote, local)
	}

	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if mp := nc.MaxPayload(); mp > 1<<20 {
		t.Fatalf("server max_payload %d: the test needs the 1 MiB default", mp)
	}
	cl := client.New(nc, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jobs, err := cl.ListJobs(ctx, "default", 10, "")
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("jobs: %+v %v", jobs, err)
	}
	id := jobs.Items[0].JobID
	whole, err := cl.Result(ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) <= int(nc.MaxPayload()) {
		t.Fatalf("result of %d bytes: not larger than max_payload %d", len(whole), nc.MaxPayload())
	}
	r, err := evalengine.DecodeResult(whole)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Cases) != 8 || r.SampleCount != 60 {
		t.Errorf("result holds %d cases of %d samples, want 8 of 60", len(r.Cases), r.SampleCount)
	}
	small, err := cl.ResultPaged(ctx, "default", id, 64<<10)
	if err != nil || string(small) != string(whole) {
		t.Fatalf("64 KiB pages: %d bytes, %v; want the %d bytes of one default paging", len(small), err, len(whole))
	}
	if out := runCLI(t, exitOK, "eval", "result", id, "--cluster", url); out != string(whole) {
		t.Fatalf("adk eval result printed %d bytes, want %d", len(out), len(whole))
	}
	t.Logf("result: %d bytes", len(whole))
}

// TestClusterEvalResultPagingRefusesBadOffsets: an offset outside the
// document or a negative page size is a typed error.
func TestClusterEvalResultPagingRefusesBadOffsets(t *testing.T) {
	url := startEvalCluster(t)
	runCLI(t, exitOK, "eval", "run", "--cluster", url, "--agent", "travel", "--eval-set", travelSet, "--criteria", travelCriteria, "--format", "markdown")
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl := client.New(nc, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jobs, err := cl.ListJobs(ctx, "default", 10, "")
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("jobs: %+v %v", jobs, err)
	}
	id := jobs.Items[0].JobID
	for _, req := range []struct {
		offset int64
		max    int
	}{{-1, 0}, {1 << 40, 0}, {0, -5}} {
		_, err := cl.Call(ctx, api.OpResult, &api.Request{Scope: "default", JobID: id, Offset: req.offset, MaxBytes: req.max})
		if e := api.AsError(err); e == nil || e.Code != api.CodeInvalidRequest {
			t.Errorf("offset %d max_bytes %d: %v, want invalid_eval_request", req.offset, req.max, err)
		}
	}
}

// TestClusterEvalSubmitOverMaxPayloadIsUploaded: a set just over the
// NATS server's max_payload (24 cases of ~48 KiB, ~1.15 MiB, which one
// submit message cannot carry) is uploaded in parts and runs through
// `adk eval run --cluster` to the same report as the local run; a submit
// naming an upload that is not there, or a part that does not fit its
// upload, is refused with a typed error naming the field, and creates
// nothing.
func TestClusterEvalSubmitOverMaxPayloadIsUploaded(t *testing.T) {
	url := startEvalCluster(t)
	var b strings.Builder
	b.WriteString(`{"schema_version":2,"id":"big","version":"1","cases":[`)
	pad := strings.Repeat("and the sea is calm today ", 48<<10/26)
	for i := range 24 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"c%02d","turns":[{"id":"t","input":"What is the weather in Pune? %s"}]}`, i, pad)
	}
	b.WriteString("]}")
	if b.Len() <= 1<<20 {
		t.Fatalf("the set is %d bytes, not over max_payload", b.Len())
	}
	set := writeFile(t, t.TempDir(), "big.json", b.String())
	// The default criteria fail the cases (no expected response): exit 2,
	// the same report both ways.
	local := runCLI(t, exitFailed, "eval", "run", "--config", travelAgent, "--eval-set", set, "--format", "markdown")
	remote := runCLI(t, exitFailed, "eval", "run", "--cluster", url, "--agent", "travel", "--eval-set", set, "--format", "markdown")
	// Trace ids are random per run.
	traces := regexp.MustCompile(`trace [0-9a-f]{32}`)
	if r, l := traces.ReplaceAllString(remote, "trace T"), traces.ReplaceAllString(local, "trace T"); r != l || !strings.Contains(r, "c23") {
		t.Fatalf("cluster report differs from the local one:\n--- cluster\n%s\n--- local\n%s", r, l)
	}

	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := client.New(nc, 10*time.Second)
	_, err = cl.Submit(ctx, "default", api.SubmitRequest{Agent: "travel", SetUpload: "0123456789abcdef0123456789abcdef"})
	if ae := api.AsError(err); ae == nil || ae.Code != evalrecord.CodeInvalidSetUpload || !strings.Contains(ae.Detail, "set_upload") {
		t.Fatalf("submit of a missing upload: %v", err)
	}
	_, err = cl.Call(ctx, api.OpPutSetPart, &api.Request{Scope: "default", SetPart: &api.SetPart{Upload: "0123456789abcdef0123456789abcdef",
		Part: 0, Parts: 1, Size: 1, Digest: strings.Repeat("0", 64), Data: make([]byte, evalrecord.MaxSetPartBytes+1)}})
	if ae := api.AsError(err); ae == nil || ae.Code != evalrecord.CodeInvalidSetUpload || !strings.Contains(ae.Detail, "data") {
		t.Fatalf("part over the bound: %v", err)
	}
	if jobs, err := cl.ListJobs(ctx, "default", 10, ""); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("jobs: %+v %v (want the one run)", jobs, err)
	}
}

// runCLIErr is runCLI that also returns stderr.
func runCLIErr(t *testing.T, wantCode int, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != wantCode {
		t.Fatalf("adk %s: exit %d (want %d), stderr %q", strings.Join(args, " "), code, wantCode, errb.String())
	}
	return out.String(), errb.String()
}

// TestClusterEval_OverOneDocument: `adk eval run --nats ... --agent` whose
// result is over one document (--max-report-bytes; the coordinator's own
// bound is 16 MiB) reports as a local run over the bound does, from the
// job's stream read page by page: markdown is the local report, kept as
// FILE.jsonl, which adk eval report renders to the same bytes; html is one
// bounded page; json is the stream itself; with --baseline (a jsonl
// baseline) the comparison is the local run's and the verdict too. One
// line on stderr says so; no temporary stream is left behind.
func TestClusterEval_OverOneDocument(t *testing.T) {
	url := startEvalCluster(t)
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	set := []string{"--eval-set", travelSet, "--criteria", travelCriteria, "--samples", "2"}
	local := func(code int, args ...string) string {
		return runCLI(t, code, append(append([]string{"eval", "run", "--config", travelAgent}, set...), args...)...)
	}
	remote := func(code int, args ...string) (string, string) {
		return runCLIErr(t, code, append(append([]string{"eval", "run", "--nats", url, "--agent", "travel"}, set...), args...)...)
	}
	md := local(exitOK, "--format", "markdown")
	out := filepath.Join(dir, "r.md")
	got, stderr := remote(exitOK, "--format", "markdown", "--max-report-bytes", "5000", "--output", out)
	if got != md || !strings.Contains(stderr, "over one 5000-byte document: the markdown report was rendered case by case from its JSON Lines stream; the stream was kept as "+out+".jsonl") {
		t.Fatalf("markdown over the bound: stderr %q\n%s\nwant\n%s", stderr, got, md)
	}
	if again := runCLI(t, exitOK, "eval", "report", out+".jsonl", "--format", "markdown"); again != md {
		t.Fatalf("the kept stream renders differently:\n%s", again)
	}
	page, stderr := remote(exitOK, "--format", "html", "--max-report-bytes", "6000")
	if len(page) > 6000 || !strings.Contains(page, `class="paged"`) || !strings.Contains(stderr, "one page") || !strings.Contains(stderr, "not kept") {
		t.Fatalf("html over the bound: %d bytes, stderr %q", len(page), stderr)
	}
	stream, stderr := remote(exitOK, "--format", "json", "--max-report-bytes", "5000")
	if !strings.HasPrefix(stream, `{"type":"header"`) || !strings.Contains(stderr, "stdout holds it as JSON Lines") {
		t.Fatalf("json over the bound: stderr %q\n%.300s", stderr, stream)
	}
	// A result that fits the bound is the document, as before.
	if doc, stderr := remote(exitOK, "--format", "json"); !strings.HasPrefix(doc, `{"`) || strings.HasPrefix(doc, `{"type"`) || stderr != "" {
		t.Fatalf("json that fits: stderr %q\n%.300s", stderr, doc)
	}

	// --baseline: the comparison of the local run, from the job's stream.
	base := filepath.Join(dir, "base.jsonl")
	local(exitOK, "--format", "jsonl", "--output", base)
	want := local(exitOK, "--format", "json", "--baseline", base)
	got, stderr = remote(exitOK, "--format", "json", "--baseline", base, "--max-report-bytes", "5000")
	if got != want || !strings.Contains(stderr, "the baseline comparison was made from its JSON Lines stream") {
		t.Fatalf("comparison over the bound: stderr %q\n%s\nwant\n%s", stderr, got, want)
	}
	// Without the baseline's criteria the run misses its metrics: a
	// regression, exit 2, the report still out.
	junit, stderr := runCLIErr(t, exitFailed, "eval", "run", "--nats", url, "--agent", "travel", "--eval-set", travelSet, "--samples", "2",
		"--format", "junit", "--baseline", base, "--max-report-bytes", "5000")
	if !strings.Contains(junit, "<testsuite") || !strings.Contains(stderr, "junit report was rendered case by case") {
		t.Fatalf("junit: stderr %q\n%.300s", stderr, junit)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("%d temporary files left", len(left))
	}
}
