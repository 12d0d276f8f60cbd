package observability

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// recorder is an exporter that keeps every signal it is given.
type recorder struct {
	mu   sync.Mutex
	sigs []Signal
}

func (r *recorder) Export(_ context.Context, s Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sigs = append(r.sigs, s)
	return nil
}

func (r *recorder) spans(phase string) []*SpanSignal {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*SpanSignal
	for _, s := range r.sigs {
		if sp, ok := s.(*SpanSignal); ok && sp.Phase == phase {
			out = append(out, sp)
		}
	}
	return out
}

func (r *recorder) envelopes() []*Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Envelope
	for _, s := range r.sigs {
		if e, ok := s.(*Envelope); ok {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) allJSON(t *testing.T) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := json.Marshal(r.sigs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newTracer(t *testing.T, cfg Config) *Tracer {
	t.Helper()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return tr
}

func recordingTracer(t *testing.T, capture bool) (*Tracer, *recorder) {
	rec := &recorder{}
	return newTracer(t, Config{
		Exporters:      []ExporterDescriptor{{ID: "rec", Exporter: rec}},
		CaptureContent: capture,
	}), rec
}

// syntheticRun drives the observation points the runtime calls: run, then
// an agent turn with a model call and a tool call.
func syntheticRun(obs Observer) {
	ctx := context.Background()
	runCtx, endRun := obs.Start(ctx, Observation{Kind: KindRun, RunID: "run-1", InvocationID: "inv-1", SessionID: "sess-1",
		Content: map[string]any{"prompt": "SECRET PROMPT", "api_key": "sk-live-123"}})
	agentCtx, endAgent := obs.Start(runCtx, Observation{Kind: KindAgent, Agent: "planner", RunID: "other-run"})
	_, endModel := obs.Start(agentCtx, Observation{Kind: KindModel, Provider: "openai", Model: "gpt-x",
		Content: "SECRET PROMPT"})
	endModel(Outcome{Usage: &Usage{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 2, ReasoningTokens: 1},
		FinishReasons: []string{"tool_calls"}, ResponseModel: "gpt-x-2026", ResponseID: "resp-1",
		Content: "SECRET OUTPUT"})
	_, endTool := obs.Start(agentCtx, Observation{Kind: KindTool, Tool: "search", CallID: "call-1",
		Content: map[string]any{"query": "SECRET ARGS"}})
	endTool(Outcome{Content: "SECRET RESULT"})
	endAgent(Outcome{})
	endRun(Outcome{})
}

func TestTracer_CorrelationAcrossRun(t *testing.T) {
	tr, rec := recordingTracer(t, false)
	syntheticRun(tr)

	ends := rec.spans(PhaseEnd)
	if len(ends) != 4 || len(rec.spans(PhaseStart)) != 4 || len(rec.envelopes()) != 8 {
		t.Fatalf("signals: %d end, %d start, %d envelopes", len(ends), len(rec.spans(PhaseStart)), len(rec.envelopes()))
	}
	byName := map[string]*SpanSignal{}
	for _, s := range ends {
		if err := s.Validate(); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		key := s.Name + "/" + s.Kind
		byName[key] = s
		if s.TraceID != ends[0].TraceID || s.TraceFlags != 1 || s.Status != StatusOK {
			t.Fatalf("span %s: trace %s flags %d status %s", key, s.TraceID, s.TraceFlags, s.Status)
		}
	}
	run, agent := byName["gen_ai.invoke_agent/server"], byName["gen_ai.invoke_agent/internal"]
	model, tool := byName["gen_ai.generate_content/client"], byName["gen_ai.execute_tool/internal"]
	if run == nil || agent == nil || model == nil || tool == nil {
		t.Fatalf("spans by name: %v", byName)
	}
	if run.ParentSpanID != "" || agent.ParentSpanID != run.SpanID || model.ParentSpanID != agent.SpanID || tool.ParentSpanID != agent.SpanID {
		t.Fatalf("parentage: run %s<-%s agent %s<-%s model<-%s tool<-%s",
			run.SpanID, run.ParentSpanID, agent.SpanID, agent.ParentSpanID, model.ParentSpanID, tool.ParentSpanID)
	}
	if model.Attributes[AttrProviderName] != "openai" || model.Attributes[AttrRequestModel] != "gpt-x" ||
		tool.Attributes[AttrToolName] != "search" || tool.Attributes[AttrToolCallID] != "call-1" {
		t.Fatalf("semantic attributes: model %v tool %v", model.Attributes, tool.Attributes)
	}
	for _, e := range rec.envelopes() {
		m := e.Metadata
		if m.RunID != "run-1" || m.InvocationID != "inv-1" || m.Session != "sess-1" || m.TraceID != run.TraceID || m.SpanID == "" {
			t.Fatalf("envelope %s metadata %+v", e.Event, m)
		}
		if strings.HasPrefix(e.Event, "adk.tool.") && (m.Tool != "search" || m.CallID != "call-1" || m.Agent != "planner") {
			t.Fatalf("tool envelope metadata %+v", m)
		}
		if strings.HasPrefix(e.Event, "adk.model.") && m.Model != "gpt-x" {
			t.Fatalf("model envelope metadata %+v", m)
		}
		if e.ContentCaptured || e.Content != nil {
			t.Fatalf("content captured by default in %s", e.Event)
		}
	}
	all := rec.allJSON(t)
	for _, s := range []string{"SECRET", "sk-live", `"content":`, `"prompt"`} {
		if strings.Contains(all, s) {
			t.Fatalf("default signals contain %q", s)
		}
	}
}

func TestTracer_StartSignalsCarryNoEndFields(t *testing.T) {
	tr, rec := recordingTracer(t, false)
	syntheticRun(tr)
	for _, s := range rec.spans(PhaseStart) {
		if s.EndTimeUnixNano != 0 || s.DurationNano != nil || s.Status != "" {
			t.Fatalf("start signal %s has end fields", s.Name)
		}
		b, _ := json.Marshal(s)
		for _, k := range []string{"end_time_unix_nano", "duration_nano", `"status"`} {
			if strings.Contains(string(b), k) {
				t.Fatalf("start signal JSON has %s: %s", k, b)
			}
		}
	}
}

func TestTracer_ExplicitCaptureIsSecretPruned(t *testing.T) {
	tr, rec := recordingTracer(t, true)
	syntheticRun(tr)
	var runStart *Envelope
	for _, e := range rec.envelopes() {
		if e.Event == "adk.run.start" {
			runStart = e
		}
	}
	if runStart == nil || !runStart.ContentCaptured {
		t.Fatalf("run start not captured: %+v", runStart)
	}
	c := runStart.Content.(map[string]any)
	if c["prompt"] != "SECRET PROMPT" || c["api_key"] != nil {
		t.Fatalf("captured content %v", c)
	}
	// Content never reaches a span, even with capture on.
	for _, phase := range []string{PhaseStart, PhaseEnd} {
		for _, s := range rec.spans(phase) {
			b, _ := json.Marshal(s)
			if strings.Contains(string(b), "SECRET") {
				t.Fatalf("span %s carries content: %s", s.Name, b)
			}
		}
	}
	if strings.Contains(rec.allJSON(t), "sk-live") {
		t.Fatal("credential captured")
	}
}

func TestTracer_OpaqueContentDegradesToMetadata(t *testing.T) {
	tr, rec := recordingTracer(t, true)
	_, end := tr.Start(context.Background(), Observation{Kind: KindTool, Tool: "t", Content: map[string]any{"ch": make(chan int)}})
	end(Outcome{})
	e := rec.envelopes()[0]
	if e.ContentCaptured || e.Content != nil || e.Metadata.Attributes[captureErrorKey] != unsupportedContent {
		t.Fatalf("envelope %+v", e)
	}
}

func TestTracer_SignalsSurviveJSONRoundTrip(t *testing.T) {
	tr, rec := recordingTracer(t, false)
	syntheticRun(tr)
	for _, e := range rec.envelopes() {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back Envelope
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, e) {
			t.Fatalf("envelope round trip:\n%+v\n%+v", &back, e)
		}
	}
	for _, s := range rec.spans(PhaseEnd) {
		b, _ := json.Marshal(s)
		var back SpanSignal
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, s) {
			t.Fatalf("span round trip:\n%+v\n%+v", &back, s)
		}
	}
}

func TestSemconv_MetadataOnlyMapping(t *testing.T) {
	tr, rec := recordingTracer(t, true)
	syntheticRun(tr)
	var model *SpanSignal
	for _, s := range rec.spans(PhaseEnd) {
		if s.Name == "gen_ai.generate_content" {
			model = s
		}
	}
	want := Attributes{
		AttrOperationName: OpGenerateContent, MappingVersionKey: SemconvVersion,
		AttrProviderName: "openai", AttrRequestModel: "gpt-x",
		AttrResponseModel: "gpt-x-2026", AttrResponseID: "resp-1",
		AttrInputTokens: int64(10), AttrOutputTokens: int64(5), AttrCacheReadInput: int64(2), AttrReasonTokens: int64(1),
		AttrFinishReasons: []string{"tool_calls"},
	}
	if !reflect.DeepEqual(model.Attributes, want) {
		t.Fatalf("attributes\n got %v\nwant %v", model.Attributes, want)
	}
	for k := range model.Attributes {
		if IsForbiddenAttributeKey(k) {
			t.Fatalf("forbidden key %s mapped", k)
		}
	}
}

func TestSpan_UsesExecutionTimeAndParentage(t *testing.T) {
	tr, rec := recordingTracer(t, false)
	rootCtx, root, _ := tr.Begin(context.Background(), Observation{Kind: KindRun})
	start := time.Now().Add(-50 * time.Millisecond) // an operation that began 50ms ago
	_, end := tr.Start(rootCtx, Observation{Kind: KindModel, Model: "m", Start: start})
	end(Outcome{})
	_ = root.End(Outcome{})
	var model *SpanSignal
	for _, s := range rec.spans(PhaseEnd) {
		if s.Kind == SpanKindClient {
			model = s
		}
	}
	if *model.DurationNano < int64(50*time.Millisecond) || model.EndTimeUnixNano-model.StartTimeUnixNano != *model.DurationNano ||
		model.StartTimeUnixNano != start.UnixNano() || model.ParentSpanID != root.Correlation().SpanID.String() {
		t.Fatalf("model span %+v (dur %d)", model, *model.DurationNano)
	}
}

type codedErr struct{}

func (codedErr) Error() string { return "quota exceeded for key sk-123" }
func (codedErr) Code() string  { return "rate_limited" }

func TestSpan_ErrorIsStructural(t *testing.T) {
	cases := []struct {
		name string
		out  Outcome
		want string
	}{
		{"deadline", Outcome{Err: context.DeadlineExceeded}, "timeout"},
		{"wrapped deadline", Outcome{Err: errors.Join(errors.New("x"), context.DeadlineExceeded)}, "timeout"},
		{"bare error", Outcome{Err: errors.New("boom sk-123")}, "unknown"},
		{"coded error", Outcome{Err: codedErr{}}, "rate_limited"},
		{"explicit tag", Outcome{Err: errors.New("x"), ErrorType: "provider_unavailable"}, "provider_unavailable"},
		{"unsafe tag", Outcome{Err: errors.New("x"), ErrorType: "key sk-123 rejected"}, "unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, rec := recordingTracer(t, false)
			_, end := tr.Start(context.Background(), Observation{Kind: KindModel, Model: "m"})
			end(c.out)
			s := rec.spans(PhaseEnd)[0]
			if s.Status != StatusError || s.Attributes[AttrErrorType] != c.want {
				t.Fatalf("status %s error.type %v", s.Status, s.Attributes[AttrErrorType])
			}
			if strings.Contains(rec.allJSON(t), "sk-123") {
				t.Fatal("error text leaked into signals")
			}
		})
	}
}

func TestSpan_EndsExactlyOnce(t *testing.T) {
	tr, rec := recordingTracer(t, false)
	_, end := tr.Start(context.Background(), Observation{Kind: KindTool, Tool: "t"})
	end(Outcome{})
	end(Outcome{Err: errors.New("late")})
	if n := len(rec.spans(PhaseEnd)); n != 1 {
		t.Fatalf("%d end spans", n)
	}
}

// orderExporter records its id in a shared log and returns err (or panics).
func orderExporter(log *[]string, mu *sync.Mutex, id string, err error, panics bool) Exporter {
	return ExporterFunc(func(context.Context, Signal) error {
		mu.Lock()
		*log = append(*log, id)
		mu.Unlock()
		if panics {
			panic("exporter bug")
		}
		return err
	})
}

func TestExporters_OrderFailurePolicyAndPanics(t *testing.T) {
	var mu sync.Mutex
	var log []string
	var failures []DeliveryFailure
	tr := newTracer(t, Config{
		Exporters: []ExporterDescriptor{
			{ID: "open-fail", Exporter: orderExporter(&log, &mu, "open-fail", errors.New("down"), false)},
			{ID: "open-panic", Exporter: orderExporter(&log, &mu, "open-panic", nil, true)},
			{ID: "closed-ok", Exporter: orderExporter(&log, &mu, "closed-ok", nil, false), FailurePolicy: FailClosed},
			{ID: "last", Exporter: orderExporter(&log, &mu, "last", nil, false)},
		},
		OnDeliveryFailure: func(f DeliveryFailure) { failures = append(failures, f) },
	})
	_, sp, err := tr.Begin(context.Background(), Observation{Kind: KindTool, Tool: "t"})
	if err != nil {
		t.Fatalf("open failures became an error: %v", err)
	}
	_ = sp.End(Outcome{})
	mu.Lock()
	got := strings.Join(log, ",")
	mu.Unlock()
	// Four signals (v1 start, v2 start, v2 end, v1 end), each through all four exporters in order.
	want := strings.Repeat("open-fail,open-panic,closed-ok,last,", 4)
	if got+"," != want {
		t.Fatalf("order %s", got)
	}
	if len(failures) != 8 || failures[0].Reason != exportReasonFailed || failures[1].Reason != exportReasonPanic ||
		failures[0].ExporterID != "open-fail" || failures[0].Phase != PhaseStartSpan || failures[7].Phase != PhaseFinishSpan {
		t.Fatalf("failures %+v", failures)
	}
}

func TestExporters_ClosedTimeoutReturnsQuickly(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	tr := newTracer(t, Config{Exporters: []ExporterDescriptor{
		{ID: "stuck", Timeout: 50 * time.Millisecond, FailurePolicy: FailClosed,
			Exporter: ExporterFunc(func(context.Context, Signal) error { <-release; return nil })},
		{ID: "later", Exporter: ExporterFunc(func(context.Context, Signal) error { calls.Add(1); return nil })},
	}})
	began := time.Now()
	_, sp, err := tr.Begin(context.Background(), Observation{Kind: KindRun})
	var fe *ExporterFailedError
	if !errors.As(err, &fe) || fe.ID != "stuck" || fe.Reason != exportReasonTimeout {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(began); el > 2*time.Second {
		t.Fatalf("closed timeout took %v", el)
	}
	if calls.Load() != 0 {
		t.Fatal("exporter after a closed failure ran")
	}
	close(release) // the exporter recovers; the abandoned goroutine finishes and Close waits for it
	if err := sp.End(Outcome{}); err != nil {
		t.Fatalf("end after recovery: %v", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("later exporter ran %d times for the two end signals", calls.Load())
	}
}

func TestExporters_DescriptorsArePreflighted(t *testing.T) {
	ok := ExporterFunc(func(context.Context, Signal) error { return nil })
	many := make([]ExporterDescriptor, MaxExporters+1)
	for i := range many {
		many[i] = ExporterDescriptor{ID: "e" + itoa3(i%100) + string(rune('a'+i/100)), Exporter: ok}
	}
	cases := []struct {
		name string
		ds   []ExporterDescriptor
		idx  int
	}{
		{"empty id", []ExporterDescriptor{{Exporter: ok}}, 0},
		{"long id", []ExporterDescriptor{{ID: "a", Exporter: ok}, {ID: strings.Repeat("x", 129), Exporter: ok}}, 1},
		{"duplicate id", []ExporterDescriptor{{ID: "a", Exporter: ok}, {ID: "a", Exporter: ok}}, 1},
		{"no exporter", []ExporterDescriptor{{ID: "a"}}, 0},
		{"timeout too long", []ExporterDescriptor{{ID: "a", Exporter: ok, Timeout: 31 * time.Second}}, 0},
		{"negative timeout", []ExporterDescriptor{{ID: "a", Exporter: ok, Timeout: -1}}, 0},
		{"bad policy", []ExporterDescriptor{{ID: "a", Exporter: ok, FailurePolicy: "maybe"}}, 0},
		{"too many", many, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(Config{Exporters: c.ds})
			var de *DescriptorError
			if !errors.As(err, &de) || de.Index != c.idx {
				t.Fatalf("err = %v", err)
			}
		})
	}
	if _, err := New(Config{Exporters: []ExporterDescriptor{{ID: "a", Exporter: ok}}, Async: asyncFunc(nil)}); !errors.Is(err, ErrAsyncWithExporters) {
		t.Fatalf("async+exporters: %v", err)
	}
}

type asyncFunc func(Signal) error

func (f asyncFunc) Enqueue(s Signal) error {
	if f == nil {
		return nil
	}
	return f(s)
}

func TestAsync_AdmissionPolicy(t *testing.T) {
	full := errors.New("queue_full")
	var got []Signal
	open := newTracer(t, Config{Async: asyncFunc(func(s Signal) error { got = append(got, s); return full })})
	if _, _, err := open.Begin(context.Background(), Observation{Kind: KindRun}); err != nil {
		t.Fatalf("open admission failure returned %v", err)
	}
	closed := newTracer(t, Config{Async: asyncFunc(func(Signal) error { return full }), AsyncFailurePolicy: FailClosed})
	if _, _, err := closed.Begin(context.Background(), Observation{Kind: KindRun}); err == nil {
		t.Fatal("closed admission failure not returned")
	}
	if len(got) != 2 || open.Metrics().Snapshot().Series[MetricDeliveryFailures] != 1 {
		t.Fatalf("async got %d signals, snapshot %+v", len(got), open.Metrics().Snapshot())
	}
}

func TestDeliveryFailure_PreservesModelResult(t *testing.T) {
	var failures []DeliveryFailure
	tr := newTracer(t, Config{
		Exporters: []ExporterDescriptor{{ID: "closed", FailurePolicy: FailClosed,
			Exporter: ExporterFunc(func(_ context.Context, s Signal) error {
				if sp, ok := s.(*SpanSignal); ok && sp.Phase == PhaseEnd {
					return errors.New("collector down")
				}
				return nil
			})}},
		OnDeliveryFailure: func(f DeliveryFailure) { failures = append(failures, f) },
	})
	// The runtime's view: a model call that succeeded, observed through the
	// Observer interface. The end func has no way to fail the call.
	var obs Observer = tr
	ctx, end := obs.Start(context.Background(), Observation{Kind: KindModel, Provider: "p", Model: "m"})
	result := "model answer"
	end(Outcome{})
	if result != "model answer" {
		t.Fatal("unreachable")
	}
	c, _ := FromContext(ctx)
	if len(failures) != 1 {
		t.Fatalf("failures %+v", failures)
	}
	f := failures[0]
	if f.Phase != PhaseFinishSpan || f.Operation != OpGenerateContent || f.Reason != exportReasonFailed ||
		f.TraceID != c.TraceID.String() || f.SpanID != c.SpanID.String() {
		t.Fatalf("failure %+v", f)
	}
	text := scrape(t, tr.Metrics())
	if !strings.Contains(text, `adk_observability_delivery_failures_total{error_type="exporter_failed",otel_metric_overflow="",status="error"} 1`) {
		t.Fatalf("delivery failure not counted:\n%s", text)
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	srv.Client().CloseIdleConnections()
	return string(b)
}

// TestMetrics_RecentOpsCountEverySeries: labels that share a slot of the
// recent-series cache ("a" and "b") and one that does not ("cc"), each
// recorded in turn, count in their own series.
func TestMetrics_RecentOpsCountEverySeries(t *testing.T) {
	m, err := NewMetrics(MetricsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if recentSlot(&OperationLabels{Tool: "a"}) != recentSlot(&OperationLabels{Tool: "b"}) {
		t.Fatal("a and b should share a slot")
	}
	for range 10 {
		for _, tool := range []string{"a", "b", "cc", "cc"} {
			m.RecordOperation(OperationLabels{Operation: "execute_tool", Tool: tool, Status: StatusOK, Stream: "false"}, time.Millisecond)
		}
	}
	text := scrape(t, m)
	for tool, want := range map[string]int{"a": 10, "b": 10, "cc": 20} {
		series := `gen_ai_tool_name="` + tool + `",otel_metric_overflow="",status="ok",stream="false"} ` + strconv.Itoa(want)
		if !strings.Contains(text, MetricOperationCount+`{error_type="",gen_ai_operation_name="execute_tool",gen_ai_provider_name="",gen_ai_request_model="",`+series) {
			t.Errorf("tool %s: want %d records:\n%s", tool, want, text)
		}
	}
}

func TestMetrics_BoundedCardinality(t *testing.T) {
	m, err := NewMetrics(MetricsConfig{MaxSeriesPerInstrument: 2})
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracer(t, Config{Metrics: m})
	for _, tool := range []string{"a", "b", "c", "d", "c"} {
		_, end := tr.Start(context.Background(), Observation{Kind: KindTool, Tool: tool})
		end(Outcome{})
	}
	snap := m.Snapshot()
	if snap.Series[MetricOperationCount] != 2 || snap.OverflowRecords != 3 {
		t.Fatalf("snapshot %+v", snap)
	}
	text := scrape(t, m)
	if n := strings.Count(text, "\n"+MetricOperationCount+"{"); n != 3 {
		t.Fatalf("%d count series (want 2 + overflow):\n%s", n, text)
	}
	if !strings.Contains(text, `otel_metric_overflow="true",status="",stream=""} 3`) {
		t.Fatalf("overflow series missing:\n%s", text)
	}
	if !strings.Contains(text, `gen_ai_client_operation_duration_milliseconds_bucket{`) {
		t.Fatal("duration histogram missing")
	}
	if _, err := NewMetrics(MetricsConfig{MaxSeriesPerInstrument: MaxSeriesPerInstrument + 1}); err == nil {
		t.Fatal("series limit above maximum accepted")
	}
	if err := m.AddBus("bogus", 1); err == nil || m.Snapshot().RejectedRecords != 1 {
		t.Fatal("unknown bus counter accepted")
	}
	if err := m.AddBus(BusAccepted, 2); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(scrape(t, m), `adk_observability_bus_events_total{counter="accepted"} 2`) {
		t.Fatal("bus counter missing")
	}
}

func TestBatchTimeout(t *testing.T) {
	ds := []ExporterDescriptor{{Timeout: DeploymentExporterTimeout}, {Timeout: 2 * time.Second}}
	if got, err := BatchTimeout(0, ds); err != nil || got != 6251*time.Millisecond {
		t.Fatalf("auto = %v %v", got, err)
	}
	if got, err := BatchTimeout(0, nil); err != nil || got != 5*time.Second {
		t.Fatalf("auto floor = %v %v", got, err)
	}
	if _, err := BatchTimeout(6250*time.Millisecond, ds); !errors.Is(err, ErrIncompatibleBatchTimeout) {
		t.Fatalf("undersized explicit accepted: %v", err)
	}
	if got, err := BatchTimeout(7*time.Second, ds); err != nil || got != 7*time.Second {
		t.Fatalf("explicit = %v %v", got, err)
	}
}

func BenchmarkSpanNoExporter(b *testing.B) {
	tr, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	obs := Observation{Kind: KindModel, Provider: "openai", Model: "gpt-x"}
	b.ReportAllocs()
	for b.Loop() {
		_, end := tr.Start(ctx, obs)
		end(Outcome{})
	}
}

// TestTracer_SpanAllocationSize holds what a tracer that emits nothing
// allocates per span (a local eval run starts four per sample) to the
// Span, in the 288-byte size class, and its end func (16 bytes), and a
// root's own eval ids to a worker's roots only.
func TestTracer_SpanAllocationSize(t *testing.T) {
	if n := unsafe.Sizeof(Span{}); n > 288 {
		t.Fatalf("a Span is %d bytes, over the 288-byte size class", n)
	}
	tr, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var bytes uint64
	allocs := testing.AllocsPerRun(50, func() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, end := tr.Start(ctx, Observation{Kind: KindAgent, Agent: "a"})
		end(Outcome{})
		runtime.ReadMemStats(&after)
		bytes = after.TotalAlloc - before.TotalAlloc
	})
	if allocs > 2 || bytes > 288+16 {
		t.Fatalf("a span allocates %v times, %d bytes; want at most twice, 304 bytes", allocs, bytes)
	}
	// A worker's root takes its context's eval ids into a copy of its own.
	wctx := ContextWithEval(ctx, EvalIDs{JobID: "job-1", WorkerID: "w-1"})
	sctx, end := tr.Start(wctx, Observation{Kind: KindEval, Eval: &EvalIDs{CaseID: "c", SampleID: "s"}})
	defer end(Outcome{})
	c, _ := FromContext(sctx)
	if c.Eval == nil || *c.Eval != (EvalIDs{JobID: "job-1", CaseID: "c", SampleID: "s", WorkerID: "w-1"}) {
		t.Fatalf("root eval ids %+v", c.Eval)
	}
	if ids, _ := EvalFromContext(wctx); ids != (EvalIDs{JobID: "job-1", WorkerID: "w-1"}) {
		t.Fatalf("the worker's context changed: %+v", ids)
	}
}
