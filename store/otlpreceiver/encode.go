package otlpreceiver

import (
	"encoding/json"

	"github.com/fadcedab/adk/observability"
)

// appendSpanJSON appends s exactly as encoding/json.Marshal encodes it,
// through observability's record encoder (the one encoder of span
// records, which the bus publisher uses too); anything it declines falls
// back to json.Marshal. TestAppendSpanJSON and FuzzOTLPDecode hold it
// byte-identical to json.Marshal. attrBytes is the size of the encoded
// attributes object (what Validate bounds).
func appendSpanJSON(b []byte, s *observability.SpanSignal) (out []byte, attrBytes int, err error) {
	start := len(b)
	b = observability.AppendSpanHead(b, s)
	attrStart := len(b)
	b, ok := observability.AppendAttributesJSON(b, s.Attributes)
	if !ok {
		a, err := json.Marshal(s.Attributes)
		if err != nil {
			return b[:start], 0, err
		}
		data, err := json.Marshal(s)
		return append(b[:start], data...), len(a), err
	}
	return append(b, '}'), len(b) - attrStart, nil
}
