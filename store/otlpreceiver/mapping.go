package otlpreceiver

import (
	"encoding/hex"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/otlpwire"
	"github.com/fadcedab/adk/observability"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Bounds of mapped attribute values (the trace store's text bounds).
const (
	maxTextBytes      = 512
	maxFinishReasons  = 16
	maxErrorTypeBytes = 128
)

// attrLegacySystem is the older semconv name of gen_ai.provider.name.
const attrLegacySystem = "gen_ai.system"

// Attribute rules of observability's one allowlist.
const (
	attrText     = observability.AttrRuleText
	attrCount    = observability.AttrRuleCount
	attrTextList = observability.AttrRuleTextList
)

// allowed is observability.MetadataAttributes: metadata only.
var allowed = observability.MetadataAttributes

var identityKeys = observability.SpanIdentityKeys

// mapped is one decoded request: the encoded spans to publish and the
// counts.
type mapped struct {
	// records are the accepted spans, each one v2 span JSON record,
	// slices of one buffer.
	records        [][]byte
	received       int
	rejected       int
	contentDropped int
	firstReason    string
	// forbidden memoises observability.IsForbiddenAttributeKey for the
	// request's dropped keys: an exporter repeats the same keys on every
	// span. Bounded by maxForbiddenMemo.
	forbidden map[string]bool
}

// maxForbiddenMemo bounds the keys a request memoises.
const maxForbiddenMemo = 256

// decode decodes an ExportTraceServiceRequest and maps its spans. It never
// panics on any input (FuzzOTLPDecode).
func decode(body []byte, isJSON bool) (*mapped, error) {
	td, err := otlpwire.DecodeTraces(body, isJSON)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return mapTraces(td), nil
}

// mapTraces maps every span of td and encodes the mappable ones;
// unmappable spans are counted.
func mapTraces(td ptrace.Traces) *mapped {
	m := &mapped{}
	n := td.SpanCount()
	m.received = n
	// One span signal and attribute map, reset per span: each span is
	// encoded before the next is mapped.
	var s observability.SpanSignal
	attrs := observability.Attributes{}
	buf := make([]byte, 0, n*spanJSONEstimate)
	ends := make([]int, 0, n)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var res resourceAttrs
		ra := rs.Resource().Attributes()
		for j, k := range identityKeys {
			if v, ok := ra.Get(k); ok && v.Type() == pcommon.ValueTypeStr && validText(v.Str(), maxTextBytes) {
				res.identity[j] = v.Str()
			}
		}
		for j, k := range observability.ResourceAttributeKeys {
			if v, ok := ra.Get(k); ok && v.Type() == pcommon.ValueTypeStr && validText(v.Str(), maxTextBytes) {
				res.service[j] = v.Str()
			}
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				clear(attrs)
				reason := m.mapSpan(&s, attrs, spans.At(k), &res)
				if reason == "" {
					start := len(buf)
					var attrBytes int
					var err error
					buf, attrBytes, err = appendSpanJSON(buf, &s)
					switch {
					case err != nil:
						buf, reason = buf[:start], "invalid"
					case attrBytes > observability.MaxSpanAttributesBytes:
						buf, reason = buf[:start], "attributes_too_large"
					}
				}
				if reason != "" {
					m.rejected++
					if m.firstReason == "" {
						m.firstReason = "span rejected: " + reason
					}
					continue
				}
				ends = append(ends, len(buf))
			}
		}
	}
	m.records = make([][]byte, len(ends))
	start := 0
	for i, end := range ends {
		m.records[i] = buf[start:end:end]
		start = end
	}
	return m
}

// spanJSONEstimate is the encoded size of a typical mapped span, to size
// a request's buffer once.
const spanJSONEstimate = 384

// mapSpan maps one span into s, a v2 end-phase span signal whose
// attributes are attrs, or returns why it cannot be. The checks are the
// ones SpanSignal.Validate makes, by construction: ids are hex of the
// OTLP bytes, name and attribute values are bounded UTF-8, kind and
// status come from enums, attributes are allowlisted metadata (usage
// counters non-negative integers). The caller checks the encoded size of
// the attributes. FuzzOTLPDecode holds every published record to Validate.
func (m *mapped) mapSpan(s *observability.SpanSignal, attrs observability.Attributes, sp ptrace.Span, res *resourceAttrs) string {
	tid, sid := sp.TraceID(), sp.SpanID()
	if tid.IsEmpty() {
		return "trace_id"
	}
	if sid.IsEmpty() {
		return "span_id"
	}
	name := sp.Name()
	if !validText(name, observability.MaxSpanNameBytes) {
		return "name"
	}
	start, end := sp.StartTimestamp(), sp.EndTimestamp()
	if start == 0 || uint64(start) > math.MaxInt64 || uint64(end) > math.MaxInt64 || end < start {
		return "timing"
	}
	dur := int64(end - start)
	*s = observability.SpanSignal{
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
		Attributes:        attrs,
	}
	if pid := sp.ParentSpanID(); !pid.IsEmpty() {
		s.ParentSpanID = hex.EncodeToString(pid[:])
	}
	if ts := sp.TraceState().AsRaw(); ts != "" {
		if v, err := observability.ParseTracestate(ts); err == nil {
			s.TraceState = v // an invalid tracestate is dropped, not the span
		}
	}
	m.mapAttributes(attrs, sp.Attributes(), res)
	return ""
}

// resourceAttrs are the values a resource lends its spans: the identity
// keys and the bounded resource keys (observability.ResourceAttributeKeys),
// in their lists' order.
type resourceAttrs struct {
	identity [len(identityKeys)]string
	service  [len(observability.ResourceAttributeKeys)]string
}

// mapAttributes keeps the allowlisted metadata attributes of in, into a,
// and counts the content and credential keys it drops.
func (m *mapped) mapAttributes(a observability.Attributes, in pcommon.Map, res *resourceAttrs) {
	var legacyProvider string
	in.Range(func(k string, v pcommon.Value) bool {
		kind, ok := allowed[k]
		if !ok {
			if k == attrLegacySystem && v.Type() == pcommon.ValueTypeStr {
				legacyProvider = v.Str()
			} else if m.isForbidden(k) {
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
		if _, ok := a[k]; !ok && res.identity[j] != "" {
			a[k] = res.identity[j]
		}
	}
	for j, k := range observability.ResourceAttributeKeys {
		if _, ok := a[k]; !ok && res.service[j] != "" {
			a[k] = res.service[j]
		}
	}
}

// isForbidden is observability.IsForbiddenAttributeKey, memoised for the
// request.
func (m *mapped) isForbidden(k string) bool {
	if f, ok := m.forbidden[k]; ok {
		return f
	}
	f := observability.IsForbiddenAttributeKey(k)
	if m.forbidden == nil {
		m.forbidden = make(map[string]bool, 8)
	}
	if len(m.forbidden) < maxForbiddenMemo {
		m.forbidden[k] = f
	}
	return f
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
