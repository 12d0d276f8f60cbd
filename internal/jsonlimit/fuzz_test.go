package jsonlimit

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzLimits are small enough that the fuzzer reaches every limit.
var fuzzLimits = Limits{MaxDepth: 6, MaxNodes: 64, MaxString: 24, MaxStringTotal: 96, MaxList: 12, MaxObjectKeys: 8, MaxBytes: 2048}

// measure returns the depth, node count, longest string, total string bytes,
// longest list and largest object of a decoded value.
type measure struct{ depth, nodes, str, strTotal, list, keys int }

func (m *measure) walk(v any, depth int) {
	m.nodes++
	switch v := v.(type) {
	case string:
		m.str = max(m.str, len(v))
		m.strTotal += len(v)
	case []any:
		m.depth = max(m.depth, depth+1)
		m.list = max(m.list, len(v))
		for _, e := range v {
			m.walk(e, depth+1)
		}
	case map[string]any:
		m.depth = max(m.depth, depth+1)
		m.keys = max(m.keys, len(v))
		for k, e := range v {
			m.nodes++
			m.str = max(m.str, len(k))
			m.strTotal += len(k)
			m.walk(e, depth+1)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":null}],"c":"d"}`, `[]`, `{}`, `"\ud83d\ude00"`, `-0.5e-3`, `[[[[[[]]]]]]`,
		`{"a":1,"a":2}`, `"\u0000"`, "\"\xff\"", `[1,]`, `{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim, _ := fuzzLimits.Normalize()
		v, err := Decode(data, fuzzLimits)
		if cerr := Check(data, fuzzLimits); ErrorCode(cerr) != ErrorCode(err) {
			t.Fatalf("Check and Decode disagree: %v vs %v", cerr, err)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if len(e.Error()) > 1024 {
				t.Fatalf("unbounded error message (%d bytes)", len(e.Error()))
			}
			if e.Code == CodeInvalidJSON && json.Valid(data) {
				t.Fatalf("rejected valid JSON as invalid: %v", err)
			}
			// Documents within every limit must decode with the defaults
			// too; only our strictness may refuse them.
			if _, derr := Decode(data, Limits{}); derr != nil && e.Code != ErrorCode(derr) {
				switch e.Code {
				case CodeDepth, CodeNodes, CodeString, CodeStringBudget, CodeList, CodeObject, CodeTooLarge:
				default:
					t.Fatalf("code changed with wider limits: %v then %v", err, derr)
				}
			}
			return
		}
		if !json.Valid(data) || !utf8.Valid(data) {
			t.Fatalf("accepted a document encoding/json rejects or invalid UTF-8: %q", data)
		}
		var m measure
		m.walk(v, 0)
		if m.depth > lim.MaxDepth || m.nodes > lim.MaxNodes || m.str > lim.MaxString ||
			m.strTotal > lim.MaxStringTotal || m.list > lim.MaxList || m.keys > lim.MaxObjectKeys {
			t.Fatalf("accepted a document over the limits: %+v", m)
		}
		// Agree with encoding/json on the value.
		var std any
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.UseNumber()
		if err := dec.Decode(&std); err != nil || !reflect.DeepEqual(v, std) {
			t.Fatalf("encoding/json decodes %#v (%v), we decode %#v", std, err, v)
		}
		// Re-encoding and decoding again gives the same value.
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		relim := lim
		relim.MaxBytes = DefaultMaxBytes
		again, err := Decode(out, relim)
		if err != nil || !reflect.DeepEqual(v, again) {
			t.Fatalf("round trip: %s gives %#v, %v; want %#v", out, again, err, v)
		}
	})
}

func TestFuzzMeasure(t *testing.T) {
	// The fuzz oracle must itself count like the decoder does.
	v, err := Decode([]byte(`{"ab":["c",[{}]]}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var m measure
	m.walk(v, 0)
	want := measure{depth: 4, nodes: 6, str: 2, strTotal: 3, list: 2, keys: 1}
	if m != want {
		t.Fatalf("measure = %+v, want %+v", m, want)
	}
}
