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

// sameAsDecode checks that DecodeDeferring of data, with key deferred,
// gives Decode's error, or its value once the deferred arrays are built
// with EachElement.
func sameAsDecode(t *testing.T, data []byte, lim Limits, want any, werr error, key string) {
	t.Helper()
	got, err := DecodeDeferring(data, lim, key)
	if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
		t.Fatalf("DecodeDeferring err = %v, Decode err = %v", err, werr)
	}
	if err != nil {
		return
	}
	if m, ok := got.(map[string]any); ok {
		if span, ok := m[key].(Deferred); ok {
			if !span.IsArray() {
				m[key] = want.(map[string]any)[key] // a scalar or object: compared as is below
				if _, err := DecodeDeferring(data[span.Start:span.End], lim); err != nil {
					t.Fatalf("deferred value does not decode alone: %v", err)
				}
			} else {
				list := []any{}
				if err := EachElement(data, span, lim, func(i int, v any) error {
					if i != len(list) {
						t.Fatalf("element %d after %d", i, len(list))
					}
					list = append(list, v)
					return nil
				}); err != nil {
					t.Fatalf("EachElement: %v", err)
				}
				if len(list) != span.Len {
					t.Fatalf("Len = %d, %d elements", span.Len, len(list))
				}
				m[key] = list
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeDeferring = %#v, Decode = %#v", got, want)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":null}],"c":"d"}`, `[]`, `{}`, `"\ud83d\ude00"`, `-0.5e-3`, `[[[[[[]]]]]]`,
		`{"a":1,"a":2}`, `{"a":[{"a":[]},[1],"x"],"b":{"a":[2]}}`, `{"a":{"b":1}}`, `{"a":[]}`, `"\u0000"`, "\"\xff\"", `[1,]`, `{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0}`,
		// Checking keeps keys as bytes (escaped ones decoded): the same
		// duplicates, paths and keys in errors as decoding.
		`{"a":1,"\u0061":2}`, `{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k\u0030":0}`,
		`{"\u00e9\n":{"b":[1,{"c":tru}]}}`, `{"":{"":1,"":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim, _ := fuzzLimits.Normalize()
		v, err := Decode(data, fuzzLimits)
		if cerr := Check(data, fuzzLimits); (cerr == nil) != (err == nil) || err != nil && cerr.Error() != err.Error() {
			t.Fatalf("Check and Decode disagree: %v vs %v", cerr, err)
		}
		sameAsDecode(t, data, fuzzLimits, v, err, "a")
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
