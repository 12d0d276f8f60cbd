package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/devapi/ui"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/otlpreceiver"
	"github.com/fadcedab/adk/store/tracenode"
)

const uiToken = "ui-token-0123456789abcdef"

// uiGoodSet passes on the travel agent; uiBadSet is the same eval set with
// weather-pune's expectation changed (a regression) and a case whose id,
// expected answer and expected tool are markup.
const uiGoodSet = `{"id":"travel-ui","version":"1","cases":[
 {"id":"weather-pune","expected_trajectory":["get_weather"],"input":"What is the weather in Pune?","expected":"It is sunny in Pune, 31°C."},
 {"id":"out-of-scope","expected_trajectory":[],"input":"Can you order me a pizza?","expected":"Sorry, I can only help with weather and flights."}]}`

const uiBadSet = `{"id":"travel-ui","version":"2","cases":[
 {"id":"weather-pune","expected_trajectory":["get_weather"],"input":"What is the weather in Pune?","expected":"It is rainy in Pune, 31°C."},
 {"id":"<img src=x onerror=alert(1)>","turns":[{"input":"What is the weather in Pune?",
   "expected":{"response":"<script>alert(3)</script>","trajectory":["<svg onload=alert(4)>"]}}]},
 {"id":"out-of-scope","expected_trajectory":[],"input":"Can you order me a pizza?","expected":"Sorry, I can only help with weather and flights."}]}`

const uiMetrics = `[{"id":"response","metric":"exact_response","threshold":1},{"id":"trajectory","metric":"tool_trajectory","threshold":1,"config":{"match":"in_order"}}]`

// uiStack is `adk serve` (NATS, coordinator, worker, trace store, OTLP
// receiver) with the developer API and the UI on one listener.
type uiStack struct {
	base, otlp string
}

func startUIStack(t *testing.T) uiStack {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(tracenode.HashToken(uiToken)+" team-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	natsc, otlpc := make(chan string, 1), make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{dataDir: filepath.Join(dir, "data"), host: "127.0.0.1", port: -1, tokensFile: tokens,
			otlpAddr: "127.0.0.1:0", otlpListening: func(a string) { otlpc <- a }, ready: func(u string) { natsc <- u },
			eval: serveEvalOptions{agents: []string{"travel=" + travelAgent}, raftAddr: "127.0.0.1:0", capacity: 4}}, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var natsURL, otlpAddr string
	for natsURL == "" || otlpAddr == "" {
		select {
		case otlpAddr = <-otlpc:
		case natsURL = <-natsc:
		case err := <-done:
			t.Fatalf("serve exited: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("serve not ready")
		}
	}
	nc, err := bus.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tracenode.LoadTokens(tokens)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := devapi.New(devapi.Options{Tokens: tok, Coord: client.New(nc, 0), NATS: nc, UI: ui.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		nc.Close()
	})
	return uiStack{base: hs.URL, otlp: otlpAddr}
}

// apiCall is one authenticated JSON call to the stack's API.
func (s uiStack) apiCall(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+uiToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v (%s)", method, path, err, data)
		}
	}
	return resp.StatusCode
}

// exportSampleTrace sends, as an instrumented agent would over OTLP, the
// spans of one sample: an agent span, a model call and a failing tool call
// with gen-ai attributes, tagged with the eval's ids.
func (s uiStack) exportSampleTrace(t *testing.T, runID, jobID, caseID, sampleID string) {
	t.Helper()
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	tid := pcommon.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	add := func(id, parent byte, name string, start, end uint64, attrs map[string]string) {
		sp := spans.AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{id, 1, 1, 1, 1, 1, 1, 1})
		if parent != 0 {
			sp.SetParentSpanID(pcommon.SpanID{parent, 1, 1, 1, 1, 1, 1, 1})
		}
		sp.SetName(name)
		sp.SetStartTimestamp(pcommon.Timestamp(start))
		sp.SetEndTimestamp(pcommon.Timestamp(end))
		a := sp.Attributes()
		a.PutStr("adk.eval.job_id", jobID)
		a.PutStr("adk.eval.case_id", caseID)
		a.PutStr("adk.eval.sample_id", sampleID)
		a.PutStr("run_id", runID)
		for k, v := range attrs {
			a.PutStr(k, v)
		}
	}
	const t0 = 1_700_000_000_000_000_000
	add(1, 0, "invoke_agent travel", t0, t0+90e6, map[string]string{"gen_ai.operation.name": "invoke_agent"})
	add(2, 1, "chat scripted", t0+5e6, t0+40e6, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "scripted-1"})
	add(3, 1, "execute_tool <svg onload=alert(5)>", t0+45e6, t0+80e6, map[string]string{"gen_ai.operation.name": "execute_tool",
		"gen_ai.tool.name": "<svg onload=alert(5)>", "error.type": "tool_error"})
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.otlp+otlpreceiver.TracesPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", otlpreceiver.ContentTypeProtobuf)
	req.Header.Set("Authorization", "Bearer "+uiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP export: %d", resp.StatusCode)
	}
}

// phaseIs waits until the job page's status badge reads phase.
func phaseIs(phase string) chromedp.Action[chromedp.Void] {
	return void(chromedp.Poll[bool](fmt.Sprintf(`(() => { const b = document.querySelector('main dl.kv dd .badge'); return !!b && b.textContent === %q; })()`, phase)))
}

// void drops an action's value so it can run in a sequence.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, tg)
		return chromedp.Void{}, err
	}
}

// TestClusterUI_BrowserWalkthrough drives the UI in headless Chromium
// against a real `adk serve` stack: log in, submit a job from the page and
// watch it finish live, open its failed case and see the diff and the
// marked tool call, open the sample's trace waterfall, compare it with an
// earlier result, see the pass-rate trend with its gate, and the cluster.
// Hostile case ids, expected answers and tool names must show as text
// and run nothing.
func TestClusterUI_BrowserWalkthrough(t *testing.T) {
	b := newBrowser(t)
	s := startUIStack(t)

	// The earlier, passing run of the same eval set: submitted over the
	// API, as CI would.
	var good struct {
		JobID string `json:"job_id"`
	}
	var metrics []any
	_ = json.Unmarshal([]byte(uiMetrics), &metrics)
	var goodSet any
	_ = json.Unmarshal([]byte(uiGoodSet), &goodSet)
	if code := s.apiCall(t, http.MethodPost, "/dev/v1/evaluation/jobs", map[string]any{"agent_name": "travel", "set": goodSet, "metrics": metrics}, &good); code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	testutil.WaitFor(t, 30*time.Second, "the first job to complete", func() bool {
		var j struct{ Phase string }
		s.apiCall(t, http.MethodGet, "/dev/v1/evaluation/jobs/"+good.JobID, nil, &j)
		return j.Phase == "completed"
	})

	t.Run("log in", func(t *testing.T) {
		b.t = t
		b.run("login page", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
		b.screenshot("login", "Developer token", "session storage")
		b.run("log in", chromedp.SendKeys(chromedp.CSS("#token"), uiToken), chromedp.Click(chromedp.CSS("main form button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS(`main[data-ready="jobs"] table`)))
		if loc := get(b, "location", chromedp.Location()); strings.Contains(loc, uiToken) {
			t.Fatal("the token is in the URL")
		}
	})

	var badJob string
	t.Run("submit a job and watch it finish live", func(t *testing.T) {
		b.t = t
		b.run("fill the form", chromedp.Click(chromedp.CSS("main details summary")),
			chromedp.SendKeys(chromedp.CSS("#agent"), "travel"),
			chromedp.SetValue(chromedp.CSS("#set"), uiBadSet), chromedp.SetValue(chromedp.CSS("#metrics"), uiMetrics),
			chromedp.Click(chromedp.CSS("main details form button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS(`main[data-ready^="jobs/"] dl.kv`)))
		loc := get(b, "location", chromedp.Location())
		badJob = loc[strings.LastIndex(loc, "/")+1:]
		b.run("the job completes on the page", phaseIs("completed"), chromedp.WaitVisible(chromedp.CSS(`table[aria-label="Cases"]`)))
		b.screenshot("job", "Pass rate", "Wilson", "<img src=x onerror=alert(1)>", "weather-pune")
	})

	t.Run("the job's HTML report", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, s.base+"/dev/v1/evaluation/jobs/"+badJob+"/report?format=html", nil)
		req.Header.Set("Authorization", "Bearer "+uiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
			!bytes.Contains(body, []byte("&lt;script&gt;alert(3)&lt;/script&gt;")) {
			t.Fatalf("report: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})

	t.Run("every control has a label", func(t *testing.T) {
		b.t = t
		unlabelled := get(b, "labels", chromedp.Evaluate[int](`[...document.querySelectorAll('input,select,textarea')].filter((e) => e.labels.length === 0).length`))
		if unlabelled != 0 {
			t.Errorf("%d form controls without a label", unlabelled)
		}
	})

	t.Run("open a failed case and see its diff", func(t *testing.T) {
		b.t = t
		b.run("open the case", chromedp.Click(chromedp.CSS(`table[aria-label="Cases"] a[href$="/cases/1"]`)),
			chromedp.WaitVisible(chromedp.CSS("pre.diff del")))
		b.screenshot("case", "<script>alert(3)</script>", "<svg onload=alert(4)>", "first unmatched expected call", "Difference")
		if got := b.text("pre.diff del"); got != "<script>alert(3)</script>" {
			t.Errorf("the diff's deleted text is %q", got)
		}
	})

	t.Run("open the sample's trace waterfall", func(t *testing.T) {
		b.t = t
		var res evalengine.Result
		if code := s.apiCall(t, http.MethodGet, "/dev/v1/evaluation/jobs/"+badJob+"/result", nil, &res); code != http.StatusOK {
			t.Fatalf("result: %d", code)
		}
		c := res.Cases[1]
		s.exportSampleTrace(t, "ui-run", badJob, c.CaseID, c.Samples[0].SampleID)
		// The sample's trace link opens the trace the worker recorded
		// (workers trace every task under the job's scope, which is this
		// token's principal).
		if c.Samples[0].TraceID == "" {
			t.Fatal("the sample names no trace")
		}
		testutil.WaitFor(t, 20*time.Second, "the sample's waterfall", func() bool {
			b.run("open the trace link", chromedp.Navigate(s.base+"/#/jobs/"+badJob+"/cases/1"), chromedp.WaitVisible(chromedp.CSS("section.sample")),
				chromedp.Click(chromedp.CSS(`section.sample a[href^="#/traces"]`)),
				chromedp.WaitVisible(chromedp.CSS(`main[data-ready^="traces"]`)))
			n := get(b, "waterfall rows", chromedp.Evaluate[int](`document.querySelectorAll('table[aria-label="Span waterfall"] tbody tr').length`))
			return n > 0
		})
		if v := get(b, "trace_id field", chromedp.Value(chromedp.CSS("#sel-trace_id"))); v != c.Samples[0].TraceID {
			t.Errorf("the trace link searched trace_id %q, want %q", v, c.Samples[0].TraceID)
		}
		b.screenshot("sample-trace", "Waterfall")
		// Spans an instrumented agent exported over OTLP, found by run id
		// from the search form.
		// The trace reaches the store asynchronously: search until the
		// waterfall shows it.
		testutil.WaitFor(t, 20*time.Second, "the waterfall", func() bool {
			b.run("search by run id", chromedp.Navigate(s.base+"/#/traces"), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="traces"]`)),
				chromedp.SendKeys(chromedp.CSS("#sel-run_id"), "ui-run"),
				chromedp.Click(chromedp.CSS("main form button[type=submit]")),
				chromedp.WaitVisible(chromedp.CSS(`main[data-ready*="run_id=ui-run"]`)))
			n := get(b, "waterfall rows", chromedp.Evaluate[int](`document.querySelectorAll('table[aria-label="Span waterfall"] tbody tr').length`))
			return n == 3
		})
		b.screenshot("trace", "invoke_agent travel", "execute_tool <svg onload=alert(5)>", "gen_ai.request.model=scripted-1", "error.type=tool_error")
	})

	t.Run("live tail", func(t *testing.T) {
		b.t = t
		b.run("tail page", chromedp.Navigate(s.base+"/#/traces?run_id=ui-tail&tail=1"),
			chromedp.WaitVisible(chromedp.CSS(`main[data-ready*="tail=1"]`)))
		if n := get(b, "rows", chromedp.Evaluate[int](`document.querySelectorAll('table[aria-label="Span waterfall"] tbody tr').length`)); n != 0 {
			t.Fatalf("%d spans before any were sent", n)
		}
		s.exportSampleTrace(t, "ui-tail", badJob, "c", "s")
		// The page polls from its cursor; the new spans appear without a
		// reload.
		b.run("the spans arrive", void(chromedp.Poll[bool](`document.querySelectorAll('table[aria-label="Span waterfall"] tbody tr').length === 3`)))
	})

	t.Run("compare two results", func(t *testing.T) {
		b.t = t
		b.run("compare page", chromedp.Navigate(s.base+"/#/compare"), chromedp.WaitVisible(chromedp.CSS("#baseline")),
			chromedp.SetValue(chromedp.CSS("#baseline"), good.JobID), chromedp.SetValue(chromedp.CSS("#current"), badJob),
			chromedp.Click(chromedp.CSS("main form button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS(`table[aria-label="Case changes, newly failing first"]`)))
		b.screenshot("compare", "REGRESSION", "case_no_longer_passes", "Baseline interval", "Current interval")
		if first := b.text(`table[aria-label="Case changes, newly failing first"] tbody tr td`); first != "weather-pune" {
			t.Errorf("the first case change is %q, want the newly failing weather-pune", first)
		}
	})

	t.Run("view the trend", func(t *testing.T) {
		b.t = t
		b.run("trend page", chromedp.Navigate(s.base+"/#/trend?set=travel-ui"), chromedp.WaitVisible(chromedp.CSS("svg.trend polygon.band")))
		b.screenshot("trend", "Regressions gate", "pooled")
		// The page's gate is the pass-rate gate of `adk eval stats`.
		var r1, r2 evalengine.Result
		s.apiCall(t, http.MethodGet, "/dev/v1/evaluation/jobs/"+good.JobID+"/result", nil, &r1)
		s.apiCall(t, http.MethodGet, "/dev/v1/evaluation/jobs/"+badJob+"/result", nil, &r2)
		_, doc, err := evalengine.StatsReport([]*evalengine.Result{&r1, &r2}, evalengine.DefaultStatsOptions())
		if err != nil {
			t.Fatal(err)
		}
		want := "PASS"
		if doc.Gate.PassRate.Regression {
			want = "REGRESSION"
		}
		if got := b.text(`main dl.kv dd .badge`); got != want {
			t.Errorf("the page's gate says %s, adk eval stats %s", got, want)
		}
	})

	t.Run("cluster and jobs", func(t *testing.T) {
		b.t = t
		b.run("cluster page", chromedp.Navigate(s.base+"/#/cluster"), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="cluster"] h1`)))
		b.screenshot("cluster", "Coordinators", "Signal stream")
		b.run("jobs page", chromedp.Navigate(s.base+"/#/jobs"), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="jobs"] table`)),
			void(chromedp.Poll[bool](`document.querySelectorAll('main table tbody td.num .badge').length >= 2`)))
		b.screenshot("jobs", good.JobID, badJob, "Wilson")
	})

	b.t = t
	n := get(b, "count elements", chromedp.Evaluate[int](`document.querySelectorAll('img,iframe,script:not([src="/app.js"])').length`))
	if n != 0 {
		t.Errorf("%d injected elements", n)
	}
	b.checkClean()
}
