package observability

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// receiver is an OTLP/HTTP JSON receiver on 127.0.0.1 that decodes every
// request with pdata, the way a collector does, and answers as told.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []receivedRequest
	discard bool // benchmarks: decode but keep nothing
	respond func(w http.ResponseWriter, r *http.Request)
}

type receivedRequest struct {
	path   string
	header http.Header
	body   []byte
	traces ptrace.Traces
	logs   plogotlp.ExportRequest
	err    error
}

func newReceiver(t testing.TB) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rr := receivedRequest{path: r.URL.Path, header: r.Header.Clone(), body: body}
	switch r.URL.Path {
	case "/v1/traces":
		req := ptraceotlp.NewExportRequest()
		rr.err = req.UnmarshalJSON(body)
		rr.traces = req.Traces()
	case "/v1/logs":
		req := plogotlp.NewExportRequest()
		rr.err = req.UnmarshalJSON(body)
		rr.logs = req
	}
	rc.mu.Lock()
	if !rc.discard {
		rc.reqs = append(rc.reqs, rr)
	}
	respond := rc.respond
	rc.mu.Unlock()
	if respond != nil {
		respond(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, "{}")
}

func (rc *receiver) setRespond(f func(w http.ResponseWriter, r *http.Request)) {
	rc.mu.Lock()
	rc.respond = f
	rc.mu.Unlock()
}

func (rc *receiver) requests() []receivedRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedRequest(nil), rc.reqs...)
}

func newExporter(t testing.TB, cfg OTLPConfig) *OTLPExporter {
	t.Helper()
	e, err := NewOTLPExporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func completedSpan() *SpanSignal {
	d := int64(1500)
	return &SpanSignal{
		Schema: SpanSchemaVersion, Signal: "span", Phase: PhaseEnd, Name: "gen_ai.generate_content", Kind: SpanKindClient,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", ParentSpanID: "1111111111111111",
		TraceFlags: 1, TraceState: "v=1", StartTimeUnixNano: 1_700_000_000_000_000_000, EndTimeUnixNano: 1_700_000_000_000_001_500,
		DurationNano: &d, Status: StatusOK,
		Attributes: Attributes{
			AttrOperationName: OpGenerateContent, AttrRequestModel: "gpt-x", AttrProviderName: "openai",
			AttrInputTokens: int64(10), AttrFinishReasons: []string{"stop", "length"},
		},
	}
}

func metadataEnvelope() *Envelope {
	return &Envelope{
		Schema: EnvelopeSchemaVersion, Event: "adk.model.stop", TimestampMS: 1_700_000_000_123,
		Measurements: map[string]int64{"duration": 1500, "duration_ms": 0},
		Metadata: EnvelopeMetadata{RunID: "run-1", Model: "gpt-x", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			SpanID: "00f067aa0ba902b7", ParentID: "1111111111111111", TraceFlags: 1},
	}
}

func TestOTLPJSON_CompletedSpanIsStrict(t *testing.T) {
	b, err := MarshalSpanOTLP(completedSpan(), Resource{ServiceVersion: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ResourceSpans []struct {
			Resource   struct{ Attributes []struct{ Key string } }
			ScopeSpans []struct {
				Scope struct{ Name, Version string }
				Spans []map[string]any
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	sp := doc.ResourceSpans[0].ScopeSpans[0].Spans[0]
	checks := map[string]any{
		"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7", "parentSpanId": "1111111111111111",
		"traceState": "v=1", "kind": 3.0, "flags": 1.0, "name": "gen_ai.generate_content",
		"startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000000001500",
	}
	for k, want := range checks {
		if sp[k] != want {
			t.Errorf("%s = %#v, want %#v", k, sp[k], want)
		}
	}
	if st := sp["status"].(map[string]any); st["code"] != 1.0 {
		t.Errorf("status %v", st)
	}
	attrs := sp["attributes"].([]any)
	var keys []string
	for _, a := range attrs {
		keys = append(keys, a.(map[string]any)["key"].(string))
	}
	if strings.Join(keys, ",") != "gen_ai.operation.name,gen_ai.provider.name,gen_ai.request.model,gen_ai.response.finish_reasons,gen_ai.usage.input_tokens" {
		t.Fatalf("attribute keys not sorted: %v", keys)
	}
	if !strings.Contains(string(b), `{"key":"gen_ai.usage.input_tokens","value":{"intValue":"10"}}`) ||
		!strings.Contains(string(b), `"arrayValue":{"values":[{"stringValue":"stop"},{"stringValue":"length"}]}`) {
		t.Fatalf("typed values: %s", b)
	}
	var rkeys []string
	for _, a := range doc.ResourceSpans[0].Resource.Attributes {
		rkeys = append(rkeys, a.Key)
	}
	if strings.Join(rkeys, ",") != "adk.otlp.mapping.version,service.name,service.version,telemetry.sdk.language" ||
		doc.ResourceSpans[0].ScopeSpans[0].Scope.Name != "adk" {
		t.Fatalf("resource %v scope %+v", rkeys, doc.ResourceSpans[0].ScopeSpans[0].Scope)
	}
}

func TestOTLPJSON_TypedAnyValuesAreDeterministic(t *testing.T) {
	s := completedSpan()
	s.Attributes = Attributes{"flag": true, "ratio": 0.5, "nested": map[string]any{"b": int64(2), "a": "x"}}
	td, err := SpanToOTLP(s, Resource{})
	if err != nil {
		t.Fatal(err)
	}
	a := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
	if v, _ := a.Get("flag"); v.Type() != pcommon.ValueTypeBool || !v.Bool() {
		t.Fatal("bool")
	}
	if v, _ := a.Get("ratio"); v.Double() != 0.5 {
		t.Fatal("double")
	}
	nested, _ := a.Get("nested")
	var order []string
	nested.Map().Range(func(k string, _ pcommon.Value) bool { order = append(order, k); return true })
	if strings.Join(order, ",") != "a,b" {
		t.Fatalf("kvlist order %v", order)
	}
	s.Attributes = Attributes{"missing": nil}
	if _, err := SpanToOTLP(s, Resource{}); err == nil {
		t.Fatal("null accepted")
	}
}

func signalCode(err error) string {
	var se *SignalError
	if errors.As(err, &se) {
		return se.Code
	}
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func TestOTLPJSON_Rejections(t *testing.T) {
	mutate := func(f func(*SpanSignal)) *SpanSignal { s := completedSpan(); f(s); return s }
	cases := []struct {
		name string
		s    *SpanSignal
		want string
	}{
		{"prompt attribute", mutate(func(s *SpanSignal) { s.Attributes["prompt"] = "hi" }), "forbidden_otlp_attribute"},
		{"input messages", mutate(func(s *SpanSignal) { s.Attributes["gen_ai.input.messages"] = "hi" }), "forbidden_otlp_attribute"},
		{"tool arguments", mutate(func(s *SpanSignal) { s.Attributes["gen_ai.tool.call.arguments"] = "x" }), "forbidden_otlp_attribute"},
		{"semconv tool result", mutate(func(s *SpanSignal) { s.Attributes["gen_ai.tool.call.result"] = "x" }), "forbidden_otlp_attribute"},
		{"system instructions", mutate(func(s *SpanSignal) { s.Attributes["gen_ai.system_instructions"] = "x" }), "forbidden_otlp_attribute"},
		{"metadata key allowed", mutate(func(s *SpanSignal) { s.Attributes["gen_ai.response.id"] = "r" }), "ok"},
		{"tool result", mutate(func(s *SpanSignal) { s.Attributes["tool_result"] = "x" }), "forbidden_otlp_attribute"},
		{"nested content", mutate(func(s *SpanSignal) { s.Attributes["meta"] = map[string]any{"text": "x"} }), "forbidden_otlp_attribute"},
		{"api key", mutate(func(s *SpanSignal) { s.Attributes["api_key"] = "sk" }), "invalid_span_signal"},
		{"usage as string", mutate(func(s *SpanSignal) { s.Attributes[AttrOutputTokens] = "5" }), "invalid_span_signal"},
		{"negative usage", mutate(func(s *SpanSignal) { s.Attributes[AttrOutputTokens] = int64(-1) }), "invalid_span_signal"},
		{"negative start", mutate(func(s *SpanSignal) { s.StartTimeUnixNano = -5 }), "invalid_otlp_timestamp"},
		{"end before start", mutate(func(s *SpanSignal) { s.EndTimeUnixNano = 1 }), "invalid_span_signal"},
		{"bad kind", mutate(func(s *SpanSignal) { s.Kind = "weird" }), "invalid_span_signal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := SpanToOTLP(c.s, Resource{})
			if got := signalCode(err); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
	start := completedSpan()
	start.Phase, start.EndTimeUnixNano, start.DurationNano, start.Status = PhaseStart, 0, nil, ""
	if _, err := SpanToOTLP(start, Resource{}); !errors.Is(err, ErrIncompleteSpan) {
		t.Fatalf("start span: %v", err)
	}
}

func TestOTLPJSON_EnvelopeToLogs(t *testing.T) {
	ld, err := EnvelopeToOTLP(metadataEnvelope(), Resource{})
	if err != nil {
		t.Fatal(err)
	}
	lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	if lr.Timestamp() != pcommon.Timestamp(1_700_000_000_123*1e6) || lr.ObservedTimestamp() != lr.Timestamp() ||
		lr.Body().Str() != "adk.model.stop" || lr.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		lr.SpanID().String() != "00f067aa0ba902b7" || lr.Flags() != 1 || lr.SeverityNumber() != 0 {
		t.Fatalf("log record %v", lr)
	}
	want := map[string]any{
		"adk.content_captured": false, "adk.measurement.duration": int64(1500), "adk.measurement.duration_ms": int64(0),
		"adk.metadata.run_id": "run-1", "adk.metadata.model": "gpt-x", "adk.metadata.parent_id": "1111111111111111",
	}
	if got := lr.Attributes().AsRaw(); !mapsEqual(got, want) {
		t.Fatalf("attributes %v", got)
	}
	withContent := metadataEnvelope()
	withContent.ContentCaptured, withContent.Content = true, "x"
	if _, err := EnvelopeToOTLP(withContent, Resource{}); !errors.Is(err, ErrContentNotExportable) {
		t.Fatalf("content envelope: %v", err)
	}
	neg := metadataEnvelope()
	neg.TimestampMS = -1
	if _, err := EnvelopeToOTLP(neg, Resource{}); signalCode(err) != "invalid_otlp_timestamp" {
		t.Fatalf("negative time: %v", err)
	}
}

func mapsEqual(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func exportErr(t *testing.T, err error) *ExportError {
	t.Helper()
	var ee *ExportError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v, want *ExportError", err)
	}
	return ee
}

func TestOTLPExporter_AgainstReceiver(t *testing.T) {
	rc := newReceiver(t)
	exp := newExporter(t, OTLPConfig{Endpoint: rc.srv.URL, AllowPrivateHosts: true,
		Headers: map[string]string{"Authorization": "Bearer sk-secret-xyz"}, Timeout: 2 * time.Second})

	t.Run("200 trace post", func(t *testing.T) {
		if err := exp.Export(context.Background(), completedSpan()); err != nil {
			t.Fatal(err)
		}
		r := rc.requests()[len(rc.requests())-1]
		if r.path != "/v1/traces" || r.err != nil || r.header.Get("Content-Type") != "application/json" ||
			r.header.Get("Authorization") != "Bearer sk-secret-xyz" || r.header.Get("User-Agent") != OTLPUserAgent {
			t.Fatalf("request %s %v %v", r.path, r.err, r.header)
		}
		sp := r.traces.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		if sp.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sp.ParentSpanID().String() != "1111111111111111" ||
			sp.Kind() != ptrace.SpanKindClient || sp.Status().Code() != ptrace.StatusCodeOk || sp.TraceState().AsRaw() != "v=1" {
			t.Fatalf("decoded span %v", sp)
		}
	})
	t.Run("envelope uses logs path", func(t *testing.T) {
		if err := exp.Export(context.Background(), metadataEnvelope()); err != nil {
			t.Fatal(err)
		}
		r := rc.requests()[len(rc.requests())-1]
		if r.path != "/v1/logs" || r.err != nil || r.logs.Logs().LogRecordCount() != 1 {
			t.Fatalf("logs request %s %v", r.path, r.err)
		}
	})
	t.Run("start span sends nothing", func(t *testing.T) {
		n := len(rc.requests())
		s := completedSpan()
		s.Phase, s.EndTimeUnixNano, s.DurationNano, s.Status = PhaseStart, 0, nil, ""
		if err := exp.Export(context.Background(), s); err != nil || len(rc.requests()) != n {
			t.Fatalf("start span: %v, %d requests", err, len(rc.requests())-n)
		}
	})

	redirected := 0
	var redirectMu sync.Mutex
	cases := []struct {
		name       string
		respond    func(w http.ResponseWriter, r *http.Request)
		class      string
		reason     string
		status     int
		retryAfter time.Duration
		rejected   int64
	}{
		{"400", statusOnly(400, ""), ClassPermanent, "http_status", 400, 0, 0},
		{"500", statusOnly(500, ""), ClassPermanent, "http_status", 500, 0, 0},
		{"302 not followed", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				redirectMu.Lock()
				redirected++
				redirectMu.Unlock()
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, ClassPermanent, "http_status", 302, 0, 0},
		{"429 retry-after", statusOnly(429, "3"), ClassTransient, "http_status", 429, 3 * time.Second, 0},
		{"503 retry-after", statusOnly(503, "3"), ClassTransient, "http_status", 503, 3 * time.Second, 0},
		{"502 date retry-after ignored", statusOnly(502, "Wed, 21 Oct 2015 07:28:00 GMT"), ClassTransient, "http_status", 502, 0, 0},
		{"504", statusOnly(504, "86401"), ClassTransient, "http_status", 504, 0, 0},
		{"partial success", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"partialSuccess":{"rejectedSpans":"2","errorMessage":"bad"}}`)
		}, ClassPermanent, "partial_success_rejected", 200, 0, 2},
		{"non-JSON success", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "ok")
		}, ClassPermanent, "invalid_response_content_type", 0, 0, 0},
		{"bad JSON success", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{not json")
		}, ClassPermanent, "invalid_success_response", 0, 0, 0},
		{"oversized response", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"x":"`+strings.Repeat("a", 70<<10)+`"}`)
		}, ClassTransient, "response_too_large", 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc.setRespond(c.respond)
			defer rc.setRespond(nil)
			ee := exportErr(t, exp.Export(context.Background(), completedSpan()))
			if ee.Classification != c.class || ee.Reason != c.reason || ee.Status != c.status ||
				ee.RetryAfter != c.retryAfter || ee.RejectedItems != c.rejected || ee.Retryable() != (c.class == ClassTransient) {
				t.Fatalf("got %+v", ee)
			}
			if strings.Contains(ee.Error(), "sk-secret") || strings.Contains(ee.Error(), "bad") {
				t.Fatalf("error echoes input: %v", ee)
			}
		})
	}
	redirectMu.Lock()
	defer redirectMu.Unlock()
	if redirected != 0 {
		t.Fatal("redirect followed")
	}
}

func statusOnly(code int, retryAfter string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "sk-secret-xyz echoed by a bad server")
	}
}

func TestOTLPExporter_SlowResponseTimesOut(t *testing.T) {
	rc := newReceiver(t)
	release := make(chan struct{})
	rc.setRespond(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	exp := newExporter(t, OTLPConfig{Endpoint: rc.srv.URL, AllowPrivateHosts: true, Timeout: 100 * time.Millisecond})
	ee := exportErr(t, exp.Export(context.Background(), completedSpan()))
	if ee.Classification != ClassTransient || ee.Reason != "timeout" {
		t.Fatalf("got %+v", ee)
	}
}

func TestOTLPExporter_BoundsAndPolicy(t *testing.T) {
	rc := newReceiver(t)
	t.Run("request too large is not sent", func(t *testing.T) {
		exp := newExporter(t, OTLPConfig{Endpoint: rc.srv.URL, AllowPrivateHosts: true, MaxRequestBytes: 1024})
		s := completedSpan()
		s.Attributes[AttrResponseID] = strings.Repeat("r", 2000)
		ee := exportErr(t, exp.Export(context.Background(), s))
		if ee.Classification != ClassPermanent || ee.Reason != "request_too_large" || len(rc.requests()) != 0 {
			t.Fatalf("got %+v, %d requests", ee, len(rc.requests()))
		}
	})
	t.Run("loopback refused unless allowed", func(t *testing.T) {
		exp := newExporter(t, OTLPConfig{Endpoint: rc.srv.URL})
		ee := exportErr(t, exp.Export(context.Background(), completedSpan()))
		if ee.Classification != ClassPermanent || ee.Reason != "private_host_forbidden" || len(rc.requests()) != 0 {
			t.Fatalf("got %+v", ee)
		}
	})
	t.Run("content envelope is permanent", func(t *testing.T) {
		exp := newExporter(t, OTLPConfig{Endpoint: rc.srv.URL, AllowPrivateHosts: true})
		e := metadataEnvelope()
		e.ContentCaptured, e.Content = true, "prompt"
		ee := exportErr(t, exp.Export(context.Background(), e))
		if ee.Reason != "content_bearing_envelope_not_exportable" || ee.Retryable() {
			t.Fatalf("got %+v", ee)
		}
	})
	t.Run("transport error is transient and redacted", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		exp := newExporter(t, OTLPConfig{Endpoint: "http://" + addr, AllowPrivateHosts: true,
			Headers: map[string]string{"x-api-key": "sk-secret-xyz"}})
		ee := exportErr(t, exp.Export(context.Background(), completedSpan()))
		if ee.Classification != ClassTransient || ee.Reason != "connect_failed" || strings.Contains(ee.Error(), "sk-secret") {
			t.Fatalf("got %+v", ee)
		}
	})
}

func TestOTLPConfig_Validation(t *testing.T) {
	hdr := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	many := map[string]string{}
	for i := range 33 {
		many["h"+itoa3(i)] = "v"
	}
	cases := []struct {
		name string
		cfg  OTLPConfig
	}{
		{"missing endpoint", OTLPConfig{}},
		{"ftp", OTLPConfig{Endpoint: "ftp://collector:4318"}},
		{"userinfo", OTLPConfig{Endpoint: "http://user:pw@collector:4318"}},
		{"query", OTLPConfig{Endpoint: "http://collector:4318?x=1"}},
		{"empty query", OTLPConfig{Endpoint: "http://collector:4318?"}},
		{"fragment", OTLPConfig{Endpoint: "http://collector:4318#f"}},
		{"base path", OTLPConfig{Endpoint: "http://collector:4318/otlp"}},
		{"bad host", OTLPConfig{Endpoint: "http://bad_host!:4318"}},
		{"bad port", OTLPConfig{Endpoint: "http://collector:99999"}},
		{"empty port", OTLPConfig{Endpoint: "http://collector:"}},
		{"too long", OTLPConfig{Endpoint: "http://" + strings.Repeat("a", 2050)}},
		{"// path", OTLPConfig{Endpoint: "http://c", TracesPath: "//evil/v1/traces"}},
		{"relative path", OTLPConfig{Endpoint: "http://c", LogsPath: "v1/logs"}},
		{"query in path", OTLPConfig{Endpoint: "http://c", TracesPath: "/v1/traces?x"}},
		{"bad escape", OTLPConfig{Endpoint: "http://c", TracesPath: "/v1/%zz"}},
		{"reserved header", OTLPConfig{Endpoint: "http://c", Headers: hdr("Content-Type", "x")}},
		{"duplicate header", OTLPConfig{Endpoint: "http://c", Headers: hdr("X-Key", "a", "x-key", "b")}},
		{"CRLF value", OTLPConfig{Endpoint: "http://c", Headers: hdr("x-key", "a\r\nInjected: 1")}},
		{"bad name", OTLPConfig{Endpoint: "http://c", Headers: hdr("x key", "a")}},
		{"long value", OTLPConfig{Endpoint: "http://c", Headers: hdr("x", strings.Repeat("v", 8193))}},
		{"too many headers", OTLPConfig{Endpoint: "http://c", Headers: many}},
		{"timeout too small", OTLPConfig{Endpoint: "http://c", Timeout: time.Millisecond}},
		{"timeout too large", OTLPConfig{Endpoint: "http://c", Timeout: 121 * time.Second}},
		{"request limit", OTLPConfig{Endpoint: "http://c", MaxRequestBytes: 10}},
		{"response limit", OTLPConfig{Endpoint: "http://c", MaxResponseBytes: 2 << 20}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewOTLPExporter(c.cfg)
			var ce *OTLPConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v", err)
			}
			if strings.Contains(err.Error(), "Injected") || strings.Contains(err.Error(), "pw") {
				t.Fatalf("error echoes a value: %v", err)
			}
		})
	}
	for _, ep := range []string{"http://collector:4318", "https://otel.example.com/", "http://10.0.0.1:4318", "http://[::1]:4318"} {
		e, err := NewOTLPExporter(OTLPConfig{Endpoint: ep})
		if err != nil {
			t.Fatalf("%s: %v", ep, err)
		}
		_ = e.Close()
	}
}

func TestDeploymentEnv_Bridge(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	t.Run("headers alone do not activate", func(t *testing.T) {
		d, err := DeploymentExporter(env(map[string]string{EnvOTLPHeaders: "authorization=Bearer x"}), Resource{})
		if d != nil || err != nil {
			t.Fatalf("%v %v", d, err)
		}
	})
	t.Run("endpoint activates a fail-open descriptor", func(t *testing.T) {
		d, err := DeploymentExporter(env(map[string]string{EnvOTLPEndpoint: "http://otel-collector:4318",
			EnvOTLPHeaders: " Authorization = Bearer%20abc%2541 , x-tenant=t1"}), Resource{})
		if err != nil {
			t.Fatal(err)
		}
		exp := d.Exporter.(*OTLPExporter)
		defer exp.Close()
		if d.ID != DeploymentExporterID || d.FailurePolicy != FailOpen || d.Timeout != DeploymentExporterTimeout ||
			exp.cfg.Timeout != DeploymentOTLPTimeout || exp.headers.Get("Authorization") != "Bearer abc%41" ||
			exp.headers.Get("X-Tenant") != "t1" {
			t.Fatalf("descriptor %+v cfg %+v", d, exp.cfg)
		}
		if err := ValidateExporters([]ExporterDescriptor{*d}); err != nil {
			t.Fatal(err)
		}
	})
	bad := []struct{ name, endpoint, headers string }{
		{"endpoint with path", "http://c:4318/v1/traces", ""},
		{"endpoint with userinfo", "http://u:sk-secret-xyz@c:4318", ""},
		{"semicolon metadata", "http://c", "k=v;prop=1"},
		{"bad escape", "http://c", "k=sk-secret-xyz%zz"},
		{"truncated escape", "http://c", "k=sk-secret-xyz%2"},
		{"invalid utf8", "http://c", "k=%ff%fe"},
		{"duplicate", "http://c", "K=sk-secret-xyz,k=2"},
		{"missing equals", "http://c", "sk-secret-xyz"},
		{"empty entry", "http://c", "a=1,,b=2"},
		{"33 entries", "http://c", strings.TrimSuffix(strings.Repeat("k=v,", 33), ",")},
		{"too large", "http://c", "k=" + strings.Repeat("v", 32767)},
		{"reserved name", "http://c", "host=sk-secret-xyz"},
		{"CRLF after decoding", "http://c", "k=sk-secret-xyz%0d%0aX: 1"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			d, err := DeploymentExporter(env(map[string]string{EnvOTLPEndpoint: c.endpoint, EnvOTLPHeaders: c.headers}), Resource{})
			var ee *EnvError
			if d != nil || !errors.As(err, &ee) {
				t.Fatalf("got %v, %v", d, err)
			}
			if strings.Contains(err.Error(), "sk-secret") {
				t.Fatalf("error echoes a value: %v", err)
			}
		})
	}
}

func TestTracer_ExportsThroughOTLPToReceiver(t *testing.T) {
	rc := newReceiver(t)
	exp := newExporter(t, OTLPConfig{Endpoint: rc.srv.URL, AllowPrivateHosts: true})
	tr := newTracer(t, Config{Exporters: []ExporterDescriptor{{ID: "otlp", Exporter: exp}}})
	syntheticRun(tr)
	var spans, logs int
	for _, r := range rc.requests() {
		if r.err != nil {
			t.Fatalf("receiver could not decode %s: %v", r.path, r.err)
		}
		switch r.path {
		case "/v1/traces":
			spans += r.traces.SpanCount()
		case "/v1/logs":
			logs += r.logs.Logs().LogRecordCount()
		}
		if strings.Contains(string(r.body), "SECRET") {
			t.Fatalf("content exported: %s", r.body)
		}
	}
	// 4 completed spans (starts never exported), 8 lifecycle envelopes.
	if spans != 4 || logs != 8 {
		t.Fatalf("exported %d spans, %d log records", spans, logs)
	}
}

func BenchmarkSpanOTLPExporter(b *testing.B) {
	rc := newReceiver(b)
	rc.discard = true
	exp := newExporter(b, OTLPConfig{Endpoint: rc.srv.URL, AllowPrivateHosts: true})
	tr, err := New(Config{Exporters: []ExporterDescriptor{{ID: "otlp", Exporter: exp}}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tr.Close(context.Background()) }()
	ctx := context.Background()
	obs := Observation{Kind: KindModel, Provider: "openai", Model: "gpt-x"}
	b.ReportAllocs()
	for b.Loop() {
		_, end := tr.Start(ctx, obs)
		end(Outcome{})
	}
}
