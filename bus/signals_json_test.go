package bus

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/fadcedab/adk/observability"
)

// awkward strings: every escape class of encoding/json.
var awkward = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\nret\rbs\bff\f",
	"\x00\x01\x1f\x7f", "caf\u00e9 \u65e5\u672c", "\u2028\u2029", "bad \xff\xfe utf8", "\xe2\x80", "emoji \U0001F600",
	"half \xed\xa0\x80 surrogate",
}

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return awkward[r.IntN(len(awkward))]
	}
	b := make([]byte, r.IntN(24))
	for i := range b {
		b[i] = byte(r.IntN(256))
		if r.IntN(2) == 0 {
			b[i] = byte('a' + r.IntN(26))
		}
	}
	return string(b)
}

func randValue(r *rand.Rand, depth int) any {
	n := 12
	if depth > 3 {
		n = 9 // no more containers
	}
	switch r.IntN(n) {
	case 0:
		return randString(r)
	case 1:
		return r.IntN(2) == 0
	case 2:
		return r.Int64() - r.Int64()
	case 3:
		return int(r.Int32())
	case 4:
		fs := []float64{0, math.Copysign(0, -1), 1.5, -2.25e-7, 1e-6, 1e21, 9.99e20, 123456789.125, 5e-324, math.MaxFloat64, r.NormFloat64() * 1e6}
		return fs[r.IntN(len(fs))]
	case 5:
		return nil
	case 6:
		return uint64(r.Uint64())
	case 7:
		return int32(r.Int32())
	case 8:
		return uint32(r.Uint32())
	case 9:
		if r.IntN(4) == 0 {
			return []string(nil)
		}
		s := make([]string, r.IntN(4))
		for i := range s {
			s[i] = randString(r)
		}
		return s
	case 10:
		if r.IntN(4) == 0 {
			return []any(nil)
		}
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = randValue(r, depth+1)
		}
		return a
	default:
		return randMap(r, depth+1)
	}
}

func randMap(r *rand.Rand, depth int) map[string]any {
	if r.IntN(8) == 0 {
		return nil
	}
	m := map[string]any{}
	n := r.IntN(8)
	if r.IntN(8) == 0 { // past the appender's small-map sort
		n = 8 + r.IntN(24)
	}
	for range n {
		m[randString(r)] = randValue(r, depth)
	}
	return m
}

func randSpan(r *rand.Rand) *observability.SpanSignal {
	s := &observability.SpanSignal{
		Schema: r.IntN(4), Signal: randString(r), Phase: randString(r), Name: randString(r), Kind: randString(r),
		TraceID: randString(r), SpanID: randString(r), TraceFlags: r.IntN(300) - 20,
		StartTimeUnixNano: r.Int64() - r.Int64(), Attributes: observability.Attributes(randMap(r, 0)),
	}
	if r.IntN(2) == 0 {
		s.ParentSpanID = randString(r)
	}
	if r.IntN(2) == 0 {
		s.TraceState = randString(r)
	}
	if r.IntN(2) == 0 {
		s.EndTimeUnixNano = r.Int64()
	}
	if r.IntN(2) == 0 {
		d := r.Int64() - r.Int64()
		s.DurationNano = &d
	}
	if r.IntN(2) == 0 {
		s.Status = randString(r)
	}
	return s
}

func randEnvelope(r *rand.Rand) *observability.Envelope {
	e := &observability.Envelope{
		Schema: r.IntN(4), Event: randString(r), TimestampMS: r.Int64() - r.Int64(), ContentCaptured: r.IntN(2) == 0,
		Metadata: observability.EnvelopeMetadata{TraceID: randString(r), SpanID: randString(r), TraceFlags: r.IntN(300) - 20},
	}
	m := &e.Metadata
	for _, f := range []*string{&m.RunID, &m.InvocationID, &m.Session, &m.Agent, &m.Model, &m.Tool, &m.CallID, &m.ParentID, &m.TraceState} {
		if r.IntN(2) == 0 {
			*f = randString(r)
		}
	}
	switch r.IntN(4) {
	case 0:
	case 1:
		e.Measurements = map[string]int64{}
	default:
		e.Measurements = map[string]int64{}
		for range 1 + r.IntN(8) {
			e.Measurements[randString(r)] = r.Int64() - r.Int64()
		}
	}
	if r.IntN(4) != 0 {
		m.Attributes = observability.Attributes(randMap(r, 0))
	}
	if r.IntN(3) == 0 {
		e.Content = randValue(r, 0)
	}
	return e
}

// checkSameAsMarshal fails unless encodeSignal gives json.Marshal's bytes,
// or its error.
func checkSameAsMarshal(t *testing.T, s observability.Signal) {
	t.Helper()
	want, werr := json.Marshal(s)
	got, gerr := encodeSignal(s)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("errors differ: json %v, appender %v", werr, gerr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("bytes differ:\n got %s\nwant %s", got, want)
	}
}

func TestEncodeSignal_MatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20_000 {
		s := randSpan(r)
		t.Run("", func(t *testing.T) {
			if i%1000 == 0 {
				t.Logf("sample %s", mustAppend(t, s))
			}
			checkSameAsMarshal(t, s)
			checkSameAsMarshal(t, randEnvelope(r))
		})
	}
}

func mustAppend(t *testing.T, s *observability.SpanSignal) []byte {
	b, ok := observability.AppendSpanJSON(nil, s)
	if !ok {
		t.Logf("appender declined")
	}
	return b
}

func TestEncodeSignal_FallsBackWhereItCannotMatch(t *testing.T) {
	type custom struct{ A int }
	deep := any("leaf")
	for range 32 + 5 { // beyond observability's append depth bound
		deep = []any{deep}
	}
	cases := map[string]any{
		"nan": math.NaN(), "inf": math.Inf(-1), "int8": int8(3), "float32": float32(0.1), "struct": custom{A: 1},
		"number": json.Number("12"), "deep": deep, "nested nan": map[string]any{"x": []any{math.Inf(1)}},
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			s := &observability.SpanSignal{Schema: 2, Signal: "span", Attributes: observability.Attributes{"k": v}}
			if _, ok := observability.AppendSpanJSON(nil, s); ok && name != "deep" {
				t.Fatalf("appender accepted %T", v)
			}
			checkSameAsMarshal(t, s)
		})
	}
	for name, v := range cases {
		t.Run("envelope "+name, func(t *testing.T) {
			e := &observability.Envelope{Schema: 1, Event: "adk.run.start", Content: map[string]any{"a": "<b>", "k": v}}
			if _, ok := observability.AppendEnvelopeJSON(nil, e); ok && name != "deep" {
				t.Fatalf("appender accepted content %T", v)
			}
			checkSameAsMarshal(t, e)
			e = &observability.Envelope{Schema: 1, Event: "adk.run.stop", Metadata: observability.EnvelopeMetadata{Attributes: observability.Attributes{"k": v}}}
			if _, ok := observability.AppendEnvelopeJSON(nil, e); ok && name != "deep" {
				t.Fatalf("appender accepted attribute %T", v)
			}
			checkSameAsMarshal(t, e)
		})
	}
	t.Run("envelope content", func(t *testing.T) {
		checkSameAsMarshal(t, &observability.Envelope{Schema: 1, Event: "adk.run.start", Content: map[string]any{"a": "<b>"}})
		checkSameAsMarshal(t, &observability.Envelope{Schema: 1, Event: "adk.run.start", Content: map[string]any(nil)})
	})
	t.Run("nil span", func(t *testing.T) {
		checkSameAsMarshal(t, (*observability.SpanSignal)(nil))
	})
	t.Run("nil envelope", func(t *testing.T) {
		checkSameAsMarshal(t, (*observability.Envelope)(nil))
	})
}

func FuzzEncodeSignal(f *testing.F) {
	f.Add("gen_ai.chat", "run-1", "k", "v<&>\u2028", int64(42), 1.5, true, uint8(0))
	f.Add("\xff", "", "\x00", "\\\"", int64(-1), 1e-7, false, uint8(7))
	f.Fuzz(func(t *testing.T, name, run, key, val string, n int64, fl float64, flag bool, shape uint8) {
		d := n / 3
		s := &observability.SpanSignal{
			Schema: 2, Signal: "span", Phase: "end", Name: name, Kind: "client", TraceID: run, SpanID: key,
			ParentSpanID: val, TraceFlags: int(shape), StartTimeUnixNano: n, EndTimeUnixNano: n + 1, Status: val,
			Attributes: observability.Attributes{
				key: val, "run_id": run, "n": n, "f": fl, "b": flag, "list": []string{val, key},
				"any": []any{n, fl, val, nil, map[string]any{key: []any{flag}}}, strconv.Itoa(int(shape)): map[string]any{val: key},
			},
		}
		if shape&1 == 1 {
			s.DurationNano = &d
		}
		if shape&2 == 2 {
			s.Attributes = nil
		}
		if shape&4 == 4 {
			s.TraceState = key
		}
		checkSameAsMarshal(t, s)
		e := &observability.Envelope{Schema: int(shape), Event: name, TimestampMS: n, ContentCaptured: flag,
			Measurements: map[string]int64{key: n, val: d},
			Metadata: observability.EnvelopeMetadata{RunID: run, Agent: val, Tool: key, TraceID: run, SpanID: key,
				TraceFlags: int(shape), Attributes: s.Attributes}}
		if shape&8 == 8 {
			e.Content = map[string]any{key: []any{val, fl, n, flag, nil}}
			e.Metadata.ParentID, e.Metadata.TraceState = val, name
			e.Measurements = nil
		}
		checkSameAsMarshal(t, e)
	})
}

func BenchmarkEncodeSignal(b *testing.B) {
	d := int64(500)
	s := &observability.SpanSignal{
		Schema: 2, Signal: "span", Phase: "end", Name: "gen_ai.chat", Kind: "client",
		TraceID: "0000000000000000000000000000abcd", SpanID: "000000000000abcd", TraceFlags: 1,
		StartTimeUnixNano: 1000, EndTimeUnixNano: 1500, DurationNano: &d, Status: "ok",
		Attributes: observability.Attributes{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
			"gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": int64(120), "gen_ai.usage.output_tokens": int64(40),
			"run_id": "run-1"},
	}
	b.Run("appender", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeSignal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	e := &observability.Envelope{Schema: 1, Event: "adk.eval.stop", TimestampMS: 1000,
		Measurements: map[string]int64{"duration": 500, "duration_ms": 0},
		Metadata: observability.EnvelopeMetadata{RunID: "run-1", Agent: "travel", TraceID: "0000000000000000000000000000abcd",
			SpanID: "000000000000abcd", TraceFlags: 1, Attributes: observability.Attributes{"adk.eval.job_id": "job-1",
				"adk.eval.case_id": "c1", "adk.eval.sample_id": "c1#0", "adk.eval.worker_id": "w0", "status": "ok"}}}
	b.Run("envelope_appender", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeSignal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("envelope_encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEncodeSignal_OutputsStayIntact keeps every output while later spans,
// some larger than a chunk's room, are encoded into the shared chunks.
func TestEncodeSignal_OutputsStayIntact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var spans []*observability.SpanSignal
	var outs [][]byte
	for i := range 3000 {
		s := randSpan(r)
		if i%97 == 0 {
			s.Attributes = observability.Attributes{"big": strings.Repeat("x", 1000*(1+r.IntN(80)))}
		}
		out, err := encodeSignal(s)
		if err != nil {
			continue
		}
		spans, outs = append(spans, s), append(outs, out)
	}
	for i, s := range spans {
		want, _ := json.Marshal(s)
		if !bytes.Equal(outs[i], want) {
			t.Fatalf("output %d changed after later encodes", i)
		}
	}
}
