package otlpreceiver_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/store/otlpreceiver"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// Tokens of the test principals.
const (
	tokAlice = "tok-alice-0123456789"
	tokBob   = "tok-bob-0123456789"
)

// harness is embedded NATS + a store node + the receiver on 127.0.0.1.
type harness struct {
	nc   *nats.Conn
	pool *bus.PublisherPool
	recv *otlpreceiver.Receiver
	url  string
}

func newHarness(t testing.TB, pubCfg bus.PublisherConfig) *harness {
	t.Helper()
	srv := bustest.Start(t, bus.ServerConfig{})
	srv.SignalStream(t, bus.SignalStreamConfig{})
	nc := srv.NC
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := tracestore.Open(tracestore.Config{Dir: t.TempDir(), Small: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	tokens := tracenode.NewTokens(map[string]string{tokAlice: "alice", tokBob: "bob"})
	node, err := tracenode.Start(ctx, tracenode.Config{Name: "a", Conn: nc, Store: st, Auth: tokens})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	pool := bus.NewPublisherPool(nc, pubCfg, 0)
	t.Cleanup(pool.Close)
	recv, err := otlpreceiver.New(otlpreceiver.Config{Auth: tokens, Publisher: pool, MaxBodyBytes: 64 << 10, MaxDecodedBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(recv) // listens on 127.0.0.1
	t.Cleanup(hs.Close)
	return &harness{nc: nc, pool: pool, recv: recv, url: hs.URL + otlpreceiver.TracesPath}
}

// query returns the principal's stored spans of a trace (the records'
// projected events).
func (h *harness) query(t testing.TB, token, traceID string) []map[string]any {
	t.Helper()
	return h.querySelector(t, token, map[string]string{"trace_id": traceID})
}

func (h *harness) querySelector(t testing.TB, token string, sel map[string]string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reply, err := tracenode.Query(ctx, h.nc, tracenode.QueryRequest{Token: token, Selector: sel, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Error != nil {
		t.Fatalf("query: %+v", reply.Error)
	}
	var out []map[string]any
	for _, raw := range reply.Page.Events {
		var rec struct {
			Event map[string]any `json:"event"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil || rec.Event == nil {
			t.Fatalf("stored record %s: %v", raw, err)
		}
		out = append(out, rec.Event)
	}
	return out
}

// waitStored waits until n events of the trace are queryable by token.
func (h *harness) waitStored(t testing.TB, token, traceID string, n int) []map[string]any {
	t.Helper()
	var evs []map[string]any
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d stored spans of %s", n, traceID), func() bool {
		evs = h.query(t, token, traceID)
		return len(evs) >= n
	})
	return evs
}

// post sends body and returns the status, content type and body.
func post(t testing.TB, url, token, ct string, body []byte, hdr map[string]string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// traceID16 makes a distinct trace id per test.
func traceID16(seed byte) pcommon.TraceID {
	var id pcommon.TraceID
	for i := range id {
		id[i] = seed + byte(i)
	}
	return id
}

// makeTraces builds n spans of one trace with metadata, content and
// credential attributes.
func makeTraces(tid pcommon.TraceID, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "agent")
	rs.Resource().Attributes().PutStr("process.command_line", "agent --api-key=sk-resource-secret")
	rs.Resource().Attributes().PutStr("run_id", "run-res")
	rs.Resource().Attributes().PutStr("deployment.environment.name", "ci")
	rs.Resource().Attributes().PutStr("host.arch", "amd64")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("test")
	base := uint64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	for i := range n {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, byte(i + 1)})
		if i > 0 {
			sp.SetParentSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 1})
		}
		sp.SetName("gen_ai.chat")
		sp.SetKind(ptrace.SpanKindClient)
		sp.SetStartTimestamp(pcommon.Timestamp(base + uint64(i)*1000))
		sp.SetEndTimestamp(pcommon.Timestamp(base + uint64(i)*1000 + 500))
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("boom: the user said something secret")
		a := sp.Attributes()
		a.PutStr(observability.AttrOperationName, "chat")
		a.PutStr(observability.AttrRequestModel, "gpt-test")
		a.PutStr("gen_ai.system", "openai")
		a.PutInt(observability.AttrInputTokens, 12)
		a.PutStr(observability.AttrErrorType, "timeout")
		a.PutEmptySlice(observability.AttrFinishReasons).AppendEmpty().SetStr("stop")
		if i%2 == 1 {
			a.PutStr("run_id", "run-own")
		}
		a.PutStr("gen_ai.prompt", "PROMPT-CONTENT tell me a secret")
		a.PutStr("gen_ai.tool.call.arguments", `{"ARGS-CONTENT":1}`)
		a.PutStr("api_key", "sk-CREDENTIAL")
		a.PutStr("http.route", "/chat")
		a.PutStr(observability.AttrEvalJobID, "job-ext")
		a.PutStr(observability.AttrEvalCaseID, "case-1")
		a.PutStr(observability.AttrEvalSampleID, fmt.Sprintf("sample-%d", i%2))
		a.PutStr(observability.AttrEvalWorkerID, "ext-agent")
		if i == 3 {
			a.PutStr("service.name", "sub-agent") // a span's own wins over its resource's
		}
		ev := sp.Events().AppendEmpty()
		ev.SetName("gen_ai.content.prompt")
		ev.Attributes().PutStr("gen_ai.prompt", "EVENT-CONTENT")
	}
	return td
}

func marshal(t testing.TB, td ptrace.Traces, isJSON bool) []byte {
	t.Helper()
	req := ptraceotlp.NewExportRequestFromTraces(td)
	var b []byte
	var err error
	if isJSON {
		b, err = req.MarshalJSON()
	} else {
		b, err = req.MarshalProto()
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeResponse(t testing.TB, ct string, body []byte) ptraceotlp.ExportResponse {
	t.Helper()
	resp := ptraceotlp.NewExportResponse()
	var err error
	if ct == otlpreceiver.ContentTypeJSON {
		err = resp.UnmarshalJSON(body)
	} else {
		err = resp.UnmarshalProto(body)
	}
	if err != nil {
		t.Fatalf("response %q: %v", body, err)
	}
	return resp
}

var forbiddenInStore = []string{"PROMPT-CONTENT", "ARGS-CONTENT", "sk-CREDENTIAL", "EVENT-CONTENT", "sk-resource-secret",
	"gen_ai.prompt", "arguments", "api_key", "boom", "http.route", "host.arch", "process.command_line"}

func TestReceiver_SpansBecomeQueryableUnderTheTokensPrincipal(t *testing.T) {
	h := newHarness(t, otlpreceiver.PublisherConfig(nil))
	for i, enc := range []struct {
		name   string
		ct     string
		isJSON bool
	}{{"protobuf", otlpreceiver.ContentTypeProtobuf, false}, {"json", otlpreceiver.ContentTypeJSON, true}} {
		t.Run(enc.name, func(t *testing.T) {
			tid := traceID16(byte(16 * (i + 1)))
			tidHex := hex.EncodeToString(tid[:])
			code, ct, body := post(t, h.url, tokAlice, enc.ct, marshal(t, makeTraces(tid, 4), enc.isJSON), nil)
			if code != http.StatusOK || ct != enc.ct {
				t.Fatalf("status %d %s: %s", code, ct, body)
			}
			if ps := decodeResponse(t, ct, body).PartialSuccess(); ps.RejectedSpans() != 0 {
				t.Fatalf("partial success %d %q", ps.RejectedSpans(), ps.ErrorMessage())
			}
			evs := h.waitStored(t, tokAlice, tidHex, 4)
			if len(evs) != 4 {
				t.Fatalf("stored %d spans, want 4", len(evs))
			}
			raw, _ := json.Marshal(evs)
			for _, bad := range forbiddenInStore {
				if bytes.Contains(raw, []byte(bad)) {
					t.Errorf("stored spans contain %q: %s", bad, raw)
				}
			}
			ev := evs[1]
			attrs, _ := ev["attributes"].(map[string]any)
			want := map[string]any{
				"trace_id": tidHex, "span_id": "0102030405060702", "parent_span_id": "0102030405060701",
				"name": "gen_ai.chat", "kind": "client", "phase": "end", "status": "error",
			}
			for k, v := range want {
				if ev[k] != v {
					t.Errorf("%s = %v, want %v (event %v)", k, ev[k], v, ev)
				}
			}
			if fmt.Sprint(ev["duration_nano"]) != "500" {
				t.Errorf("duration_nano = %v", ev["duration_nano"])
			}
			wantAttrs := map[string]string{
				"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-test", "gen_ai.provider.name": "openai",
				"gen_ai.usage.input_tokens": "12", "error.type": "timeout", "gen_ai.response.finish_reasons": "[stop]",
				"run_id": "run-own", "service.name": "agent", "deployment.environment.name": "ci",
				"adk.eval.job_id": "job-ext", "adk.eval.case_id": "case-1", "adk.eval.sample_id": "sample-1", "adk.eval.worker_id": "ext-agent",
			}
			for k, v := range wantAttrs {
				if fmt.Sprint(attrs[k]) != v {
					t.Errorf("attribute %s = %v, want %s (attributes %v)", k, attrs[k], v, attrs)
				}
			}
			if a0, _ := evs[0]["attributes"].(map[string]any); a0["run_id"] != "run-res" {
				t.Errorf("resource run_id not applied: %v", a0)
			}
			if a3, _ := evs[3]["attributes"].(map[string]any); a3["service.name"] != "sub-agent" {
				t.Errorf("span service.name overridden by the resource's: %v", a3)
			}
			if other := h.query(t, tokBob, tidHex); len(other) != 0 {
				t.Fatalf("bob sees %d of alice's spans", len(other))
			}
		})
	}
	// An external agent's spans are found by the eval ids it set, as
	// adk trace query --job JOB --case C --sample S finds them.
	byEval := h.querySelector(t, tokAlice, map[string]string{"job_id": "job-ext", "case_id": "case-1", "sample_id": "sample-1"})
	if len(byEval) != 4 {
		t.Fatalf("query by job, case and sample: %d spans, want 4", len(byEval))
	}
	if other := h.querySelector(t, tokBob, map[string]string{"job_id": "job-ext"}); len(other) != 0 {
		t.Fatalf("bob sees %d of alice's spans by job", len(other))
	}
	s := h.recv.Stats()
	if s.SpansAccepted != 8 || s.SpansReceived != 8 || s.ContentAttributesDropped != 8*3 {
		t.Fatalf("stats %+v", s)
	}
}

func TestReceiver_RejectsUnauthenticated(t *testing.T) {
	h := newHarness(t, bus.PublisherConfig{})
	body := marshal(t, makeTraces(traceID16(1), 1), false)
	for _, tc := range []struct{ name, auth string }{
		{"no header", ""}, {"unknown token", "Bearer nope"}, {"basic scheme", "Basic " + tokAlice}, {"empty bearer", "Bearer "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.auth != "" {
				hdr["Authorization"] = tc.auth
			}
			code, _, _ := post(t, h.url, "", otlpreceiver.ContentTypeProtobuf, body, hdr)
			if code != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", code)
			}
		})
	}
	if s := h.recv.Stats(); s.Unauthorized != 4 || s.SpansReceived != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestReceiver_ErrorResponses(t *testing.T) {
	h := newHarness(t, bus.PublisherConfig{})
	valid := marshal(t, makeTraces(traceID16(2), 1), false)
	big := make([]byte, 65<<10)
	var gzBomb bytes.Buffer
	zw := gzip.NewWriter(&gzBomb)
	_, _ = zw.Write(make([]byte, 300<<10)) // inflates past MaxDecodedBytes
	_ = zw.Close()
	for _, tc := range []struct {
		name string
		ct   string
		body []byte
		hdr  map[string]string
		want int
	}{
		{"malformed protobuf", otlpreceiver.ContentTypeProtobuf, []byte{0xff, 0xff, 0xff}, nil, http.StatusBadRequest},
		{"malformed json", otlpreceiver.ContentTypeJSON, []byte(`{"resourceSpans":[`), nil, http.StatusBadRequest},
		{"corrupt gzip", otlpreceiver.ContentTypeProtobuf, []byte("not gzip"), map[string]string{"Content-Encoding": "gzip"}, http.StatusBadRequest},
		{"oversized body", otlpreceiver.ContentTypeProtobuf, big, nil, http.StatusRequestEntityTooLarge},
		{"oversized inflated", otlpreceiver.ContentTypeProtobuf, gzBomb.Bytes(), map[string]string{"Content-Encoding": "gzip"}, http.StatusRequestEntityTooLarge},
		{"unsupported type", "text/plain", valid, nil, http.StatusUnsupportedMediaType},
		{"no type", "", valid, nil, http.StatusUnsupportedMediaType},
		{"unsupported encoding", otlpreceiver.ContentTypeProtobuf, valid, map[string]string{"Content-Encoding": "br"}, http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := post(t, h.url, tokAlice, tc.ct, tc.body, tc.hdr)
			if code != tc.want {
				t.Fatalf("status %d, want %d: %s", code, tc.want, body)
			}
		})
	}
	t.Run("json error is a google.rpc.Status", func(t *testing.T) {
		code, ct, body := post(t, h.url, tokAlice, otlpreceiver.ContentTypeJSON, []byte("{"), nil)
		var st struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if code != http.StatusBadRequest || ct != otlpreceiver.ContentTypeJSON || json.Unmarshal(body, &st) != nil || st.Code != 3 {
			t.Fatalf("%d %s %s", code, ct, body)
		}
	})
	t.Run("GET", func(t *testing.T) {
		resp, err := http.Get(h.url)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	if s := h.recv.Stats(); s.Malformed != 4 || s.TooLarge != 2 || s.UnsupportedMedia != 3 || s.SpansAccepted != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestReceiver_GzipBody(t *testing.T) {
	h := newHarness(t, bus.PublisherConfig{})
	tid := traceID16(3)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(marshal(t, makeTraces(tid, 3), true))
	_ = zw.Close()
	code, _, body := post(t, h.url, tokAlice, otlpreceiver.ContentTypeJSON, buf.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	h.waitStored(t, tokAlice, hex.EncodeToString(tid[:]), 3)
}

func TestReceiver_PartialSuccess(t *testing.T) {
	h := newHarness(t, bus.PublisherConfig{})
	tid := traceID16(4)
	td := makeTraces(tid, 3)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	spans.At(1).SetEndTimestamp(spans.At(1).StartTimestamp() - 1) // end before start
	spans.At(2).SetSpanID(pcommon.SpanID{})                       // no span id
	code, ct, body := post(t, h.url, tokAlice, otlpreceiver.ContentTypeProtobuf, marshal(t, td, false), nil)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	ps := decodeResponse(t, ct, body).PartialSuccess()
	if ps.RejectedSpans() != 2 || !strings.Contains(ps.ErrorMessage(), "timing") {
		t.Fatalf("partial success %d %q", ps.RejectedSpans(), ps.ErrorMessage())
	}
	h.waitStored(t, tokAlice, hex.EncodeToString(tid[:]), 1)
	if s := h.recv.Stats(); s.SpansRejected != 2 || s.SpansAccepted != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// fullPublisher refuses everything after the first n records, like a
// full publisher queue.
type fullPublisher struct{ n int }

func (f *fullPublisher) PublishRecord(_, _ string, _ []byte) error {
	if f.n == 0 {
		return bus.ErrQueueFull
	}
	f.n--
	return nil
}

func TestReceiver_BackPressure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		admit    int
		want     int
		rejected int64
	}{{"queue full", 0, http.StatusServiceUnavailable, 0}, {"queue fills mid-request", 2, http.StatusOK, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			recv, err := otlpreceiver.New(otlpreceiver.Config{Auth: tracenode.NewTokens(map[string]string{tokAlice: "alice"}), Publisher: &fullPublisher{tc.admit}})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, otlpreceiver.TracesPath, bytes.NewReader(marshal(t, makeTraces(traceID16(5), 5), false)))
			req.Header.Set("Content-Type", otlpreceiver.ContentTypeProtobuf)
			req.Header.Set("Authorization", "Bearer "+tokAlice)
			rec := httptest.NewRecorder()
			recv.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d", rec.Code, tc.want)
			}
			if tc.want == http.StatusServiceUnavailable {
				if rec.Header().Get("Retry-After") == "" {
					t.Fatal("no Retry-After")
				}
			} else if ps := decodeResponse(t, otlpreceiver.ContentTypeProtobuf, rec.Body.Bytes()).PartialSuccess(); ps.RejectedSpans() != tc.rejected {
				t.Fatalf("rejected %d, want %d", ps.RejectedSpans(), tc.rejected)
			}
			if s := recv.Stats(); s.SpansBackpressured != uint64(5-tc.admit) {
				t.Fatalf("stats %+v", s)
			}
		})
	}
	t.Run("real publisher queue", func(t *testing.T) {
		h := newHarness(t, bus.PublisherConfig{MaxQueueEvents: 4, MaxQueueBytes: 1 << 20, MaxEventBytes: 64 << 10, MaxBatchBytes: 64 << 10})
		body := marshal(t, makeTraces(traceID16(6), 16), false)
		code, ct, resp := post(t, h.url, tokAlice, otlpreceiver.ContentTypeProtobuf, body, nil)
		if code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		// The queue holds 4 spans, but the publisher may ship some to
		// JetStream while the receiver is still enqueueing, freeing room:
		// at least 4 are admitted and some of the 16 must be rejected.
		if r := decodeResponse(t, ct, resp).PartialSuccess().RejectedSpans(); r < 1 || r > 12 {
			t.Fatalf("rejected %d, want 1..12", r)
		}
	})
}
