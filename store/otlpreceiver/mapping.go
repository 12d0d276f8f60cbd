package otlpreceiver

import (
	"encoding/hex"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/fadcedab/adk/observability"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Bounds of mapped attribute values (the trace store's text bounds).
const (
	maxTextBytes      = 512
	maxFinishReasons  = 16
	maxErrorTypeBytes = 128
)

// Attribute keys beyond observability's semconv constants.
const (
	attrRunID        = "run_id"
	attrInvocationID = "invocation_id"
	attrWorkflowID   = "workflow_id"
	attrLegacySystem = "gen_ai.system" // older semconv name of gen_ai.provider.name
)

// attrKind is how an allowlisted attribute is mapped.
type attrKind uint8

const (
	attrText attrKind = iota + 1
	attrCount
	attrTextList
)

// allowed is the closed attribute allowlist: metadata only.
var allowed = map[string]attrKind{
	observability.AttrOperationName:  attrText,
	observability.AttrProviderName:   attrText,
	observability.AttrRequestModel:   attrText,
	observability.AttrResponseModel:  attrText,
	observability.AttrResponseID:     attrText,
	observability.AttrToolName:       attrText,
	observability.AttrToolCallID:     attrText,
	observability.AttrErrorType:      attrText,
	observability.AttrFinishReasons:  attrTextList,
	observability.AttrInputTokens:    attrCount,
	observability.AttrOutputTokens:   attrCount,
	observability.AttrCacheReadInput: attrCount,
	observability.AttrReasonTokens:   attrCount,
	attrRunID:                        attrText,
	attrInvocationID:                 attrText,
	attrWorkflowID:                   attrText,
}

var identityKeys = [...]string{attrRunID, attrInvocationID, attrWorkflowID}

// mapped is one decoded request: the spans to publish and the counts.
type mapped struct {
	spans          []*observability.SpanSignal
	received       int
	rejected       int
	contentDropped int
	firstReason    string
}

// decode decodes an ExportTraceServiceRequest and maps its spans. It never
// panics on any input (FuzzOTLPDecode).
func decode(body []byte, isJSON bool) (*mapped, error) {
	req := ptraceotlp.NewExportRequest()
	var err error
	if isJSON {
		err = req.UnmarshalJSON(body)
	} else {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return mapTraces(req.Traces()), nil
}

// mapTraces maps every span of td; unmappable spans are counted.
func mapTraces(td ptrace.Traces) *mapped {
	m := &mapped{}
	n := td.SpanCount()
	m.received = n
	m.spans = make([]*observability.SpanSignal, 0, n)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var resIdentity [len(identityKeys)]string
		ra := rs.Resource().Attributes()
		for j, k := range identityKeys {
			if v, ok := ra.Get(k); ok && v.Type() == pcommon.ValueTypeStr && validText(v.Str(), maxTextBytes) {
				resIdentity[j] = v.Str()
			}
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				s, reason := m.mapSpan(spans.At(k), &resIdentity)
				if reason != "" {
					m.rejected++
					if m.firstReason == "" {
						m.firstReason = "span rejected: " + reason
					}
					continue
				}
				m.spans = append(m.spans, s)
			}
		}
	}
	return m
}

// mapSpan maps one span to a v2 end-phase span signal, or returns why it
// cannot be.
func (m *mapped) mapSpan(sp ptrace.Span, resIdentity *[len(identityKeys)]string) (*observability.SpanSignal, string) {
	tid, sid := sp.TraceID(), sp.SpanID()
	if tid.IsEmpty() {
		return nil, "trace_id"
	}
	if sid.IsEmpty() {
		return nil, "span_id"
	}
	name := sp.Name()
	if !validText(name, observability.MaxSpanNameBytes) {
		return nil, "name"
	}
	start, end := sp.StartTimestamp(), sp.EndTimestamp()
	if start == 0 || uint64(start) > math.MaxInt64 || uint64(end) > math.MaxInt64 || end < start {
		return nil, "timing"
	}
	dur := int64(end - start)
	s := &observability.SpanSignal{
		Schema:            observability.SpanSchemaVersion,
		Signal:            "span",
		Phase:             observability.PhaseEnd,
		Name:              name,
		Kind:              spanKind(sp.Kind()),
		TraceID:           hex.EncodeToString(tid[:]),
		SpanID:            hex.EncodeToString(sid[:]),
		TraceFlags:        int(sp.Flags() & 0xff),
		StartTimeUnixNano: int64(start),
		EndTimeUnixNano:   int64(end),
		DurationNano:      &dur,
		Status:            spanStatus(sp.Status().Code()),
	}
	if pid := sp.ParentSpanID(); !pid.IsEmpty() {
		s.ParentSpanID = hex.EncodeToString(pid[:])
	}
	if ts := sp.TraceState().AsRaw(); ts != "" {
		if v, err := observability.ParseTracestate(ts); err == nil {
			s.TraceState = v // an invalid tracestate is dropped, not the span
		}
	}
	s.Attributes = m.mapAttributes(sp.Attributes(), resIdentity)
	if err := s.Validate(); err != nil {
		return nil, "invalid"
	}
	return s, ""
}

// mapAttributes keeps the allowlisted metadata attributes and counts the
// content and credential keys it drops.
func (m *mapped) mapAttributes(in pcommon.Map, resIdentity *[len(identityKeys)]string) observability.Attributes {
	a := observability.Attributes{}
	var legacyProvider string
	in.Range(func(k string, v pcommon.Value) bool {
		kind, ok := allowed[k]
		if !ok {
			if k == attrLegacySystem && v.Type() == pcommon.ValueTypeStr {
				legacyProvider = v.Str()
			} else if observability.IsForbiddenAttributeKey(k) {
				m.contentDropped++
			}
			return true
		}
		switch kind {
		case attrText:
			limit := maxTextBytes
			if k == observability.AttrErrorType {
				limit = maxErrorTypeBytes
			}
			if v.Type() == pcommon.ValueTypeStr && validText(v.Str(), limit) {
				a[k] = v.Str()
			}
		case attrCount:
			if v.Type() == pcommon.ValueTypeInt && v.Int() >= 0 {
				a[k] = v.Int()
			}
		case attrTextList:
			if l, ok := textList(v); ok {
				a[k] = l
			}
		}
		return true
	})
	if _, ok := a[observability.AttrProviderName]; !ok && validText(legacyProvider, maxTextBytes) {
		a[observability.AttrProviderName] = legacyProvider
	}
	for j, k := range identityKeys {
		if _, ok := a[k]; !ok && resIdentity[j] != "" {
			a[k] = resIdentity[j]
		}
	}
	return a
}

func textList(v pcommon.Value) ([]string, bool) {
	if v.Type() != pcommon.ValueTypeSlice {
		return nil, false
	}
	sl := v.Slice()
	if sl.Len() == 0 || sl.Len() > maxFinishReasons {
		return nil, false
	}
	out := make([]string, 0, sl.Len())
	for i := 0; i < sl.Len(); i++ {
		e := sl.At(i)
		if e.Type() != pcommon.ValueTypeStr || !validText(e.Str(), maxTextBytes) {
			return nil, false
		}
		out = append(out, e.Str())
	}
	return out, true
}

func validText(s string, limit int) bool {
	return s != "" && len(s) <= limit && utf8.ValidString(s)
}

func spanKind(k ptrace.SpanKind) string {
	switch k {
	case ptrace.SpanKindServer:
		return observability.SpanKindServer
	case ptrace.SpanKindClient:
		return observability.SpanKindClient
	case ptrace.SpanKindProducer:
		return observability.SpanKindProducer
	case ptrace.SpanKindConsumer:
		return observability.SpanKindConsumer
	}
	return observability.SpanKindInternal // internal and unspecified
}

func spanStatus(c ptrace.StatusCode) string {
	switch c {
	case ptrace.StatusCodeOk:
		return observability.StatusOK
	case ptrace.StatusCodeError:
		return observability.StatusError
	}
	return observability.StatusUnset
}
