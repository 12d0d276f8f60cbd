package otlpwire

import (
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// DecodeTraces decodes an ExportTraceServiceRequest, protobuf or OTLP/JSON,
// as ptraceotlp.ExportRequest's UnmarshalProto and UnmarshalJSON do, with
// ptrace's unmarshalers: the same decoders on the same message, and the
// same errors.
//
// Protobuf: ptraceotlp then moves a resource's deprecated
// instrumentation_library_spans (field 1000, OTLP before 0.15) into its
// scope_spans when it has none, and drops them otherwise;
// ptrace.ProtoUnmarshaler does not, so a body that holds field 1000 is
// rewritten that way (migrateScopeSpans) and decoded again.
//
// JSON, the one difference: ptrace.JSONUnmarshaler applies that migration
// to pdata's own deprecatedScopeSpans key, which ptraceotlp's JSON decoder
// left unread. No OTLP/JSON client writes that key (old ones wrote
// instrumentationLibrarySpans, which both ignore); the two encodings of a
// request now mean the same.
func DecodeTraces(body []byte, isJSON bool) (ptrace.Traces, error) {
	if isJSON {
		return (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
	}
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
	if err != nil {
		return td, err
	}
	if migrated, ok := migrateScopeSpans(body); ok {
		return (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(migrated)
	}
	return td, nil
}

// EncodeTraces encodes td as a protobuf ExportTraceServiceRequest, the
// bytes ptraceotlp.NewExportRequestFromTraces(td).MarshalProto() writes.
func EncodeTraces(td ptrace.Traces) ([]byte, error) {
	return (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
}

// Field numbers of the request's messages.
const (
	fieldResourceSpans        = 1    // ExportTraceServiceRequest.resource_spans
	fieldScopeSpans           = 2    // ResourceSpans.scope_spans
	fieldDeprecatedScopeSpans = 1000 // ResourceSpans.instrumentation_library_spans
)

// migrateScopeSpans rewrites a request pdata has decoded without error so
// that no resource holds field 1000: a resource without scope_spans gets
// its field-1000 entries as scope_spans (the tag changes, the value and
// order stay), one with scope_spans loses them. It reports false, and
// allocates nothing, when no resource holds field 1000.
func migrateScopeSpans(body []byte) ([]byte, bool) {
	var out []byte
	for pos := 0; pos < len(body); {
		num, wt, p, err := consumeTag(body, pos)
		if err != nil {
			return nil, false
		}
		end, err := consumeField(body, p, wt)
		if err != nil {
			return nil, false
		}
		var inner []byte
		changed := false
		if num == fieldResourceSpans && wt == wireLen {
			start, _, _ := consumeLen(body, p)
			inner, changed = migrateResourceSpans(body[start:end])
		}
		switch {
		case changed:
			if out == nil {
				out = append(make([]byte, 0, len(body)), body[:pos]...)
			}
			out = append(out, body[pos:p]...)
			out = appendVarint(out, uint64(len(inner)))
			out = append(out, inner...)
		case out != nil:
			out = append(out, body[pos:end]...)
		}
		pos = end
	}
	return out, out != nil
}

// migrateResourceSpans is migrateScopeSpans for one ResourceSpans.
func migrateResourceSpans(rs []byte) ([]byte, bool) {
	hasScopeSpans, hasDeprecated := false, false
	for pos := 0; pos < len(rs); {
		num, wt, p, err := consumeTag(rs, pos)
		if err != nil {
			return nil, false
		}
		if pos, err = consumeField(rs, p, wt); err != nil {
			return nil, false
		}
		hasScopeSpans = hasScopeSpans || num == fieldScopeSpans
		hasDeprecated = hasDeprecated || num == fieldDeprecatedScopeSpans
	}
	if !hasDeprecated {
		return nil, false
	}
	out := make([]byte, 0, len(rs))
	for pos := 0; pos < len(rs); {
		num, wt, p, _ := consumeTag(rs, pos)
		end, _ := consumeField(rs, p, wt)
		switch {
		case num != fieldDeprecatedScopeSpans:
			out = append(out, rs[pos:end]...)
		case !hasScopeSpans:
			out = append(out, fieldScopeSpans<<3|wireLen)
			out = append(out, rs[p:end]...)
		}
		pos = end
	}
	return out, true
}
