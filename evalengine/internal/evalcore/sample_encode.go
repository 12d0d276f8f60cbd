package evalcore

import (
	"strconv"
	"sync"

	"github.com/fadcedab/adk/internal/canonjson"
)

// encodeSample returns canonjson.Marshal(s)'s bytes. A run encodes every
// sample as it finishes (Run's workers), and canonjson's reflection over
// the result's four struct types was most of that encoding's CPU; this
// writes those structs' fields in their canonical key order itself and
// hands only the generic values (inputs, outputs, events, metadata) to
// canonjson. On any error it encodes the sample with canonjson.Marshal
// instead, whose error or repair (U+FFFD for invalid UTF-8) is the
// answer: canonjson's nested pieces fail wherever its reflected encoding
// of the whole sample would stop. TestEncodeSample_IsCanonjsons and
// FuzzEncodeSample hold it to canonjson.Marshal, with every field of the
// four types filled by reflection, so a field added to them without a
// line here fails.
func encodeSample(s *SampleResult) ([]byte, error) {
	p := sampleBufs.Get().(*[]byte)
	w := sampleWriter{b: (*p)[:0]}
	w.sample(s)
	if w.err != nil {
		sampleBufs.Put(p)
		// A copy goes to Marshal, so that s does not escape: the
		// worker's sample stays on its stack.
		c := *s
		return canonjson.Marshal(&c)
	}
	// One allocation of the encoding's size, as canonjson.Marshal's.
	out := append(make([]byte, 0, len(w.b)), w.b...)
	if cap(w.b) <= maxPooledSampleBuf {
		*p = w.b
		sampleBufs.Put(p)
	}
	return out, nil
}

// sampleBufs keeps encodeSample's scratch buffers, each made with room
// for a single-turn sample (~1 KB) rather than grown from empty.
var sampleBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 2<<10)
	return &b
}}

// maxPooledSampleBuf is the largest scratch buffer kept in sampleBufs.
const maxPooledSampleBuf = 64 << 10

// sampleWriter appends a sample's canonical encoding to b; the first
// error stops it. Its depth arguments count the containers around a value
// as canonjson's reflected encoding counts them (the sample itself is 1).
type sampleWriter struct {
	b   []byte
	err error
}

func (w *sampleWriter) raw(s string) { w.b = append(w.b, s...) }

func (w *sampleWriter) str(s string) {
	if w.err == nil {
		w.b, w.err = canonjson.AppendString(w.b, s)
	}
}

func (w *sampleWriter) float(f float64) {
	if w.err == nil {
		w.b, w.err = canonjson.AppendFloat(w.b, f)
	}
}

func (w *sampleWriter) int(n int64) { w.b = strconv.AppendInt(w.b, n, 10) }

func (w *sampleWriter) bool(v bool) { w.b = strconv.AppendBool(w.b, v) }

// value writes a generic value (any, map[string]any, []any) found inside
// depth containers.
func (w *sampleWriter) value(v any, depth int) {
	if w.err == nil {
		w.b, w.err = canonjson.AppendNested(w.b, v, depth)
	}
}

// The key order below is canonjson's (UTF-16 code units; these keys are
// ASCII, so byte order), and omitempty is encoding/json's: an empty
// string, slice or map, a nil interface.

func (w *sampleWriter) sample(s *SampleResult) {
	w.raw(`{"case_id":`)
	w.str(s.CaseID)
	w.raw(`,"criteria":`)
	w.metrics(s.Criteria, 2)
	w.raw(`,"duration_ms":`)
	w.int(s.DurationMS)
	if s.Error != "" {
		w.raw(`,"error":`)
		w.str(s.Error)
	}
	w.raw(`,"metadata":`)
	w.value(s.Metadata, 1)
	w.raw(`,"passed":`)
	w.bool(s.Passed)
	w.raw(`,"sample_id":`)
	w.str(s.SampleID)
	w.raw(`,"sample_index":`)
	w.int(int64(s.SampleIndex))
	w.raw(`,"status":`)
	w.str(s.Status)
	if s.TraceID != "" {
		w.raw(`,"trace_id":`)
		w.str(s.TraceID)
	}
	w.raw(`,"trajectory":`)
	w.trajectory(s.Trajectory, 2)
	w.raw(`,"turns":`)
	if s.Turns == nil {
		w.raw("null")
	} else {
		w.raw("[")
		for i := range s.Turns {
			if i > 0 {
				w.raw(",")
			}
			w.turn(&s.Turns[i], 3)
		}
		w.raw("]")
	}
	w.raw("}")
}

// turn writes t, a struct at depth.
func (w *sampleWriter) turn(t *TurnResult, depth int) {
	w.raw(`{"actual":`)
	w.value(t.Actual, depth)
	w.raw(`,"adapter_metadata":`)
	w.value(t.AdapterMetadata, depth)
	if len(t.Events) > 0 {
		// Element by element: a slice in an interface is an allocation.
		w.raw(`,"events":[`)
		for i, ev := range t.Events {
			if i > 0 {
				w.raw(",")
			}
			w.value(ev, depth+1)
		}
		w.raw("]")
	}
	w.raw(`,"expected":`)
	w.value(t.Expected, depth)
	w.raw(`,"input":`)
	w.value(t.Input, depth)
	w.raw(`,"metadata":`)
	w.value(t.Metadata, depth)
	w.raw(`,"metrics":`)
	w.metrics(t.Metrics, depth+1)
	w.raw(`,"passed":`)
	w.bool(t.Passed)
	if t.RunID != "" {
		w.raw(`,"run_id":`)
		w.str(t.RunID)
	}
	if t.TraceID != "" {
		w.raw(`,"trace_id":`)
		w.str(t.TraceID)
	}
	w.raw(`,"trajectory":`)
	w.trajectory(t.Trajectory, depth+1)
	w.raw(`,"turn_id":`)
	w.str(t.TurnID)
	w.raw("}")
}

// metrics writes ms, a slice at depth.
func (w *sampleWriter) metrics(ms []MetricResult, depth int) {
	if ms == nil {
		w.raw("null")
		return
	}
	w.raw("[")
	for i := range ms {
		if i > 0 {
			w.raw(",")
		}
		m := &ms[i]
		w.raw(`{"kind":`)
		w.str(m.Kind)
		w.raw(`,"metadata":`)
		w.value(m.Metadata, depth+1)
		w.raw(`,"metric_id":`)
		w.str(m.MetricID)
		w.raw(`,"passed":`)
		w.bool(m.Passed)
		w.raw(`,"scope":`)
		w.str(m.Scope)
		w.raw(`,"score":`)
		w.float(m.Score)
		w.raw(`,"status":`)
		w.str(m.Status)
		w.raw(`,"threshold":`)
		w.float(m.Threshold)
		w.raw("}")
	}
	w.raw("]")
}

// trajectory writes items, a slice at depth.
func (w *sampleWriter) trajectory(items []TrajectoryItem, depth int) {
	if items == nil {
		w.raw("null")
		return
	}
	w.raw("[")
	for i := range items {
		if i > 0 {
			w.raw(",")
		}
		it := &items[i]
		w.raw("{")
		if it.Args != nil {
			w.raw(`"args":`)
			w.value(it.Args, depth+1)
			w.raw(",")
		}
		w.raw(`"call_id":`)
		if it.CallID == nil {
			w.raw("null")
		} else {
			w.str(*it.CallID)
		}
		w.raw(`,"kind":`)
		w.str(it.Kind)
		if it.Result != nil {
			w.raw(`,"result":`)
			w.value(it.Result, depth+1)
		}
		w.raw(`,"tool":`)
		w.str(it.Tool)
		w.raw(`,"turn_id":`)
		w.str(it.TurnID)
		w.raw("}")
	}
	w.raw("]")
}
