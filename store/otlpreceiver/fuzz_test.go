package otlpreceiver

import (
	"encoding/json"
	"testing"

	"github.com/fadcedab/adk/observability"
)

// FuzzOTLPDecode: no protobuf or JSON body panics decode+map, and every
// mapped span is a valid v2 span with allowlisted, non-content attributes.
// Seeds are in testdata/fuzz/FuzzOTLPDecode.
func FuzzOTLPDecode(f *testing.F) {
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","name":"x","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}`), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		m, err := decode(body, isJSON)
		if err != nil {
			return
		}
		if len(m.spans)+m.rejected != m.received {
			t.Fatalf("spans %d + rejected %d != received %d", len(m.spans), m.rejected, m.received)
		}
		for _, s := range m.spans {
			if err := s.Validate(); err != nil {
				t.Fatalf("invalid mapped span: %v", err)
			}
			for k := range s.Attributes {
				if _, ok := allowed[k]; !ok || observability.IsForbiddenAttributeKey(k) {
					t.Fatalf("attribute %q outside the allowlist", k)
				}
			}
			if _, err := json.Marshal(s); err != nil {
				t.Fatal(err)
			}
		}
	})
}
