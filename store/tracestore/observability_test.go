package tracestore

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/fadcedab/adk/observability"
)

// TestStore_KeepsTracerSpanMetadata stores the spans a real Tracer emits for
// a model call and checks that the semconv metadata, including the mapping
// version, survives the closed projection.
func TestStore_KeepsTracerSpanMetadata(t *testing.T) {
	var mu sync.Mutex
	var spans []*observability.SpanSignal
	tr, err := observability.New(observability.Config{Exporters: []observability.ExporterDescriptor{{
		ID: "mem",
		Exporter: observability.ExporterFunc(func(_ context.Context, s observability.Signal) error {
			if sp, ok := s.(*observability.SpanSignal); ok {
				mu.Lock()
				spans = append(spans, sp)
				mu.Unlock()
			}
			return nil
		}),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Close(context.Background()) }()
	_, end := tr.Start(context.Background(), observability.Observation{Kind: observability.KindModel, RunID: "r1", Provider: "openai", Model: "gpt-test"})
	end(observability.Outcome{Usage: &observability.Usage{InputTokens: 3, OutputTokens: 2}})

	s := openStore(t, Options{})
	mu.Lock()
	defer mu.Unlock()
	if len(spans) != 2 {
		t.Fatalf("tracer emitted %d spans, want start and end", len(spans))
	}
	for i, sp := range spans {
		b, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		appendOK(t, s, "alice", KindObservability, b, int64(i+1))
	}
	p, err := s.Query("alice", Selector{"trace_id": spans[0].TraceID}, QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 2 {
		t.Fatalf("stored %d events, want 2", len(p.Events))
	}
	end2 := string(p.Events[1])
	for _, want := range []string{observability.MappingVersionKey, "gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.provider.name"} {
		if !strings.Contains(end2, want) {
			t.Errorf("stored end span lacks %s: %s", want, end2)
		}
	}
}
