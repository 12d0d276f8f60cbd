package observability

import (
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// OTLPMappingVersion identifies the v1/v2 → OTLP JSON mapping; it is written
// as the resource attribute adk.otlp.mapping.version.
const OTLPMappingVersion = "otlp-json-1.10-adk-1"

// Bounds of the OTLP attribute mapping.
const (
	maxOTLPStringBytes = 16 << 10
	maxOTLPListLen     = 64
	maxOTLPDepth       = 8
)

// Resource identifies the emitting service on every OTLP request.
type Resource struct {
	ServiceName    string // default "adk"
	ServiceVersion string // default "dev"
	// Attributes are further resource attributes (OTEL_RESOURCE_ATTRIBUTES),
	// bounded by ResourceFromEnv; they never override the ones above.
	Attributes map[string]string
}

func (r Resource) withDefaults() Resource {
	if r.ServiceName == "" {
		r.ServiceName = "adk"
	}
	if r.ServiceVersion == "" {
		r.ServiceVersion = "dev"
	}
	return r
}

func (r Resource) fill(res pcommon.Resource, scope pcommon.InstrumentationScope) {
	a := res.Attributes()
	// Inserted in key order: the mapping's attribute lists are sorted.
	a.PutStr("adk.otlp.mapping.version", OTLPMappingVersion)
	a.PutStr("service.name", r.ServiceName)
	a.PutStr("service.version", r.ServiceVersion)
	a.PutStr("telemetry.sdk.language", "go")
	if len(r.Attributes) > 0 {
		keys := make([]string, 0, len(r.Attributes))
		for k := range r.Attributes {
			if _, taken := a.Get(k); !taken {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			a.PutStr(k, r.Attributes[k])
		}
	}
	scope.SetName("adk")
	scope.SetVersion(r.ServiceVersion)
}

func otlpError(code, detail string) error { return &SignalError{Code: code, Detail: detail} }

// SpanToOTLP maps a completed v2 span to an ExportTraceServiceRequest with
// one span. A start-phase span is ErrIncompleteSpan; a span that fails
// Validate is invalid_span_signal; a content or credential attribute key is
// forbidden_otlp_attribute.
func SpanToOTLP(s *SpanSignal, r Resource) (ptrace.Traces, error) {
	if s.Phase == PhaseStart {
		return ptrace.Traces{}, ErrIncompleteSpan
	}
	if err := s.Validate(); err != nil {
		return ptrace.Traces{}, err
	}
	if s.StartTimeUnixNano < 0 || s.EndTimeUnixNano < 0 {
		return ptrace.Traces{}, otlpError("invalid_otlp_timestamp", "span")
	}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ss := rs.ScopeSpans().AppendEmpty()
	r.withDefaults().fill(rs.Resource(), ss.Scope())
	if err := fillSpan(s, ss.Spans().AppendEmpty()); err != nil {
		return ptrace.Traces{}, err
	}
	return td, nil
}

// AppendSpanOTLP maps a completed v2 span onto a new span of dst, with the
// rules of SpanToOTLP, and leaves the resource to the caller (the OTLP
// forwarder groups the spans of many services in one request). On error
// dst is unchanged.
func AppendSpanOTLP(s *SpanSignal, dst ptrace.SpanSlice) error {
	if s.Phase == PhaseStart {
		return ErrIncompleteSpan
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if s.StartTimeUnixNano < 0 || s.EndTimeUnixNano < 0 {
		return otlpError("invalid_otlp_timestamp", "span")
	}
	sp := ptrace.NewSpan()
	if err := fillSpan(s, sp); err != nil {
		return err
	}
	sp.MoveTo(dst.AppendEmpty())
	return nil
}

func fillSpan(s *SpanSignal, sp ptrace.Span) error {
	tid, _ := ParseTraceID(s.TraceID)
	sid, _ := ParseSpanID(s.SpanID)
	sp.SetTraceID(pcommon.TraceID(tid))
	sp.SetSpanID(pcommon.SpanID(sid))
	if s.ParentSpanID != "" {
		pid, _ := ParseSpanID(s.ParentSpanID)
		sp.SetParentSpanID(pcommon.SpanID(pid))
	}
	if s.TraceState != "" {
		sp.TraceState().FromRaw(s.TraceState)
	}
	sp.SetName(s.Name)
	sp.SetKind(ptrace.SpanKind(spanKindNumber(s.Kind)))
	sp.SetStartTimestamp(pcommon.Timestamp(s.StartTimeUnixNano))
	sp.SetEndTimestamp(pcommon.Timestamp(s.EndTimeUnixNano))
	sp.SetFlags(uint32(s.TraceFlags))
	switch s.Status {
	case StatusOK:
		sp.Status().SetCode(ptrace.StatusCodeOk)
	case StatusError:
		sp.Status().SetCode(ptrace.StatusCodeError)
	}
	return putAttributes(sp.Attributes(), s.Attributes, 0)
}

// EnvelopeToOTLP maps a metadata-only v1 envelope to an
// ExportLogsServiceRequest with one log record. An envelope with captured
// content is ErrContentNotExportable.
func EnvelopeToOTLP(e *Envelope, r Resource) (plog.Logs, error) {
	if e.ContentCaptured || e.Content != nil {
		return plog.Logs{}, ErrContentNotExportable
	}
	if e.Schema != EnvelopeSchemaVersion || e.Event == "" {
		return plog.Logs{}, otlpError("invalid_otlp_envelope", "schema")
	}
	if e.TimestampMS < 0 || e.TimestampMS > math.MaxInt64/1_000_000 {
		return plog.Logs{}, otlpError("invalid_otlp_timestamp", "envelope")
	}
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	sl := rl.ScopeLogs().AppendEmpty()
	r.withDefaults().fill(rl.Resource(), sl.Scope())
	lr := sl.LogRecords().AppendEmpty()
	ts := pcommon.Timestamp(e.TimestampMS * 1e6)
	lr.SetTimestamp(ts)
	lr.SetObservedTimestamp(ts)
	lr.SetSeverityNumber(plog.SeverityNumberUnspecified)
	lr.Body().SetStr(e.Event)
	m := e.Metadata
	if tid, err := ParseTraceID(m.TraceID); err == nil {
		lr.SetTraceID(pcommon.TraceID(tid))
	}
	if sid, err := ParseSpanID(m.SpanID); err == nil {
		lr.SetSpanID(pcommon.SpanID(sid))
	}
	if m.TraceFlags >= 0 && m.TraceFlags <= 255 {
		lr.SetFlags(plog.LogRecordFlags(m.TraceFlags))
	}
	attrs := Attributes{"adk.content_captured": false}
	for k, v := range e.Measurements {
		attrs["adk.measurement."+k] = v
	}
	for k, v := range map[string]string{
		"run_id": m.RunID, "invocation_id": m.InvocationID, "session": m.Session,
		"agent": m.Agent, "model": m.Model, "tool": m.Tool, "call_id": m.CallID,
		"parent_id": m.ParentID, "tracestate": m.TraceState,
	} {
		if v != "" {
			attrs["adk.metadata."+k] = v
		}
	}
	if e.Event == EventEvaluationResult {
		// A semconv event: its name, and the score next to the run.
		lr.SetEventName(e.Event)
		for k, v := range m.Attributes {
			if strings.HasPrefix(k, "gen_ai.evaluation.") || strings.HasPrefix(k, "adk.eval.") {
				attrs[k] = v
			}
		}
	}
	if err := putAttributes(lr.Attributes(), attrs, 0); err != nil {
		return plog.Logs{}, err
	}
	return ld, nil
}

// MarshalSpanOTLP maps and encodes a completed span as OTLP/HTTP JSON.
func MarshalSpanOTLP(s *SpanSignal, r Resource) ([]byte, error) {
	td, err := SpanToOTLP(s, r)
	if err != nil {
		return nil, err
	}
	return (&ptrace.JSONMarshaler{}).MarshalTraces(td)
}

// MarshalEnvelopeOTLP maps and encodes a metadata-only envelope as
// OTLP/HTTP JSON.
func MarshalEnvelopeOTLP(e *Envelope, r Resource) ([]byte, error) {
	ld, err := EnvelopeToOTLP(e, r)
	if err != nil {
		return nil, err
	}
	return (&plog.JSONMarshaler{}).MarshalLogs(ld)
}

// putAttributes writes a sorted, typed KeyValue list.
func putAttributes(dst pcommon.Map, a map[string]any, depth int) error {
	if len(a) > maxOTLPListLen && depth > 0 {
		return otlpError("invalid_otlp_attribute", "kvlist_too_large")
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst.EnsureCapacity(len(keys))
	for _, k := range keys {
		if len(k) == 0 || len(k) > MaxAttributeKeyBytes {
			return otlpError("invalid_otlp_attribute", "key_length")
		}
		if IsForbiddenAttributeKey(k) {
			return otlpError("forbidden_otlp_attribute", "key")
		}
		if isUsageKey(k) {
			if n, ok := a[k].(int64); !ok || n < 0 {
				return otlpError("invalid_otlp_span_signal", "usage_counter")
			}
		}
		if err := putValue(dst.PutEmpty(k), a[k], depth); err != nil {
			return err
		}
	}
	return nil
}

func putValue(dst pcommon.Value, v any, depth int) error {
	if depth > maxOTLPDepth {
		return otlpError("invalid_otlp_attribute", "too_deep")
	}
	switch x := v.(type) {
	case nil:
		return otlpError("invalid_otlp_attribute", "null")
	case string:
		if len(x) > maxOTLPStringBytes || !utf8.ValidString(x) {
			return otlpError("invalid_otlp_attribute", "string")
		}
		dst.SetStr(x)
	case bool:
		dst.SetBool(x)
	case int64:
		dst.SetInt(x)
	case int:
		dst.SetInt(int64(x))
	case int32:
		dst.SetInt(int64(x))
	case float64:
		if !finite(x) {
			return otlpError("invalid_otlp_attribute", "double")
		}
		dst.SetDouble(x)
	case []string:
		if len(x) > maxOTLPListLen {
			return otlpError("invalid_otlp_attribute", "array_too_large")
		}
		s := dst.SetEmptySlice()
		s.EnsureCapacity(len(x))
		for _, e := range x {
			if err := putValue(s.AppendEmpty(), e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		if len(x) > maxOTLPListLen {
			return otlpError("invalid_otlp_attribute", "array_too_large")
		}
		s := dst.SetEmptySlice()
		s.EnsureCapacity(len(x))
		for _, e := range x {
			if err := putValue(s.AppendEmpty(), e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		if len(x) > maxOTLPListLen {
			return otlpError("invalid_otlp_attribute", "kvlist_too_large")
		}
		return putAttributes(dst.SetEmptyMap(), x, depth+1)
	case Attributes:
		return putValue(dst, map[string]any(x), depth)
	default:
		return otlpError("invalid_otlp_attribute", "type_"+reflect.TypeOf(v).Kind().String())
	}
	return nil
}
