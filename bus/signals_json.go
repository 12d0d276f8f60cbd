package bus

import (
	"encoding/json"
	"sync"

	"github.com/fadcedab/adk/observability"
)

// Enqueue encodes every signal it publishes; spans and envelopes go
// through observability.AppendSpanJSON and AppendEnvelopeJSON (the
// records' one encoder), which write json.Marshal's bytes without
// reflection or report that they cannot.

// Encoded signals are appended straight into 64 KiB chunks shared through a
// pool (per P, so concurrent Enqueues rarely meet): one allocation per
// ~100 spans and no copy. An output slice's capacity ends with it, so no
// later append can reach into it; a chunk is freed once its spans are.
const (
	spanArenaChunk = 64 << 10
	spanArenaMin   = 2 << 10 // start a new chunk below this much room
)

var spanArenas = sync.Pool{New: func() any { return new([]byte) }}

// encodeSignal returns json.Marshal(s), through the appenders for spans
// and envelopes.
func encodeSignal(s observability.Signal) ([]byte, error) {
	switch x := s.(type) {
	case *observability.SpanSignal:
		if x == nil {
			return json.Marshal(s)
		}
	case *observability.Envelope:
		if x == nil {
			return json.Marshal(s)
		}
	default:
		return json.Marshal(s)
	}
	ap := spanArenas.Get().(*[]byte)
	a := *ap
	if cap(a)-len(a) < spanArenaMin {
		a = make([]byte, 0, spanArenaChunk)
	}
	var b []byte
	var ok bool
	switch x := s.(type) {
	case *observability.SpanSignal:
		b, ok = observability.AppendSpanJSON(a, x)
	case *observability.Envelope:
		b, ok = observability.AppendEnvelopeJSON(a, x)
	}
	var out []byte
	switch {
	case !ok:
	case cap(b) == cap(a): // in the chunk
		out, a = b[len(a):len(b):len(b)], b
	default: // outgrew the chunk: b is a new array, keep only the signal
		out = append([]byte(nil), b[len(a):]...)
	}
	*ap = a
	spanArenas.Put(ap)
	if ok {
		return out, nil
	}
	return json.Marshal(s)
}
