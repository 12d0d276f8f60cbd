package jsonlimit

import (
	"encoding/json"
	"errors"
	"fmt"
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

// scanWalk reads the next value with s as a decoder would: containers key
// by key and element by element, strings and numbers as such, the rest
// with Skip; how (mode, one bit a depth) decides whether a container
// below the top is walked, built with Value, or skipped (nil).
func scanWalk(s *Scanner, mode uint16, depth int) (any, error) {
	how := mode >> (2 * min(depth, 7)) & 3
	c := s.NextByte()
	switch {
	case depth > 0 && how == 1 && (c == '{' || c == '['):
		return s.Value()
	case depth > 0 && how == 2 && (c == '{' || c == '['):
		return nil, s.Skip()
	case c == '{':
		if err := s.Object(); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for {
			k, more, err := s.Key()
			if err != nil || !more {
				return m, err
			}
			key := string(k)
			v, err := scanWalk(s, mode, depth+1)
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
	case c == '[':
		if err := s.Array(); err != nil {
			return nil, err
		}
		l := []any{}
		for {
			more, err := s.Elem()
			if err != nil || !more {
				return l, err
			}
			v, err := scanWalk(s, mode, depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
	case c == '"':
		b, err := s.StringValue()
		return string(b), err
	case c == '-' || '0' <= c && c <= '9':
		b, err := s.NumberValue()
		return json.Number(b), err
	}
	v, err := s.Value()
	return v, err
}

// skipped sets to nil what scanWalk skips in v under mode.
func skipped(v any, mode uint16, depth int) any {
	how := mode >> (2 * min(depth, 7)) & 3
	switch x := v.(type) {
	case map[string]any:
		switch {
		case depth > 0 && how == 1:
			return v
		case depth > 0 && how == 2:
			return nil
		}
		for k, e := range x {
			x[k] = skipped(e, mode, depth+1)
		}
	case []any:
		switch {
		case depth > 0 && how == 1:
			return v
		case depth > 0 && how == 2:
			return nil
		}
		for i, e := range x {
			x[i] = skipped(e, mode, depth+1)
		}
	}
	return v
}

// FuzzScanner: a document walked with a Scanner, whichever values are
// walked, built or skipped, gives Check's error exactly, or Decode's
// value (what was skipped aside); a reused Scanner gives the same again.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":null}],"c":"d"}`, `[]`, `{}`, `"\ud83d\ude00"`, `-0.5e-3`, `[[[[[[]]]]]]`, `[[[[[[[]]]]]]]`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"b":{"c":1,"c":2}}}`, `[{"a":1},{"a":1}]`, `{"a":[]} x`, `{"a":`, `[1,]`, `{"a":1,}`,
		`{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0}`, `{"a":"0123456789012345678901234"}`, `[0,0,0,0,0,0,0,0,0,0,0,0,0]`,
		`{"\u00e9\n":{"b":[1,{"c":tru}]}}`, `{"":{"":1,"":2}}`, "\"\xff\"", `{"a":nul}`, `[01]`, `{"a" 1}`,
	} {
		for _, mode := range []uint16{0, 0x5555, 0xaaaa, 0x1234} {
			f.Add([]byte(s), mode)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint16) {
		werr := Check(data, fuzzLimits)
		want, _ := Decode(data, fuzzLimits)
		var s Scanner
		for range 2 {
			var got any
			err := s.Reset(data, fuzzLimits)
			if err == nil {
				got, err = scanWalk(&s, mode, 0)
			}
			if err == nil {
				err = s.End()
			}
			if !reflect.DeepEqual(err, werr) {
				t.Fatalf("Scanner: %v, Check: %v", err, werr)
			}
			if err == nil && !reflect.DeepEqual(got, skipped(want, mode, 0)) {
				t.Fatalf("Scanner read %#v, Decode %#v", got, want)
			}
		}
	})
}

// TestScanner_ManyKeys: past the keys it compares one by one, the
// Scanner finds a repeat in its map, in nested objects too, and forgets
// an object's keys when it ends.
func TestScanner_ManyKeys(t *testing.T) {
	obj := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%d":{"k%d":%d},`, i, i, i)
		}
		b.WriteString(extra + "}")
		return b.String()
	}
	for _, tc := range []struct {
		doc  string
		code string
	}{
		{obj(maxFewKeys-1, `"k0":1`), CodeDuplicateKey},
		{obj(maxFewKeys, `"k0":1`), CodeDuplicateKey},
		{obj(3*maxFewKeys, `"k70":1`), CodeDuplicateKey},
		{obj(3*maxFewKeys, `"x":1`), ""},
		{"[" + obj(2*maxFewKeys, `"x":1`) + "," + obj(2*maxFewKeys, `"x":1`) + "]", ""},
		{`[{"a":1,"b":2},{"a":1,"b":2,"a":3}]`, CodeDuplicateKey},
	} {
		var s Scanner
		err := s.Reset([]byte(tc.doc), Limits{})
		if err == nil {
			_, err = scanWalk(&s, 0, 0)
		}
		if err == nil {
			err = s.End()
		}
		if ErrorCode(err) != tc.code || !reflect.DeepEqual(err, Check([]byte(tc.doc), Limits{})) {
			t.Errorf("%.40s...: %v, want %q and Check's %v", tc.doc, err, tc.code, Check([]byte(tc.doc), Limits{}))
		}
	}
}
