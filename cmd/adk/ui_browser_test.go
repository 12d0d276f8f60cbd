package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

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

// uiStack is the built `adk` binary running `adk serve` (NATS,
// coordinator, worker, trace store, OTLP receiver, and the developer API
// with the UI on --http-addr), its agent's model a fake OpenAI-compatible
// provider.
type uiStack struct {
	base, otlp string
	provider   *fakeChat
}

func startUIStack(t *testing.T) uiStack {
	t.Helper()
	dir := t.TempDir()
	tokens := writeFile(t, dir, "tokens", tracenode.HashToken(uiToken)+" team-a\n")
	fake := newFakeChat(t)
	// The travel agent's tools, its model the fake provider.
	var agent map[string]any
	data, err := os.ReadFile(travelAgent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &agent); err != nil {
		t.Fatal(err)
	}
	agent["model"] = map[string]any{"provider": "openai", "model": "fake-chat", "base_url": fake.srv.URL + "/v1", "max_attempts": 1}
	data, _ = json.Marshal(agent)
	agentFile := writeFile(t, dir, "agent.json", string(data))

	cmd := exec.Command(adkBinary(t), "serve", "--data-dir", filepath.Join(dir, "data"), "--port", "-1", "--tokens", tokens,
		"--http-addr", "127.0.0.1:0", "--otlp-addr", "127.0.0.1:0", "--agent", "travel="+agentFile)
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		fake.release() // a held answer must not keep the worker from stopping
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("adk serve: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("adk serve did not stop on SIGTERM")
		}
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads after start-up
			}
		}
		exited <- cmd.Wait()
	}()
	var s uiStack
	s.provider = fake
	deadline := time.After(60 * time.Second)
	for s.base == "" || s.otlp == "" {
		select {
		case l := <-lines:
			if u, ok := strings.CutPrefix(l, "adk serve: api "); ok {
				s.base = strings.TrimSuffix(strings.Fields(u)[0], "/dev/v1/")
			}
			if u, ok := strings.CutPrefix(l, "adk serve: otlp http://"); ok {
				s.otlp = strings.TrimSuffix(strings.Fields(u)[0], otlpreceiver.TracesPath+",")
			}
		case <-deadline:
			t.Fatalf("adk serve printed no API and OTLP address: %s", stderr.String())
		}
	}
	return s
}

// fakeChat is an OpenAI-compatible chat completions server standing in
// for the model provider: it asks for get_weather on a Pune weather
// question, answers sunny once the tool result is in, and declines
// anything else. While held, every answer waits until release, so a test
// can look at a job that is deterministically still running.
type fakeChat struct {
	srv *httptest.Server

	mu      sync.Mutex
	gate    chan struct{} // nil: answer at once
	waiting int
}

func newFakeChat(t *testing.T) *fakeChat {
	f := &fakeChat{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// hold makes answers wait until release.
func (f *fakeChat) hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate == nil {
		f.gate = make(chan struct{})
	}
}

func (f *fakeChat) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
}

// held is how many answers are waiting.
func (f *fakeChat) held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

func (f *fakeChat) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	gate := f.gate
	if gate != nil {
		f.waiting++
	}
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
	}
	last := req.Messages[len(req.Messages)-1]
	input := ""
	for _, m := range req.Messages {
		if m.Role == "user" && m.Content != nil {
			input = *m.Content
		}
	}
	w.Header().Set("Content-Type", "application/json")
	const usage = `"usage":{"prompt_tokens":120,"completion_tokens":24}`
	switch {
	case last.Role == "user" && strings.Contains(input, "weather in Pune"):
		fmt.Fprint(w, `{"id":"c1","model":"fake-chat","choices":[{"finish_reason":"tool_calls","message":{"content":null,
			"tool_calls":[{"id":"call-1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Pune\"}"}}]}}],`+usage+`}`)
	case last.Role == "tool":
		fmt.Fprint(w, `{"id":"c2","model":"fake-chat","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"It is sunny in Pune, 31°C."}}],`+usage+`}`)
	default:
		fmt.Fprint(w, `{"id":"c3","model":"fake-chat","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"Sorry, I can only help with weather and flights."}}],`+usage+`}`)
	}
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
// against the built binary's `adk serve --http-addr`, whose agent's model
// is a fake provider: log in with the keyboard, open a job from the list
// with the keyboard, submit a job from the page and watch it run (the
// provider holds its answers until the page has shown the running job)
// and finish live, open its failed case and see the diff and the marked
// tool call, open the sample's trace waterfall and a live tail, compare
// it with an earlier result, see the pass-rate and per-metric trend with
// the gates of `adk eval stats`, and the cluster. Hostile case ids,
// expected answers and tool names must show as text and run nothing;
// every control is labelled and all text meets WCAG AA contrast.
func TestClusterUI_BrowserWalkthrough(t *testing.T) {
	b := newBrowser(t)
	s := startUIStack(t)

	// The earlier, passing run of the same eval set: submitted over the
	// API, as CI would.
	var good struct {
		JobID     string `json:"job_id"`
		AgentName string `json:"agent_name"`
	}
	var metrics []any
	_ = json.Unmarshal([]byte(uiMetrics), &metrics)
	var goodSet any
	_ = json.Unmarshal([]byte(uiGoodSet), &goodSet)
	if code := s.apiCall(t, http.MethodPost, "/dev/v1/evaluation/jobs", map[string]any{"agent_name": "travel", "set": goodSet, "metrics": metrics}, &good); code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	if good.AgentName != "travel" {
		t.Errorf("the job names agent %q", good.AgentName)
	}
	testutil.WaitFor(t, 30*time.Second, "the first job to complete", func() bool {
		var j struct{ Phase string }
		s.apiCall(t, http.MethodGet, "/dev/v1/evaluation/jobs/"+good.JobID, nil, &j)
		return j.Phase == "completed"
	})

	t.Run("keyboard: log in and open a job", func(t *testing.T) {
		b.t = t
		b.run("login page", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
		b.screenshot("login", "Developer token", "session storage")
		// The check catches what it looks for: a pale text and an
		// unlabelled field planted in the page are reported.
		planted := get(b, "plant failures", chromedp.Evaluate[[]string](`(() => {
			const p = document.createElement('p'); p.textContent = 'pale'; p.style.color = '#aaaaaa';
			const i = document.createElement('input');
			document.getElementById('main').append(p, i);
			const bad = `+a11yCheck+`;
			p.remove(); i.remove();
			return bad;
		})()`))
		if len(planted) != 2 || !strings.HasPrefix(planted[0], "unlabelled") || !strings.HasPrefix(planted[1], "contrast 2.32 P") {
			t.Errorf("the accessibility check found %q in a page with a pale text and an unlabelled field", planted)
		}
		b.checkA11y("login")
		// Tab from the top of the page to the token field, type it and
		// press Enter: no mouse.
		b.tabTo(`document.activeElement.id === 'token'`, 10)
		b.run("type the token and press Enter", chromedp.KeyEvent(uiToken), chromedp.KeyEvent(kb.Enter),
			chromedp.WaitVisible(chromedp.CSS(`main[data-ready="jobs"] table`)))
		if loc := get(b, "location", chromedp.Location()); strings.Contains(loc, uiToken) {
			t.Fatal("the token is in the URL")
		}
		if !get(b, "focus", chromedp.Evaluate[bool](`document.activeElement === document.getElementById('main')`)) {
			t.Error("after logging in, focus is not on the page's content")
		}
		// The jobs list names the agent.
		b.run("the agent column", void(chromedp.Poll[bool](fmt.Sprintf(
			`(() => { const r = document.querySelector('tr[data-job=%q]'); return !!r && r.cells[1].textContent === 'travel'; })()`, good.JobID))))
		b.shows("jobs list", "Agent", "travel", good.JobID)
		// Tab through the page to the job's link and open it with Enter.
		b.tabTo(fmt.Sprintf(`document.activeElement.tagName === 'A' && document.activeElement.textContent === %q`, good.JobID), 40)
		if !get(b, "focus ring", chromedp.Evaluate[bool](`getComputedStyle(document.activeElement).outlineStyle !== 'none'`)) {
			t.Error("the focused link shows no focus outline")
		}
		b.run("open it with Enter", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="jobs/`+good.JobID+`"] table[aria-label="Cases"]`)))
		if !get(b, "focus", chromedp.Evaluate[bool](`document.activeElement === document.getElementById('main')`)) {
			t.Error("after opening the job, focus is not on the page's content")
		}
		b.shows("job page", "Agent", "travel", "PASS")
		b.checkA11y("job")
	})

	var badJob string
	t.Run("submit a job and watch it run and finish live", func(t *testing.T) {
		b.t = t
		// The provider holds every answer until the page has shown the
		// job running: the intermediate state is seen, not raced.
		s.provider.hold()
		b.run("fill the form", chromedp.Navigate(s.base+"/#/jobs"), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="jobs"] table`)),
			chromedp.Click(chromedp.CSS("main details summary")),
			chromedp.SendKeys(chromedp.CSS("#agent"), "travel"),
			chromedp.SetValue(chromedp.CSS("#set"), uiBadSet), chromedp.SetValue(chromedp.CSS("#metrics"), uiMetrics))
		b.checkA11y("submit form")
		b.run("submit", chromedp.Click(chromedp.CSS("main details form button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS(`main[data-ready^="jobs/"] dl.kv`)))
		loc := get(b, "location", chromedp.Location())
		badJob = loc[strings.LastIndex(loc, "/")+1:]
		testutil.WaitFor(t, 30*time.Second, "the worker to call the provider", func() bool { return s.provider.held() > 0 })
		b.run("the page shows the job running", phaseIs("running"))
		b.screenshot("job-running", "running", "0/3", "Cancel job")
		s.provider.release()
		b.run("the job completes on the page", phaseIs("completed"), chromedp.WaitVisible(chromedp.CSS(`table[aria-label="Cases"]`)))
		b.screenshot("job", "Pass rate", "Wilson", "<img src=x onerror=alert(1)>", "weather-pune", "3/3")
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

	t.Run("open a failed case and see its diff", func(t *testing.T) {
		b.t = t
		b.run("open the case", chromedp.Click(chromedp.CSS(`table[aria-label="Cases"] a[href$="/cases/1"]`)),
			chromedp.WaitVisible(chromedp.CSS("pre.diff del")))
		b.screenshot("case", "<script>alert(3)</script>", "<svg onload=alert(4)>", "first unmatched expected call", "Difference")
		if got := b.text("pre.diff del"); got != "<script>alert(3)</script>" {
			t.Errorf("the diff's deleted text is %q", got)
		}
		b.checkA11y("case")
		// The same page in the dark scheme keeps its contrast.
		b.run("dark scheme", void(func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
			return chromedp.Void{}, err
		}))
		b.checkA11y("case, dark")
		b.run("light scheme", void(func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})
			return chromedp.Void{}, err
		}))
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
		// from the search form. The trace reaches the store
		// asynchronously: search until the waterfall shows it.
		testutil.WaitFor(t, 20*time.Second, "the waterfall", func() bool {
			b.run("search by run id", chromedp.Navigate(s.base+"/#/traces"), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="traces"]`)),
				chromedp.SendKeys(chromedp.CSS("#sel-run_id"), "ui-run"),
				chromedp.Click(chromedp.CSS("main form button[type=submit]")),
				chromedp.WaitVisible(chromedp.CSS(`main[data-ready*="run_id=ui-run"]`)))
			n := get(b, "waterfall rows", chromedp.Evaluate[int](`document.querySelectorAll('table[aria-label="Span waterfall"] tbody tr').length`))
			return n == 3
		})
		b.screenshot("trace", "invoke_agent travel", "execute_tool <svg onload=alert(5)>", "gen_ai.request.model=scripted-1", "error.type=tool_error")
		b.checkA11y("trace")
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
		b.shows("tail", "invoke_agent travel", "Live tail")
	})

	t.Run("compare two results", func(t *testing.T) {
		b.t = t
		b.run("compare page", chromedp.Navigate(s.base+"/#/compare"), chromedp.WaitVisible(chromedp.CSS("#baseline")),
			chromedp.SetValue(chromedp.CSS("#baseline"), good.JobID), chromedp.SetValue(chromedp.CSS("#current"), badJob),
			chromedp.Click(chromedp.CSS("main form button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS(`table[aria-label="Case changes, newly failing first"]`)))
		b.screenshot("compare", "REGRESSION", "case_no_longer_passes", "Baseline interval", "Current interval", "95% Wilson")
		if first := b.text(`table[aria-label="Case changes, newly failing first"] tbody tr td`); first != "weather-pune" {
			t.Errorf("the first case change is %q, want the newly failing weather-pune", first)
		}
		b.checkA11y("compare")
	})

	t.Run("view the trend", func(t *testing.T) {
		b.t = t
		b.run("trend page", chromedp.Navigate(s.base+"/#/trend?set=travel-ui"), chromedp.WaitVisible(chromedp.CSS("svg.trend polygon.band")))
		b.screenshot("trend", "Regressions gate", "pooled", "metric response", "metric trajectory")
		// The page's gates are those of `adk eval stats` over the two
		// results: the pass rate and every metric.
		var r1, r2 evalengine.Result
		s.apiCall(t, http.MethodGet, "/dev/v1/evaluation/jobs/"+good.JobID+"/result", nil, &r1)
		s.apiCall(t, http.MethodGet, "/dev/v1/evaluation/jobs/"+badJob+"/result", nil, &r2)
		_, doc, err := evalengine.StatsReport([]*evalengine.Result{&r1, &r2}, evalengine.DefaultStatsOptions())
		if err != nil {
			t.Fatal(err)
		}
		verdict := func(regression bool) string {
			if regression {
				return "REGRESSION"
			}
			return "PASS"
		}
		want := []string{"pass rate " + verdict(doc.Gate.PassRate.Regression)}
		for _, m := range doc.Gate.Metrics {
			if m.Gate != nil {
				want = append(want, "metric "+m.MetricID+" "+verdict(m.Gate.Regression))
			}
		}
		got := get(b, "gates", chromedp.Evaluate[[]string](`[...document.querySelectorAll('table[aria-label="Gates"] tbody tr')].map((r) => r.cells[0].textContent + ' ' + r.cells[1].textContent)`))
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("the page's gates are %q, adk eval stats says %q", got, want)
		}
		if n := get(b, "charts", chromedp.Evaluate[int](`document.querySelectorAll('svg.trend').length`)); n != 1+len(want)-1 {
			t.Errorf("%d trend charts, want one for the pass rate and one per gated metric (%d)", n, len(want)-1)
		}
		if got := b.text(`main dl.kv dd .badge`); got != verdict(!doc.Passed) {
			t.Errorf("the page's verdict is %s, adk eval stats %s", got, verdict(!doc.Passed))
		}
		b.checkA11y("trend")
	})

	t.Run("cluster", func(t *testing.T) {
		b.t = t
		b.run("cluster page", chromedp.Navigate(s.base+"/#/cluster"), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="cluster"] h1`)))
		b.screenshot("cluster", "Coordinators", "Signal stream")
		b.checkA11y("cluster")
		b.run("jobs page", chromedp.Navigate(s.base+"/#/jobs"), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="jobs"] table`)),
			void(chromedp.Poll[bool](`document.querySelectorAll('main table tbody td.num .badge').length >= 2`)))
		b.screenshot("jobs", good.JobID, badJob, "Wilson", "travel")
	})

	b.t = t
	n := get(b, "count elements", chromedp.Evaluate[int](`document.querySelectorAll('img,iframe,script:not([src="/app.js"])').length`))
	if n != 0 {
		t.Errorf("%d injected elements", n)
	}
	b.checkClean()
}

// shows fails unless the page's text holds every want (a screenshot's
// text check, for pages whose picture adds nothing).
func (b *browser) shows(page string, want ...string) {
	b.t.Helper()
	body := b.text("body")
	for _, w := range want {
		if !strings.Contains(body, w) {
			b.t.Errorf("%s: the page does not show %q", page, w)
		}
	}
}

// tabTo presses Tab until the JS condition holds of the focused element,
// at most max times.
func (b *browser) tabTo(cond string, max int) {
	b.t.Helper()
	for i := 0; i < max; i++ {
		b.run("press Tab", chromedp.KeyEvent(kb.Tab))
		if get(b, "focus", chromedp.Evaluate[bool](cond)) {
			return
		}
	}
	b.fail("tab to "+cond, fmt.Errorf("not reached in %d presses (focus on %s)", max,
		get(b, "focus", chromedp.Evaluate[string](`document.activeElement.outerHTML.slice(0, 200)`))))
}

// a11yCheck lists what fails on the page: form controls without a label,
// buttons and links without a name, tables and images without one, and
// text below WCAG AA contrast (4.5:1, 3:1 for large text) against the
// background it is drawn on.
const a11yCheck = `(() => {
  const bad = [];
  const name = (e) => (e.getAttribute('aria-label') || e.textContent || '').trim();
  for (const e of document.querySelectorAll('input:not([type=hidden]),select,textarea')) if (!e.labels.length && !e.getAttribute('aria-label')) bad.push('unlabelled ' + e.outerHTML.slice(0, 80));
  for (const e of document.querySelectorAll('button,a[href],summary')) if (e.offsetParent && !name(e)) bad.push('nameless ' + e.outerHTML.slice(0, 80));
  for (const e of document.querySelectorAll('table,[role=img]')) if (!e.getAttribute('aria-label')) bad.push('unnamed ' + e.tagName);
  const rgba = (c) => { const m = /rgba?\(([^)]+)\)/.exec(c); if (!m) return null; const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const backdrop = (el) => {
    const layers = [];
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let out = [255, 255, 255];
    for (const c of layers.reverse()) out = out.map((v, i) => c[i] * c[3] + v * (1 - c[3]));
    return out;
  };
  for (const el of document.querySelectorAll('body *')) {
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    const r = el.getBoundingClientRect();
    const cs = getComputedStyle(el);
    if (!r.width || !r.height || cs.visibility === 'hidden') continue;
    const fg = rgba(el instanceof SVGElement ? cs.fill : cs.color);
    if (!fg) continue;
    const bg = backdrop(el);
    const blended = fg.slice(0, 3).map((v, i) => v * fg[3] + bg[i] * (1 - fg[3]));
    const a = lum(blended), b = lum(bg);
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const size = parseFloat(cs.fontSize), large = size >= 24 || (size >= 18.66 && Number(cs.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) bad.push('contrast ' + ratio.toFixed(2) + ' ' + el.tagName + ' "' + el.textContent.trim().slice(0, 40) + '"');
  }
  return bad;
})()`

// checkA11y fails the test on what a11yCheck finds on the current page.
func (b *browser) checkA11y(page string) {
	b.t.Helper()
	if bad := get(b, "accessibility of "+page, chromedp.Evaluate[[]string](a11yCheck)); len(bad) > 0 {
		b.t.Errorf("%s: %d accessibility failures: %q", page, len(bad), bad)
	}
}
