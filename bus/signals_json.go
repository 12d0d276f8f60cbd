package bus

import (
	"github.com/fadcedab/adk/observability"
)

// encodeSignal is json.Marshal(s) through observability.EncodeSignal, the
// records' one encoder (AppendSpanJSON and AppendEnvelopeJSON into shared
// chunks, json.Marshal for anything they decline). A tracer with the
// publisher as its RecordSink writes its own spans' records and skips
// this.
func encodeSignal(s observability.Signal) ([]byte, error) { return observability.EncodeSignal(s) }
