package observability_test

import (
	"encoding/json"
	"testing"

	"github.com/fadcedab/adk/observability"
)

// TestAppendSpanHead_IsJSONMarshalsPrefix: the head plus the attributes
// and the closing brace is json.Marshal's encoding, with and without the
// omitempty fields.
func TestAppendSpanHead_IsJSONMarshalsPrefix(t *testing.T) {
	d := int64(7)
	for _, s := range []*observability.SpanSignal{
		{Schema: 2, Signal: "span", Phase: "start", Name: "n", Kind: "client", TraceID: "t", SpanID: "s", StartTimeUnixNano: 1},
		{Schema: 2, Signal: "span", Phase: "end", Name: "<a&b>", Kind: "internal", TraceID: "t\u2028", SpanID: "s\x01", ParentSpanID: "p",
			TraceFlags: 1, TraceState: "k=v", StartTimeUnixNano: -1, EndTimeUnixNano: 9, DurationNano: &d, Status: "error",
			Attributes: observability.Attributes{"run_id": "r<1>", "gen_ai.usage.input_tokens": int64(3), "l": []string{"a", "\b"}}},
	} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		attrs, _ := json.Marshal(s.Attributes)
		got := append(append(observability.AppendSpanHead(nil, s), attrs...), '}')
		if string(got) != string(want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
		whole, ok := observability.AppendSpanJSON(nil, s)
		if !ok || string(whole) != string(want) {
			t.Fatalf("AppendSpanJSON\n got %s\nwant %s", whole, want)
		}
	}
}

// TestAppendEnvelopeJSON_IsJSONMarshal: every envelope shape a tracer
// writes (start with measurements, stop with status, an evaluation result
// with a float score, captured content) encodes as json.Marshal does.
func TestAppendEnvelopeJSON_IsJSONMarshal(t *testing.T) {
	for _, e := range []*observability.Envelope{
		{Schema: 1, Event: "adk.eval.start", TimestampMS: 5, Measurements: map[string]int64{"system_time": 9, "monotonic_time": 1},
			Metadata: observability.EnvelopeMetadata{RunID: "r", TraceID: "t", SpanID: "s", TraceFlags: 1,
				Attributes: observability.Attributes{"adk.eval.job_id": "j<1>", "adk.eval.case_id": "c"}}},
		{Schema: 1, Event: "adk.model.stop", Measurements: map[string]int64{"duration": 7, "duration_ms": 0},
			Metadata: observability.EnvelopeMetadata{InvocationID: "i", Session: "s", Agent: "a", Model: "m&", Tool: "t", CallID: "c",
				TraceID: "t", SpanID: "s", ParentID: "p", TraceState: "k=v", Attributes: observability.Attributes{"status": "ok"}}},
		{Schema: 1, Event: observability.EventEvaluationResult, Metadata: observability.EnvelopeMetadata{TraceID: "t", SpanID: "s",
			Attributes: observability.Attributes{observability.AttrEvaluationScoreValue: 0.25, "l": []string{"\u2028"}}}},
		{Schema: 1, Event: "adk.run.start", ContentCaptured: true, Content: map[string]any{"q": []any{"x", 1.5, true, nil}},
			Metadata: observability.EnvelopeMetadata{Attributes: observability.Attributes{}}},
	} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := observability.AppendEnvelopeJSON([]byte("x"), e)
		if !ok || string(got) != "x"+string(want) {
			t.Fatalf("ok %v\n got %s\nwant x%s", ok, got, want)
		}
	}
}
