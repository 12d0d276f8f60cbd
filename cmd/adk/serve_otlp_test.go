package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/otlpreceiver"
	"github.com/fadcedab/adk/store/tracenode"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

func TestServe_OTLPReceiverAndMetrics(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(tracenode.HashToken("tok-alice")+" alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	natsc, otlpc := make(chan string, 1), make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{dataDir: filepath.Join(dir, "data"), host: "127.0.0.1", port: -1, tokensFile: tokens,
			otlpAddr: "127.0.0.1:0", otlpListening: func(a string) { otlpc <- a }, ready: func(u string) { natsc <- u }}, &bytes.Buffer{})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var natsURL, otlpAddr string
	for natsURL == "" {
		select {
		case otlpAddr = <-otlpc:
		case natsURL = <-natsc:
		case err := <-done:
			t.Fatalf("serve exited: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("serve not ready")
		}
	}
	if otlpAddr == "" {
		otlpAddr = <-otlpc
	}

	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c})
	sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	sp.SetName("gen_ai.chat")
	sp.SetStartTimestamp(1e9)
	sp.SetEndTimestamp(2e9)
	sp.Attributes().PutStr("run_id", "otlp-run")
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+otlpAddr+otlpreceiver.TracesPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", otlpreceiver.ContentTypeProtobuf)
	req.Header.Set("Authorization", "Bearer tok-alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}

	nc, err := bus.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	testutil.WaitFor(t, 10*time.Second, "the OTLP span to be queryable", func() bool {
		qctx, qcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer qcancel()
		r, err := tracenode.Query(qctx, nc, tracenode.QueryRequest{Token: "tok-alice", Selector: map[string]string{"run_id": "otlp-run"}})
		return err == nil && r.Page != nil && len(r.Page.Events) == 1
	})

	mresp, err := http.Get("http://" + otlpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	_ = mresp.Body.Close()
	for _, want := range []string{`adk_otlp_receiver_events_total{outcome="spans_accepted"} 1`, `adk_observability_bus_events_total{counter="accepted"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s:\n%s", want, metrics)
		}
	}
}
