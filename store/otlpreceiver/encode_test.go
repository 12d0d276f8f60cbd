package otlpreceiver

import (
	"bytes"
	"encoding/json"
	"testing"

	"strings"

	"github.com/fadcedab/adk/internal/secrets"
	"github.com/fadcedab/adk/observability"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// TestAppendSpanJSON: the receiver's encoder writes exactly what
// json.Marshal writes, for every field, omitted fields, sorted attribute
// keys and strings that need escaping; a value type the mapping never
// produces falls back to json.Marshal.
func TestAppendSpanJSON(t *testing.T) {
	dur := int64(500)
	full := observability.SpanSignal{Schema: 2, Signal: "span", Phase: "end", Name: "chat", Kind: "client",
		TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", ParentSpanID: "b7ad6b7169203330",
		TraceFlags: 1, TraceState: "a=1,b=2", StartTimeUnixNano: 1, EndTimeUnixNano: 501, DurationNano: &dur, Status: "error",
		Attributes: observability.Attributes{"run_id": "r1", "gen_ai.usage.input_tokens": int64(12),
			"gen_ai.response.finish_reasons": []string{"stop", "length"}, "error.type": "timeout", "a": "", "z": []string{}, "y": []string(nil)}}
	for _, tc := range []struct {
		name string
		s    observability.SpanSignal
	}{
		{"every field", full},
		{"omitted fields and no attributes", observability.SpanSignal{Schema: 2, Signal: "span", Phase: "end", Name: "x", Kind: "internal",
			TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", StartTimeUnixNano: 7, Attributes: observability.Attributes{}}},
		{"nil attributes and nil list", observability.SpanSignal{Name: "x", Attributes: nil}},
		{"strings that need escaping", observability.SpanSignal{Name: "q\"b\\s<t>&a\n\t\r\b\f\x01\x7f é \u2028\u2029 \xff",
			Attributes: observability.Attributes{"k<&>": "v\"\\\x00", "run_id": "é", "l": []string{"<", "\u2029"}}}},
		{"a value type the mapping never produces", observability.SpanSignal{Name: "x", Attributes: observability.Attributes{"f": 1.5, "b": true}}},
		{"negative numbers", observability.SpanSignal{Name: "x", TraceFlags: -1, StartTimeUnixNano: -5, Attributes: observability.Attributes{"n": int64(-3)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(&tc.s)
			if err != nil {
				t.Fatal(err)
			}
			got, attrBytes, err := appendSpanJSON([]byte("prefix"), &tc.s)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
			a, _ := json.Marshal(tc.s.Attributes)
			if attrBytes != len(a) {
				t.Fatalf("attribute bytes %d, want %d", attrBytes, len(a))
			}
		})
	}
}

// TestMapping_OversizedAttributesAreRejected: the mapping bounds each
// value, but escaping can still take the attributes over
// observability.MaxSpanAttributesBytes, which Validate would refuse: the
// span is rejected and counted, the others are kept.
func TestMapping_OversizedAttributesAreRejected(t *testing.T) {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i, name := range []string{"big", "small"} {
		sp := spans.AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{1})
		sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
		sp.SetName(name)
		sp.SetStartTimestamp(1)
		sp.SetEndTimestamp(2)
	}
	// Control bytes are valid bounded text, and each encodes as \u0001.
	v := strings.Repeat("\x01", maxTextBytes)
	a := spans.At(0).Attributes()
	for k, kind := range allowed {
		switch kind {
		case attrText:
			if k == observability.AttrErrorType {
				a.PutStr(k, v[:maxErrorTypeBytes])
			} else {
				a.PutStr(k, v)
			}
		case attrTextList:
			l := a.PutEmptySlice(k)
			for range maxFinishReasons {
				l.AppendEmpty().SetStr(v)
			}
		}
	}
	m := mapTraces(td)
	if len(m.records) != 1 || m.rejected != 1 || m.firstReason != "span rejected: attributes_too_large" {
		t.Fatalf("records %d rejected %d reason %q", len(m.records), m.rejected, m.firstReason)
	}
	if !bytes.Contains(m.records[0], []byte(`"name":"small"`)) {
		t.Fatalf("kept %s", m.records[0])
	}
}

// TestAllowlist_HasNoCredentialKeys: what the mapping keeps needs no
// per-span credential check (Validate's), because no allowlisted key is
// credential-like except the usage counters, which are kept only as
// non-negative integers.
func TestAllowlist_HasNoCredentialKeys(t *testing.T) {
	if len(allowed) > observability.MaxSpanAttributes {
		t.Fatalf("%d allowlisted keys", len(allowed))
	}
	for k, kind := range allowed {
		if secrets.IsSensitiveKey(k) && kind != attrCount {
			t.Errorf("allowlisted key %q is credential-like", k)
		}
		if observability.IsForbiddenAttributeKey(k) {
			t.Errorf("allowlisted key %q is forbidden", k)
		}
	}
}
