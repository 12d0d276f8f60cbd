package otlpreceiver

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/fadcedab/adk/observability"
)

// FuzzOTLPDecode: no protobuf or JSON body panics decode+map, every
// published record is a valid v2 span with allowlisted, non-content
// attributes, and the receiver's encoder wrote exactly what json.Marshal
// writes for it. Seeds are in testdata/fuzz/FuzzOTLPDecode.
func FuzzOTLPDecode(f *testing.F) {
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"x","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}`), true)
	f.Add([]byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"run_id","value":{"stringValue":"r<1>&\u2028"}}]},"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"\"é\\n\u0001","startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"key":"gen_ai.usage.input_tokens","value":{"intValue":"7"}},{"key":"gen_ai.response.finish_reasons","value":{"arrayValue":{"values":[{"stringValue":"stop"}]}}}]}]}]}]}`), true)
	f.Add([]byte{}, false)
	f.Add(telemetrygenRequest(f, 4), false)
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		m, err := decode(body, isJSON)
		if err != nil {
			return
		}
		if len(m.records)+m.rejected != m.received {
			t.Fatalf("records %d + rejected %d != received %d", len(m.records), m.rejected, m.received)
		}
		for _, rec := range m.records {
			var s observability.SpanSignal
			if err := json.Unmarshal(rec, &s); err != nil {
				t.Fatalf("record %s: %v", rec, err)
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("invalid mapped span: %v", err)
			}
			for k := range s.Attributes {
				if _, ok := allowed[k]; !ok || observability.IsForbiddenAttributeKey(k) {
					t.Fatalf("attribute %q outside the allowlist", k)
				}
			}
			if want, err := json.Marshal(&s); err != nil || !bytes.Equal(want, rec) {
				t.Fatalf("encoded\n%s\njson.Marshal\n%s", rec, want)
			}
		}
	})
}
