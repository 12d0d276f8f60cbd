package evalengine_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// TestScanTypes_MirrorTheResultTypes: the stream checks decode sample and
// case lines into types that build only what the checks read; they must
// stay the result types field for field (names, tags, types or their
// stand-ins), so that strict decoding accepts exactly the same lines.
func TestScanTypes_MirrorTheResultTypes(t *testing.T) {
	if d := evalengine.ScanTypesMirror(); d != "" {
		t.Fatalf("the scan types differ from the result types: %s", d)
	}
}

// TestStreamChecks_RefuseWhatTheResultDecoderRefuses: a sample or case
// line whose metadata, input, events or args has the wrong JSON type, an
// unknown field or a case line with samples is refused by the stream
// checks (which do not build those values) exactly when the full decoder
// (ReadStream, which builds them) refuses it.
func TestStreamChecks_RefuseWhatTheResultDecoderRefuses(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "golden", "result.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	data := string(good)
	if !strings.Contains(data, `"metadata":{`) || !strings.Contains(data, `"input":`) || !strings.Contains(data, `"samples":null`) {
		t.Fatal("the golden stream lacks the fields this test edits")
	}
	for _, tc := range []struct{ name, old, new string }{
		{"metadata a string", `"metadata":{`, `"metadata":"x","y":{`},
		{"metadata a list", `"metadata":{}`, `"metadata":[]`},
		{"metadata null", `"metadata":{}`, `"metadata":null`},
		{"metadata a number", `"metadata":{}`, `"metadata":0`},
		{"input an object", `"input":`, `"input":{"a":[1,{"b":null}]},"x_input":`},
		{"unknown field in a turn", `"turn_id":`, `"turn_idx":1,"turn_id":`},
		{"unknown field, case folded", `"turn_id":`, `"Turn_ID":"t","turn_id":`},
		{"events an object", `"turn_id":`, `"events":{},"turn_id":`},
		{"events a list", `"turn_id":`, `"events":[1,"a",{}],"turn_id":`},
		{"events null", `"turn_id":`, `"events":null,"turn_id":`},
		{"call id a number", `"call_id":`, `"call_id":7,"x":`},
		{"case samples a list", `"samples":null`, `"samples":[]`},
		{"case samples false", `"samples":null`, `"samples":false`},
		{"a score a string", `"score":1`, `"score":"1"`},
		{"adapter metadata true", `"adapter_metadata":{`, `"adapter_metadata":true,"z":{`},
	} {
		if !strings.Contains(data, tc.old) {
			t.Fatalf("%s: the golden stream has no %q", tc.name, tc.old)
		}
		for _, n := range []int{1, -1} {
			edited := []byte(strings.Replace(data, tc.old, tc.new, n))
			_, full := evalengine.ReadStream(bytes.NewReader(edited))
			_, side := evalengine.ReadStreamSide(bytes.NewReader(edited))
			_, open := evalengine.OpenStreamFile(bytes.NewReader(edited), int64(len(edited)))
			if (full == nil) != (side == nil) || (side == nil) != (open == nil) {
				t.Errorf("%s (%d): ReadStream %v, ReadStreamSide %v, OpenStreamFile %v", tc.name, n, full, side, open)
			}
		}
	}
}
