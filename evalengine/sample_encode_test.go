package evalengine_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/canonjson"
)

// sameAsCanonjson fails t unless the workers' sample encoding gives
// canonjson.Marshal's bytes for s, or fails where it fails.
func sameAsCanonjson(t testing.TB, name string, s *evalengine.SampleResult) {
	t.Helper()
	want, wantErr := canonjson.Marshal(s)
	got, gotErr := evalengine.EncodeSample(s)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%s: canonjson.Marshal error %v, EncodeSample error %v", name, wantErr, gotErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: EncodeSample differs from canonjson.Marshal\n got %s\nwant %s", name, got, want)
	}
}

// benchSample is a sample as `adk eval run` against the openai fake
// records it: traced, its events captured.
func benchSample() evalengine.SampleResult {
	return evalengine.SampleResult{
		CaseID: "case-000", SampleID: "sample-a8a23705598a7ceb8d6b97bf", Status: "passed", Passed: true, DurationMS: 204,
		Criteria: []evalengine.MetricResult{{MetricID: "response", Kind: "metric", Scope: "case", Score: 1, Threshold: 1, Passed: true, Status: "ok",
			Metadata: map[string]any{"criterion": "exact_response", "expected_count": 1, "matched_count": 1, "normalization": "exact"}}},
		Metadata:   map[string]any{},
		Trajectory: []evalengine.TrajectoryItem{},
		TraceID:    "aecbc10697bbf1418ba2bfbe228050b3",
		Turns: []evalengine.TurnResult{{
			TurnID: "turn-1", Input: "hello", Expected: "ok", Actual: "ok", Passed: true,
			Metrics:    []evalengine.MetricResult{},
			Trajectory: []evalengine.TrajectoryItem{},
			Metadata:   map[string]any{},
			AdapterMetadata: map[string]any{"invocation_id": "inv-1", "runtime_latency_ms": int64(204),
				"usage": map[string]any{"input_tokens": 12, "output_tokens": 1}},
			Events: []any{map[string]any{"author": "bench", "final": true, "id": "evt-2", "invocation_id": "inv-1",
				"content": map[string]any{"role": "model", "text": "ok", "type": "text"}}},
			RunID: "run-aecbc10697bbf1418ba2bfbe228050b3-0", TraceID: "aecbc10697bbf1418ba2bfbe228050b3",
		}},
	}
}

// nest wraps v in depth single-key maps.
func nest(v any, depth int) any {
	for range depth {
		v = map[string]any{"k": v}
	}
	return v
}

type plainStruct struct {
	A string  `json:"a"`
	B float64 `json:"b,omitempty"`
	C []int   `json:"c"`
}

func TestEncodeSample_IsCanonjsons(t *testing.T) {
	callID := "call-\u2028\"1\""
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	shapes := map[string]func(s *evalengine.SampleResult){
		"bench sample": func(*evalengine.SampleResult) {},
		"zero value":   func(s *evalengine.SampleResult) { *s = evalengine.SampleResult{} },
		"nil slices and maps": func(s *evalengine.SampleResult) {
			s.Criteria, s.Trajectory, s.Metadata = nil, nil, nil
			tr := &s.Turns[0]
			tr.Metrics, tr.Trajectory, tr.Metadata, tr.AdapterMetadata, tr.Events = nil, nil, nil, nil, nil
			tr.Input, tr.Expected, tr.Actual = nil, nil, nil
		},
		"empty events, no ids": func(s *evalengine.SampleResult) {
			s.TraceID, s.Turns[0].TraceID, s.Turns[0].RunID = "", "", ""
			s.Turns[0].Events = []any{}
		},
		"no turns":  func(s *evalengine.SampleResult) { s.Turns = []evalengine.TurnResult{} },
		"nil turns": func(s *evalengine.SampleResult) { s.Turns = nil },
		"error sample": func(s *evalengine.SampleResult) {
			s.Status, s.Passed, s.Error = "error", false, "timeout"
		},
		"trajectories": func(s *evalengine.SampleResult) {
			items := []evalengine.TrajectoryItem{
				{TurnID: "turn-1", Kind: "tool_call", Tool: "lookup", CallID: &callID, Args: map[string]any{"q": "x", "n": json.Number("12")}},
				{TurnID: "turn-1", Kind: "tool_result", Tool: "lookup", Result: []any{"a", 1.5, nil, true}},
				{TurnID: "turn-2", Kind: "tool_call", Tool: "t", Args: map[string]any(nil)},
				{Result: ""},
			}
			s.Trajectory = items
			s.Turns[0].Trajectory = items[:2]
		},
		"two turns with metrics": func(s *evalengine.SampleResult) {
			t2 := s.Turns[0]
			t2.TurnID, t2.Passed = "turn-2", false
			t2.Metrics = []evalengine.MetricResult{
				{MetricID: "m", Kind: "metric", Scope: "turn", Score: 0.1, Threshold: 1e-7, Status: "ok"},
				{MetricID: "n", Kind: "metric", Scope: "turn", Score: 1e21, Threshold: math.Copysign(0, -1), Metadata: map[string]any{"why": "x\ny"}},
				{Score: 5e-324, Threshold: 123456789.125},
			}
			s.Turns = append(s.Turns, t2)
		},
		"escapes and key order": func(s *evalengine.SampleResult) {
			s.CaseID = "a\"b\\c\u0000\u001f\t<>&\u2028\u2029\U0001F600"
			s.Metadata = map[string]any{"\uffff": 1, "\U0001F600": 2, "a": 3, "": 4, "Z": map[string]string{"y": "1", "x": "2"}}
			s.Turns[0].Input = []string{"p", "q"}
		},
		"numbers": func(s *evalengine.SampleResult) {
			s.Turns[0].Actual = map[string]any{"i64": int64(math.MinInt64), "u64": uint64(math.MaxUint64), "f32": float32(0.1),
				"num": json.Number("1.50"), "big": json.Number("123456789012345678901234567890"), "neg0": json.Number("-0")}
			s.SampleIndex, s.DurationMS = -3, math.MaxInt64
		},
		"non-generic values": func(s *evalengine.SampleResult) {
			s.Turns[0].Input = plainStruct{A: "x", C: []int{1, 2}}
			s.Turns[0].Expected = &plainStruct{A: "y", B: 2}
			s.Turns[0].Actual = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
			s.Turns[0].Events = []any{[]byte("bytes"), map[string]int{"b": 1, "a": 2}, (*plainStruct)(nil)}
		},
		// What canonjson repairs through encoding/json (U+FFFD) or refuses.
		"invalid UTF-8 in a field":        func(s *evalengine.SampleResult) { s.CaseID = "bad\xff" },
		"invalid UTF-8 in a value":        func(s *evalengine.SampleResult) { s.Turns[0].Actual = "bad\xfe" },
		"invalid UTF-8 in a key":          func(s *evalengine.SampleResult) { s.Metadata = map[string]any{"k\xff": 1} },
		"invalid UTF-8 in a struct value": func(s *evalengine.SampleResult) { s.Turns[0].Input = plainStruct{A: "\xff"} },
		"invalid UTF-8 in a call id": func(s *evalengine.SampleResult) {
			bad := "\xc0"
			s.Trajectory = []evalengine.TrajectoryItem{{CallID: &bad}}
		},
		"NaN score": func(s *evalengine.SampleResult) { s.Criteria[0].Score = math.NaN() },
		"infinite threshold": func(s *evalengine.SampleResult) {
			s.Turns[0].Metrics = []evalengine.MetricResult{{Threshold: math.Inf(-1)}}
		},
		"NaN in metadata":   func(s *evalengine.SampleResult) { s.Turns[0].Metadata = map[string]any{"x": math.NaN()} },
		"invalid number":    func(s *evalengine.SampleResult) { s.Metadata = map[string]any{"x": json.Number("1e")} },
		"unsupported value": func(s *evalengine.SampleResult) { s.Turns[0].Actual = make(chan int) },
		"cycle":             func(s *evalengine.SampleResult) { s.Turns[0].AdapterMetadata = cyclic },
	}
	for name, edit := range shapes {
		s := benchSample()
		edit(&s)
		sameAsCanonjson(t, name, &s)
	}
	// Around MaxDepth, in each place a generic value sits: a sample's
	// metadata (1 container deep), a turn's fields (3), a turn's metric's
	// metadata (5), a turn's trajectory item's args (5).
	place := map[string]func(s *evalengine.SampleResult, v any){
		"sample metadata":   func(s *evalengine.SampleResult, v any) { s.Metadata = v.(map[string]any) },
		"criteria metadata": func(s *evalengine.SampleResult, v any) { s.Criteria[0].Metadata = v.(map[string]any) },
		"turn input":        func(s *evalengine.SampleResult, v any) { s.Turns[0].Input = v },
		"turn events":       func(s *evalengine.SampleResult, v any) { s.Turns[0].Events = []any{v} },
		"turn metric metadata": func(s *evalengine.SampleResult, v any) {
			s.Turns[0].Metrics = []evalengine.MetricResult{{Metadata: v.(map[string]any)}}
		},
		"turn args": func(s *evalengine.SampleResult, v any) {
			s.Turns[0].Trajectory = []evalengine.TrajectoryItem{{Args: v}}
		},
		"turn struct value": func(s *evalengine.SampleResult, v any) { s.Turns[0].Actual = []any{plainStruct{A: "x"}, v} },
	}
	for name, set := range place {
		oks := 0
		for depth := canonjson.MaxDepth - 12; depth <= canonjson.MaxDepth; depth++ {
			s := benchSample()
			set(&s, nest("leaf", depth))
			sameAsCanonjson(t, name, &s)
			if _, err := canonjson.Marshal(&s); err == nil {
				oks++
			}
		}
		if oks == 0 || oks == 13 {
			t.Errorf("%s: %d of 13 depths encode: the range misses MaxDepth's edge", name, oks)
		}
	}
}

// TestEncodeSample_EveryField fills every field of a sample, its turns,
// metrics and trajectory items by reflection, so a field added to those
// types and not to the sample encoder fails here.
func TestEncodeSample_EveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var s evalengine.SampleResult
		f := filler{rng: rng, full: i%2 == 0}
		f.fill(reflect.ValueOf(&s).Elem(), 0)
		if f.full && !allFieldsSet(reflect.ValueOf(s)) {
			t.Fatalf("the filler left a field empty: extend fill\n%+v", s)
		}
		sameAsCanonjson(t, "random sample", &s)
	}
}

var fillStrings = []string{"", "a", "turn-1", "z\u2028\"\\\n", "\U0001F600", "\uffff", "ok"}

// filler sets values at random: the result types' fields by reflection,
// generic JSON values where the type is any or a map. A full filler
// leaves no field empty.
type filler struct {
	rng  *rand.Rand
	full bool
}

func (f filler) fill(v reflect.Value, depth int) {
	rng := f.rng
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), depth+1)
			}
		}
	case reflect.String:
		v.SetString(fillStrings[rng.IntN(len(fillStrings)-1)+1])
		if !f.full && rng.IntN(4) == 0 {
			v.SetString("")
		}
	case reflect.Bool:
		v.SetBool(f.full || rng.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		v.SetInt(rng.Int64N(2000) + 1)
		if !f.full && rng.IntN(2) == 0 {
			v.SetInt(-v.Int())
		}
	case reflect.Float64:
		v.SetFloat([]float64{1, 0.5, -2.25, 1e21, 1e-7, rng.NormFloat64()}[rng.IntN(6)])
		if !f.full && rng.IntN(5) == 0 {
			v.SetFloat(0)
		}
	case reflect.Pointer:
		if !f.full && rng.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		n := rng.IntN(4)
		if f.full {
			n = 2 + rng.IntN(2)
		}
		if n == 0 {
			v.SetZero()
			return
		}
		sl := reflect.MakeSlice(v.Type(), n-1, n-1)
		for i := range n - 1 {
			f.fill(sl.Index(i), depth+1)
		}
		v.Set(sl)
	case reflect.Map, reflect.Interface:
		if !f.full && rng.IntN(4) == 0 {
			v.SetZero()
			return
		}
		g := genericValue(rng, depth)
		for f.full && g == nil {
			g = genericValue(rng, depth)
		}
		if v.Kind() == reflect.Map {
			m, _ := g.(map[string]any)
			if m == nil {
				m = map[string]any{"v": g}
			}
			v.Set(reflect.ValueOf(m))
			return
		}
		v.Set(reflect.ValueOf(&g).Elem())
	default:
		panic("fill: no random value of kind " + v.Kind().String() + ": extend fill")
	}
}

// genericValue is a random JSON value of generic types.
func genericValue(rng *rand.Rand, depth int) any {
	n := rng.IntN(9)
	if depth > 6 {
		n %= 5
	}
	switch n {
	case 0:
		return nil
	case 1:
		return fillStrings[rng.IntN(len(fillStrings))]
	case 2:
		return rng.IntN(3) == 0
	case 3:
		return rng.NormFloat64() * 1e3
	case 4:
		return json.Number([]string{"1", "-0", "1.50", "12345678901234567890"}[rng.IntN(4)])
	case 5, 6:
		m := map[string]any{}
		for range rng.IntN(4) {
			m[fillStrings[rng.IntN(len(fillStrings))]] = genericValue(rng, depth+1)
		}
		return m
	default:
		a := make([]any, rng.IntN(3))
		for i := range a {
			a[i] = genericValue(rng, depth+1)
		}
		return a
	}
}

// allFieldsSet reports whether every exported field of v and of the
// first element of its struct slices is not the zero value.
func allFieldsSet(v reflect.Value) bool {
	for i := range v.NumField() {
		f := v.Field(i)
		if f.IsZero() {
			return false
		}
		if f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct {
			if f.Len() == 0 || !allFieldsSet(f.Index(0)) {
				return false
			}
		}
	}
	return true
}

// FuzzEncodeSample holds the sample encoding to canonjson.Marshal for
// samples built from fuzzed strings, numbers and JSON values.
func FuzzEncodeSample(f *testing.F) {
	f.Add("case-000", "ok", 1.0, []byte(`{"a":1,"b":[true,null,"x"]}`), []byte(`[{"id":"evt-1","content":{"text":"ok"}}]`), int64(204))
	f.Add("bad\xff", "", math.NaN(), []byte(`{"\u00e9":1.5e300}`), []byte(`"x"`), int64(-1))
	f.Add("\u2028", "timeout", 1e21, []byte(`[[[[{"k":"\ud800"}]]]]`), []byte(`null`), int64(0))
	f.Fuzz(func(t *testing.T, id, text string, score float64, meta, events []byte, n int64) {
		decode := func(b []byte) any {
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber()
			var v any
			if d.Decode(&v) != nil {
				return string(b)
			}
			return v
		}
		s := benchSample()
		s.CaseID, s.Error, s.DurationMS = id, text, n
		s.Criteria[0].Score = score
		if m, ok := decode(meta).(map[string]any); ok {
			s.Metadata = m
		}
		s.Turns[0].Actual = text
		s.Turns[0].Input = decode(meta)
		ev := decode(events)
		if a, ok := ev.([]any); ok {
			s.Turns[0].Events = a
		} else {
			s.Turns[0].Events = []any{ev}
		}
		s.Trajectory = []evalengine.TrajectoryItem{{TurnID: text, CallID: &id, Args: ev, Result: decode(meta)}}
		sameAsCanonjson(t, "fuzzed sample", &s)
	})
}

// BenchmarkEncodeSample is a run's encoding of one finished sample (the
// bench sample of `adk eval run` against the openai fake): the workers'
// encoder against canonjson.Marshal, which it replaces there.
func BenchmarkEncodeSample(b *testing.B) {
	s := benchSample()
	for _, enc := range []struct {
		name string
		fn   func(*evalengine.SampleResult) ([]byte, error)
	}{
		{"canonjson", func(s *evalengine.SampleResult) ([]byte, error) { return canonjson.Marshal(s) }},
		{"encodeSample", evalengine.EncodeSample},
	} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.fn(&s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
