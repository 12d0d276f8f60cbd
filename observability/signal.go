package observability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Schema versions of the two signal families.
const (
	EnvelopeSchemaVersion = 1
	SpanSchemaVersion     = 2
)

// Span phases and statuses (v2).
const (
	PhaseStart = "start"
	PhaseEnd   = "end"

	StatusOK    = "ok"
	StatusError = "error"
	StatusUnset = "unset"
)

// Span kinds (v2 "kind").
const (
	SpanKindInternal = "internal"
	SpanKindServer   = "server"
	SpanKindClient   = "client"
	SpanKindProducer = "producer"
	SpanKindConsumer = "consumer"
)

// Limits of a v2 span (CONTRACTS §2.3).
const (
	MaxSpanNameBytes       = 128
	MaxSpanAttributes      = 64
	MaxAttributeKeyBytes   = 128
	MaxSpanAttributesBytes = 64 << 10
)

// Signal is what the tracer hands to exporters and the async sink: an
// *Envelope (schema v1) or a *SpanSignal (schema v2).
type Signal interface {
	// SchemaVersion is 1 for an envelope, 2 for a span signal.
	SchemaVersion() int
}

// Attributes hold typed attribute values: string, bool, int64, float64,
// []string, []any or map[string]any. JSON decoding restores integers as
// int64 and string lists as []string, so an emitted signal survives an
// encode/decode round trip unchanged.
type Attributes map[string]any

// UnmarshalJSON decodes numbers as int64 when integral, else float64.
func (a *Attributes) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	if m == nil {
		*a = nil
		return nil
	}
	for k, v := range m {
		m[k] = normalizeJSON(v)
	}
	*a = m
	return nil
}

func normalizeJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		allStrings := len(x) > 0
		for i := range x {
			x[i] = normalizeJSON(x[i])
			if _, ok := x[i].(string); !ok {
				allStrings = false
			}
		}
		if allStrings {
			s := make([]string, len(x))
			for i := range x {
				s[i] = x[i].(string)
			}
			return s
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = normalizeJSON(x[k])
		}
		return x
	}
	return v
}

// Envelope is the schema-v1 lifecycle envelope (CONTRACTS §2.2). Absent
// optional values are omitted rather than written as null.
type Envelope struct {
	Schema       int              `json:"schema_version"`
	Event        string           `json:"event"`
	TimestampMS  int64            `json:"timestamp_ms"`
	Measurements map[string]int64 `json:"measurements"`
	Metadata     EnvelopeMetadata `json:"metadata"`
	// ContentCaptured is true only when capture was enabled and the content
	// was representable; Content is then secret-pruned JSON data.
	ContentCaptured bool `json:"content_captured"`
	Content         any  `json:"content,omitempty"`
}

// EnvelopeMetadata is the correlation metadata of a v1 envelope.
type EnvelopeMetadata struct {
	RunID        string     `json:"run_id,omitempty"`
	InvocationID string     `json:"invocation_id,omitempty"`
	Session      string     `json:"session,omitempty"`
	Agent        string     `json:"agent,omitempty"`
	Model        string     `json:"model,omitempty"`
	Tool         string     `json:"tool,omitempty"`
	CallID       string     `json:"call_id,omitempty"`
	TraceID      string     `json:"trace_id"`
	SpanID       string     `json:"span_id"`
	ParentID     string     `json:"parent_id,omitempty"`
	TraceFlags   int        `json:"trace_flags"`
	TraceState   string     `json:"tracestate,omitempty"`
	Attributes   Attributes `json:"attributes,omitempty"`
}

// SchemaVersion implements Signal.
func (*Envelope) SchemaVersion() int { return EnvelopeSchemaVersion }

// SpanSignal is the schema-v2 operation span signal (CONTRACTS §2.3). A
// start signal carries no end time, duration or status.
type SpanSignal struct {
	Schema            int        `json:"schema_version"`
	Signal            string     `json:"signal"` // "span"
	Phase             string     `json:"phase"`
	Name              string     `json:"name"`
	Kind              string     `json:"kind"`
	TraceID           string     `json:"trace_id"`
	SpanID            string     `json:"span_id"`
	ParentSpanID      string     `json:"parent_span_id,omitempty"`
	TraceFlags        int        `json:"trace_flags"`
	TraceState        string     `json:"tracestate,omitempty"`
	StartTimeUnixNano int64      `json:"start_time_unix_nano"`
	EndTimeUnixNano   int64      `json:"end_time_unix_nano,omitempty"`
	DurationNano      *int64     `json:"duration_nano,omitempty"`
	Status            string     `json:"status,omitempty"`
	Attributes        Attributes `json:"attributes"`
}

// SchemaVersion implements Signal.
func (*SpanSignal) SchemaVersion() int { return SpanSchemaVersion }

// Validate checks the structural rules of a span signal: schema, phase,
// name, kind, ids, timing and status per phase, and the attribute bounds
// (≤64 keys, keys 1..128 bytes, ≤64 KiB serialized, credential-like keys
// only as the four non-negative integer usage counters).
func (s *SpanSignal) Validate() error {
	switch {
	case s.Schema != SpanSchemaVersion || s.Signal != "span":
		return invalidSpan("schema")
	case len(s.Name) == 0 || len(s.Name) > MaxSpanNameBytes:
		return invalidSpan("name")
	case spanKindNumber(s.Kind) == 0:
		return invalidSpan("kind")
	case s.TraceFlags < 0 || s.TraceFlags > 255:
		return invalidSpan("trace_flags")
	}
	if _, err := ParseTraceID(s.TraceID); err != nil {
		return invalidSpan("trace_id")
	}
	if _, err := ParseSpanID(s.SpanID); err != nil {
		return invalidSpan("span_id")
	}
	if s.ParentSpanID != "" {
		if _, err := ParseSpanID(s.ParentSpanID); err != nil {
			return invalidSpan("parent_span_id")
		}
	}
	if s.TraceState != "" {
		if _, err := ParseTracestate(s.TraceState); err != nil {
			return invalidSpan("tracestate")
		}
	}
	switch s.Phase {
	case PhaseStart:
		if s.EndTimeUnixNano != 0 || s.DurationNano != nil || s.Status != "" {
			return invalidSpan("start_fields")
		}
	case PhaseEnd:
		if s.EndTimeUnixNano < s.StartTimeUnixNano || s.DurationNano == nil || *s.DurationNano < 0 {
			return invalidSpan("timing")
		}
		if s.Status != StatusOK && s.Status != StatusError && s.Status != StatusUnset {
			return invalidSpan("status")
		}
	default:
		return invalidSpan("phase")
	}
	return validateSpanAttributes(s.Attributes)
}

func validateSpanAttributes(a Attributes) error {
	if len(a) > MaxSpanAttributes {
		return invalidSpan("attribute_count")
	}
	for k, v := range a {
		if len(k) == 0 || len(k) > MaxAttributeKeyBytes {
			return invalidSpan("attribute_key")
		}
		if isUsageKey(k) {
			if n, ok := v.(int64); !ok || n < 0 {
				return invalidSpan("usage_counter")
			}
			continue
		}
		if isSensitiveKey(k) {
			return invalidSpan("credential_attribute")
		}
	}
	b, err := json.Marshal(a)
	if err != nil {
		return invalidSpan("attribute_value")
	}
	if len(b) > MaxSpanAttributesBytes {
		return invalidSpan("attributes_too_large")
	}
	return nil
}

// SignalError is a structural rejection of a signal by validation or the
// OTLP mapping. Code is the contract's tag; Detail names the field, never a
// value.
type SignalError struct {
	Code   string // invalid_span_signal, forbidden_otlp_attribute, invalid_otlp_timestamp, ...
	Detail string
}

// Error implements error.
func (e *SignalError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Detail) }

func invalidSpan(detail string) error {
	return &SignalError{Code: "invalid_span_signal", Detail: detail}
}

func spanKindNumber(k string) int {
	switch k {
	case SpanKindInternal:
		return 1
	case SpanKindServer:
		return 2
	case SpanKindClient:
		return 3
	case SpanKindProducer:
		return 4
	case SpanKindConsumer:
		return 5
	}
	return 0
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
