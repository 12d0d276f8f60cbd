package otlpexport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/store/otlpexport"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// backend is the outside world's OTLP/HTTP trace backend: a real server on
// 127.0.0.1 that decodes ExportTraceServiceRequests with the collector's
// pdata (ptraceotlp), answers as the test's script says, and keeps what
// it accepted.
type backend struct {
	srv *httptest.Server

	mu       sync.Mutex
	script   func(n int, r *http.Request) (status int, hdr map[string]string) // nil: accept
	partial  int64                                                            // rejected_spans to report on success
	requests int
	times    []time.Time
	spans    map[string]int            // "trace/span" → times received
	service  map[string]string         // span id → service.name
	attrs    map[string]map[string]any // span id → attributes
	headers  []http.Header
}

func newBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{spans: map[string]int{}, service: map[string]string{}, attrs: map[string]map[string]any{}}
	b.srv = httptest.NewServer(http.HandlerFunc(b.handle))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.requests++
	n := b.requests
	b.times = append(b.times, time.Now())
	b.headers = append(b.headers, r.Header.Clone())
	script, partial := b.script, b.partial
	b.mu.Unlock()
	if script != nil {
		status, hdr := script(n, r)
		if status == -1 { // slow: hold the request until the client gives up
			<-r.Context().Done()
			return
		}
		if status != 0 {
			for k, v := range hdr {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			return
		}
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		http.Error(w, "bad traces", http.StatusBadRequest)
		return
	}
	td := req.Traces()
	b.mu.Lock()
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		svc, _ := rs.Resource().Attributes().Get("service.name")
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				sp := ss.At(k)
				id := sp.TraceID().String() + "/" + sp.SpanID().String()
				b.spans[id]++
				b.service[sp.SpanID().String()] = svc.AsString()
				b.attrs[sp.SpanID().String()] = sp.Attributes().AsRaw()
			}
		}
	}
	b.mu.Unlock()
	resp := ptraceotlp.NewExportResponse()
	if partial > 0 {
		resp.PartialSuccess().SetRejectedSpans(partial)
	}
	out, _ := resp.MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (b *backend) set(script func(int, *http.Request) (int, map[string]string)) {
	b.mu.Lock()
	b.script = script
	b.mu.Unlock()
}

func (b *backend) distinct() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.spans)
}

func (b *backend) has(ids []string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		if b.spans[id] == 0 {
			return false
		}
	}
	return true
}

func (b *backend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests
}

// cluster is an embedded NATS server with ADK_SIGNALS.
type cluster struct {
	nc *nats.Conn
	js jetstream.JetStream
	// s2 makes publish send S2-compressed batches, as a bus.Publisher
	// does; otherwise they are plain, as older publishers sent them.
	s2 bool
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	srv := bustest.Start(t, bus.ServerConfig{})
	srv.SignalStream(t, bus.SignalStreamConfig{})
	return &cluster{nc: srv.NC, js: srv.JS}
}

const traceA = "0af7651916cd43dd8448eb211c80319c"

// publish sends one stream message of n completed spans (ids from first)
// plus a start phase and an envelope, which are not forwarded; it returns
// the "trace/span" ids of the completed spans.
func (c *cluster) publish(t *testing.T, first, n int, attrs observability.Attributes) []string {
	t.Helper()
	var recs []bus.SignalRecord
	var ids []string
	for i := first; i < first+n; i++ {
		d := int64(1000)
		a := observability.Attributes{"gen_ai.operation.name": "chat", "run_id": "run-1"}
		for k, v := range attrs {
			a[k] = v
		}
		s := &observability.SpanSignal{Schema: 2, Signal: "span", Phase: "end", Name: "gen_ai.chat", Kind: "client",
			TraceID: traceA, SpanID: fmt.Sprintf("%016x", i+1), TraceFlags: 1,
			StartTimeUnixNano: int64(i+1) * 1e6, EndTimeUnixNano: int64(i+1)*1e6 + d, DurationNano: &d, Status: "ok", Attributes: a}
		data, _ := json.Marshal(s)
		recs = append(recs, bus.SignalRecord{Kind: bus.RecordObservability, Data: data})
		ids = append(ids, traceA+"/"+s.SpanID)
	}
	start, _ := json.Marshal(&observability.SpanSignal{Schema: 2, Signal: "span", Phase: "start", Name: "gen_ai.chat", Kind: "client",
		TraceID: traceA, SpanID: "00000000000000ff", TraceFlags: 1, StartTimeUnixNano: 1, Attributes: observability.Attributes{}})
	recs = append(recs, bus.SignalRecord{Kind: bus.RecordObservability, Data: start},
		bus.SignalRecord{Kind: bus.RecordObservability, Data: []byte(`{"schema_version":1,"event":"run_start","timestamp_ms":1,"measurements":{},"metadata":{"trace_id":"` + traceA + `","span_id":"00000000000000fe","trace_flags":1},"content_captured":false}`)})
	data, _ := bus.EncodeSignalBatch(bus.SignalBatch{Records: recs})
	if c.s2 {
		m := nats.NewMsg("adk.signal.alice")
		m.Header.Set(bus.SignalEncodingHeader, bus.SignalEncodingS2)
		m.Data = s2.Encode(nil, data)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	c.raw(t, "adk.signal.alice", data)
	return ids
}

func (c *cluster) raw(t *testing.T, subject string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.js.Publish(ctx, subject, data); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) start(t *testing.T, b *backend, cfg otlpexport.Config) *otlpexport.Exporter {
	t.Helper()
	cfg.Conn = c.nc
	cfg.TracesURL = otlpexport.TracesURL(b.srv.URL)
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff, cfg.MaxBackoff = 5*time.Millisecond, 20*time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := otlpexport.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// settled waits until the consumer holds nothing unacked and nothing
// undelivered: every message was acked.
func (c *cluster) settled(t *testing.T, name string) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, "every message acked", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cons, err := c.js.Consumer(ctx, bus.SignalStreamName, otlpexport.ConsumerName(name))
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

func TestExporter_ForwardsCompletedSpansWithResourceAndHeaders(t *testing.T) {
	c := newCluster(t)
	b := newBackend(t)
	ids := c.publish(t, 0, 5, observability.Attributes{"service.name": "travel-agent", "deployment.environment.name": "ci"})
	c.s2 = true // the second message compressed, as publishers send it now
	ids = append(ids, c.publish(t, 5, 3, nil)...)
	e := c.start(t, b, otlpexport.Config{Headers: map[string]string{"Authorization": "Basic c2VjcmV0"}})
	testutil.WaitFor(t, 20*time.Second, "all spans forwarded", func() bool { return b.has(ids) })
	c.settled(t, otlpexport.DefaultName)
	st := e.Stats()
	if st.Spans != 8 || st.Skipped != 4 || st.DroppedTotal() != 0 || st.Messages != 2 {
		t.Fatalf("stats %+v", st)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.service["0000000000000001"] != "travel-agent" || b.service["0000000000000006"] != otlpexport.DefaultServiceName {
		t.Fatalf("service.name by span: %v", b.service)
	}
	if _, ok := b.attrs["0000000000000001"]["service.name"]; ok {
		t.Fatal("service.name stayed a span attribute: it belongs on the resource")
	}
	if b.attrs["0000000000000001"]["run_id"] != "run-1" {
		t.Fatalf("attributes %v", b.attrs["0000000000000001"])
	}
	if got := b.headers[0].Get("Authorization"); got != "Basic c2VjcmV0" {
		t.Fatalf("authorization header not sent")
	}
}

func TestExporter_RetriesTransientFailuresHonouringRetryAfter(t *testing.T) {
	c := newCluster(t)
	b := newBackend(t)
	b.set(func(n int, _ *http.Request) (int, map[string]string) {
		switch n {
		case 1:
			return http.StatusServiceUnavailable, map[string]string{"Retry-After": "1"}
		case 2:
			return http.StatusTooManyRequests, nil
		case 3:
			return http.StatusBadGateway, nil
		}
		return 0, nil
	})
	ids := c.publish(t, 0, 4, nil)
	e := c.start(t, b, otlpexport.Config{})
	testutil.WaitFor(t, 20*time.Second, "spans forwarded after retries", func() bool { return b.has(ids) })
	c.settled(t, otlpexport.DefaultName)
	st := e.Stats()
	if st.Requests != 1 || st.Retries != 3 || st.Spans != 4 || st.DroppedTotal() != 0 {
		t.Fatalf("stats %+v", st)
	}
	b.mu.Lock()
	gap := b.times[1].Sub(b.times[0])
	b.mu.Unlock()
	if gap < 900*time.Millisecond {
		t.Fatalf("second attempt %v after a 503 with Retry-After: 1", gap)
	}
}

func TestExporter_SlowBackendTimesOutAndRetries(t *testing.T) {
	c := newCluster(t)
	b := newBackend(t)
	b.set(func(n int, _ *http.Request) (int, map[string]string) {
		if n == 1 {
			return -1, nil // never answers
		}
		return 0, nil
	})
	ids := c.publish(t, 0, 2, nil)
	e := c.start(t, b, otlpexport.Config{Timeout: 200 * time.Millisecond})
	testutil.WaitFor(t, 20*time.Second, "spans forwarded after a timeout", func() bool { return b.has(ids) })
	if st := e.Stats(); st.Retries < 1 || st.DroppedTotal() != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestExporter_DropsAreCountedAndAcked(t *testing.T) {
	t.Run("4xx is a permanent refusal", func(t *testing.T) {
		c := newCluster(t)
		b := newBackend(t)
		b.set(func(int, *http.Request) (int, map[string]string) { return http.StatusBadRequest, nil })
		c.publish(t, 0, 3, nil)
		e := c.start(t, b, otlpexport.Config{})
		c.settled(t, otlpexport.DefaultName)
		if st := e.Stats(); st.Dropped[otlpexport.DropRejected] != 3 || st.Retries != 0 || st.Spans != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("a redirect is not followed", func(t *testing.T) {
		c := newCluster(t)
		b := newBackend(t)
		b.set(func(int, *http.Request) (int, map[string]string) {
			return http.StatusTemporaryRedirect, map[string]string{"Location": "http://127.0.0.1:1/v1/traces"}
		})
		c.publish(t, 0, 2, nil)
		e := c.start(t, b, otlpexport.Config{})
		c.settled(t, otlpexport.DefaultName)
		if st := e.Stats(); st.Dropped[otlpexport.DropRejected] != 2 || b.count() != 1 {
			t.Fatalf("stats %+v, requests %d", st, b.count())
		}
	})
	t.Run("5xx until the attempts run out", func(t *testing.T) {
		c := newCluster(t)
		b := newBackend(t)
		b.set(func(int, *http.Request) (int, map[string]string) { return http.StatusServiceUnavailable, nil })
		c.publish(t, 0, 3, nil)
		e := c.start(t, b, otlpexport.Config{MaxAttempts: 3})
		c.settled(t, otlpexport.DefaultName)
		if st := e.Stats(); st.Dropped[otlpexport.DropRetriesExhausted] != 3 || st.Requests+st.Retries != 3 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("partial success and a malformed message", func(t *testing.T) {
		c := newCluster(t)
		b := newBackend(t)
		b.partial = 1
		c.raw(t, "adk.signal.alice", []byte("not a batch"))
		ids := c.publish(t, 0, 3, nil)
		e := c.start(t, b, otlpexport.Config{})
		testutil.WaitFor(t, 20*time.Second, "spans forwarded", func() bool { return b.has(ids) })
		c.settled(t, otlpexport.DefaultName)
		st := e.Stats()
		if st.Dropped[otlpexport.DropPartial] != 1 || st.Dropped[otlpexport.DropMalformedMessage] != 1 || st.Spans != 2 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A stopped exporter's next run resumes from the durable consumer: the
// batch it was retrying is delivered, and so is everything published
// while it was down.
func TestExporter_RestartResumesWithoutLoss(t *testing.T) {
	c := newCluster(t)
	b := newBackend(t)
	first := c.publish(t, 0, 4, nil)
	e1 := c.start(t, b, otlpexport.Config{Name: "jaeger"})
	testutil.WaitFor(t, 20*time.Second, "first spans forwarded", func() bool { return b.has(first) })
	c.settled(t, "jaeger")

	b.set(func(int, *http.Request) (int, map[string]string) { return http.StatusServiceUnavailable, nil })
	inFlight := c.publish(t, 4, 4, nil)
	testutil.WaitFor(t, 20*time.Second, "the exporter retrying", func() bool { return e1.Stats().Retries >= 2 })
	e1.Stop()
	if st := e1.Stats(); st.DroppedTotal() != 0 {
		t.Fatalf("stop dropped spans: %+v", st)
	}
	whileDown := c.publish(t, 8, 4, nil)

	b.set(nil)
	e2 := c.start(t, b, otlpexport.Config{Name: "jaeger"})
	want := append(append(append([]string{}, first...), inFlight...), whileDown...)
	testutil.WaitFor(t, 20*time.Second, "every span forwarded after the restart", func() bool { return b.has(want) })
	c.settled(t, "jaeger")
	if b.distinct() != 12 {
		t.Fatalf("backend holds %d distinct spans, want 12", b.distinct())
	}
	if st := e2.Stats(); st.Spans != 8 || st.Redelivered != 1 {
		t.Fatalf("second run stats %+v", st)
	}
}

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":                       "http://127.0.0.1:4318/v1/traces",
		"https://cloud.langfuse.com/api/public/otel":  "https://cloud.langfuse.com/api/public/otel/v1/traces",
		"http://127.0.0.1:6006/v1/traces":             "http://127.0.0.1:6006/v1/traces",
		"https://cloud.langfuse.com/api/public/otel/": "https://cloud.langfuse.com/api/public/otel/v1/traces",
	} {
		if got := otlpexport.TracesURL(in); got != want {
			t.Errorf("TracesURL(%s) = %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"", "ftp://x", "http://user:pw@h:1", "http://h/v1/traces?x=1", "/v1/traces"} {
		if err := otlpexport.ValidateTracesURL(bad); err == nil {
			t.Errorf("ValidateTracesURL(%q) accepted", bad)
		}
	}
}
