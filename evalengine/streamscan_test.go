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

// FuzzScanLineDecoder holds the stream checks' line decoder to
// encoding/json (strict, into the same types) on any input: the same
// verdict, and the same values when both accept. The seeds are the golden
// stream's lines and edits of what encoding/json treats specially: keys
// matched by case folding (ASCII and the Kelvin sign and long s), a key
// repeated under another case (decoded again into what the first left),
// null for every kind of field, numbers that are not integers or out of
// range, and values of the wrong JSON type.
func FuzzScanLineDecoder(f *testing.F) {
	good, err := os.ReadFile(filepath.Join("testdata", "golden", "result.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(good)), "\n")
	for _, l := range lines {
		f.Add([]byte(l))
	}
	sample, kase := "", ""
	for _, l := range lines {
		switch {
		case sample == "" && strings.HasPrefix(l, `{"type":"sample"`):
			sample = l
		case kase == "" && strings.HasPrefix(l, `{"type":"case"`):
			kase = l
		}
	}
	for _, edit := range [][2]string{
		{`"status":`, `"STATUS":"x","Status":`},
		{`"case_id":`, `"\u212aind":1,"case_id":`},
		{`"status":`, `"\u017ftatus":`},
		{`"turns":[`, `"Turns":[{"turn_id":"a"},{"passed":true},{}],"TURNS":[{}],"turns":[`},
		{`"criteria":[`, `"criteria":[null,`},
		{`"passed":`, `"passed":null,"Passed":`},
		{`"sample_index":0`, `"sample_index":0.0`},
		{`"sample_index":0`, `"sample_index":1e0`},
		{`"sample_index":0`, `"sample_index":-0`},
		{`"sample_index":0`, `"sample_index":99999999999999999999`},
		{`"score":1`, `"score":1e999`},
		{`"score":1`, `"score":1e-999`},
		{`"score":1`, `"score":null`},
		{`"metadata":{}`, `"metadata":[]`},
		{`"trajectory":[]`, `"trajectory":[{"turn_id":"t","kind":"tool","tool":"x","call_id":null,"args":{"a":[1,2.5,"\u00e9"]},"result":null}]`},
		{`"trajectory":[]`, `"trajectory":[{"call_id":1}]`},
		{`"trajectory":[]`, `"trajectory":{}`},
		{`"sample":{`, `"sample":null,"Sample":{`},
		{`"case":{`, `"case":5,"x":{`},
		{`"sample_statistics":{`, `"sample_statistics":{"count":2},"Sample_Statistics":{`},
		{`"samples":null`, `"samples":[]`},
		{`"type":`, `"type":null,"Type":`},
		{`"case_id":"`, `"case_id":"\ud83d\ude00\n`},
	} {
		for _, l := range []string{sample, kase} {
			if l != "" && strings.Contains(l, edit[0]) {
				f.Add([]byte(strings.Replace(l, edit[0], edit[1], 1)))
			}
		}
	}
	f.Add([]byte(`null`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`{"type":"sample","sample":{"turns":[{"metrics":[{"metric_id":"m","score":0.5,"status":"ok"}]}]}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if d := evalengine.ScanDecodersAgree(line); d != "" {
			t.Fatal(d)
		}
	})
}
