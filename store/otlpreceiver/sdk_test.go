package otlpreceiver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/store/otlpreceiver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestReceiver_OpenTelemetrySDKExporterSpansAreQueryable(t *testing.T) {
	h := newHarness(t, otlpreceiver.PublisherConfig(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	exp, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEndpointURL(h.url),
		otlptracehttp.WithInsecure(),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + tokAlice}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tp.Tracer("sdk-test")
	rctx, root := tr.Start(ctx, "gen_ai.invoke_agent", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("run_id", "run-sdk"), attribute.String("gen_ai.operation.name", "invoke_agent")))
	for range 3 {
		_, sp := tr.Start(rctx, "gen_ai.chat", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.request.model", "m-1"),
			attribute.Int64("gen_ai.usage.output_tokens", 7),
			attribute.String("gen_ai.prompt", "SDK-PROMPT-CONTENT"),
			attribute.String("run_id", "run-sdk")))
		sp.SetStatus(codes.Ok, "")
		sp.End()
	}
	root.End()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	traceID := root.SpanContext().TraceID().String()
	evs := h.waitStored(t, tokAlice, traceID, 4)
	names := map[string]int{}
	for _, ev := range evs {
		names[ev["name"].(string)]++
		a, _ := ev["attributes"].(map[string]any)
		if a["run_id"] != "run-sdk" {
			t.Errorf("run_id %v", a["run_id"])
		}
		for k, v := range a {
			if strings.Contains(k, "prompt") || v == "SDK-PROMPT-CONTENT" {
				t.Errorf("content stored: %s=%v", k, v)
			}
		}
	}
	if names["gen_ai.chat"] != 3 || names["gen_ai.invoke_agent"] != 1 {
		t.Fatalf("stored spans %v", names)
	}
	if other := h.query(t, tokBob, traceID); len(other) != 0 {
		t.Fatalf("bob sees %d spans", len(other))
	}
}
