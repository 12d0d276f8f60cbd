package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/observability"
)

// publishEvalSpans publishes one sample's spans (run → model) for each
// (case, sample) under job, as alice.
func publishEvalSpans(t *testing.T, url, job string, samples [][2]string) {
	t.Helper()
	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	p, err := bus.NewPublisher(nc, bus.PublisherConfig{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, cs := range samples {
		trace := observability.NewRoot().TraceID.String()
		eval := observability.Attributes{observability.AttrEvalJobID: job, observability.AttrEvalCaseID: cs[0], observability.AttrEvalSampleID: cs[1]}
		with := func(a observability.Attributes) observability.Attributes {
			for k, v := range eval {
				a[k] = v
			}
			return a
		}
		d1, d2 := int64(3_500_000), int64(1_250_000)
		start := int64(1e18) + int64(i)*1e9
		for _, s := range []*observability.SpanSignal{
			{Schema: 2, Signal: "span", Phase: "end", Name: "gen_ai.invoke_agent", Kind: "server", TraceID: trace, SpanID: "00000000000000a1",
				TraceFlags: 1, StartTimeUnixNano: start, EndTimeUnixNano: start + d1, DurationNano: &d1, Status: "ok",
				Attributes: with(observability.Attributes{"gen_ai.operation.name": "invoke_agent"})},
			{Schema: 2, Signal: "span", Phase: "end", Name: "gen_ai.generate_content", Kind: "client", TraceID: trace, SpanID: "00000000000000b2",
				ParentSpanID: "00000000000000a1", TraceFlags: 1, StartTimeUnixNano: start + 1_000_000, EndTimeUnixNano: start + 1_000_000 + d2, DurationNano: &d2, Status: "ok",
				Attributes: with(observability.Attributes{"gen_ai.operation.name": "generate_content", "gen_ai.request.model": "scripted-1", "gen_ai.usage.input_tokens": int64(12)})},
		} {
			if err := p.Enqueue(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTraceQuery_ByEvalJobCaseSampleAndTree(t *testing.T) {
	url := startServe(t)
	publishEvalSpans(t, url, "job-7", [][2]string{{"c1", "0"}, {"c1", "1"}, {"c2", "0"}})
	publishEvalSpans(t, url, "job-8", [][2]string{{"c1", "0"}})
	count := func(args ...string) int {
		var out, errb bytes.Buffer
		if code := run(append([]string{"trace", "query", "--server", url, "--token", "tok-alice"}, args...), &out, &errb); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		var page struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(out.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		return len(page.Events)
	}
	testutil.WaitFor(t, 10*time.Second, "the job's spans are queryable", func() bool { return count("--job", "job-7") == 6 })
	if n := count("--job", "job-7", "--case", "c1"); n != 4 {
		t.Fatalf("--case c1: %d events", n)
	}
	if n := count("--job", "job-7", "--case", "c1", "--sample", "1"); n != 2 {
		t.Fatalf("--sample 1: %d events", n)
	}

	var out, errb bytes.Buffer
	if code := run([]string{"trace", "query", "--server", url, "--token", "tok-alice", "--job", "job-7", "--case", "c2", "--format", "tree"}, &out, &errb); code != exitOK {
		t.Fatalf("tree: exit %d %s", code, errb.String())
	}
	tree := out.String()
	for _, want := range []string{"trace ", "  +0µs", "3.5ms", "    +1.0ms", "1.2ms", "gen_ai.generate_content", "gen_ai.request.model=scripted-1", "adk.eval.case_id=c2"} {
		if !strings.Contains(tree, want) {
			t.Errorf("tree lacks %q:\n%s", want, tree)
		}
	}
	if strings.Count(tree, "trace ") != 1 || strings.Contains(tree, "1000000000") {
		t.Errorf("tree:\n%s", tree)
	}

	for _, bad := range [][]string{
		{"--case", "c1"},
		{"--job", "job-7", "--sample", "0"},
		{"--job", "job-7", "--run-id", "r1"},
		{"--format", "yaml"},
	} {
		out.Reset()
		errb.Reset()
		if code := run(append([]string{"trace", "query", "--server", url, "--token", "tok-alice"}, bad...), &out, &errb); code != exitError || !strings.Contains(errb.String(), "--") {
			t.Errorf("%v: exit %d, want usage (%s)", bad, code, errb.String())
		}
	}
}
