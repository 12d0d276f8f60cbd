package evalengine_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
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

// FuzzScanLineDecoder holds the stream checks' one-pass line decoder to
// jsonlimit.Check and encoding/json (strict, into the same types) on any
// input, under the stream's limits and under tight ones: Check's error
// when Check refuses the line, else encoding/json's verdict, and the same
// values when both accept. The seeds are the golden stream's lines, the
// corpora of jsonlimit's FuzzDecode and of FuzzLoadSet (every limit and
// syntax rule), and edits of what encoding/json treats specially: keys
// matched by case folding (ASCII and the Kelvin sign and long s), a key
// repeated under another case (decoded again into what the first left),
// null for every kind of field, numbers that are not integers or out of
// range, and values of the wrong JSON type.
func FuzzScanLineDecoder(f *testing.F) {
	// (The golden trajectories are one step each.)
	traj := `"trajectory":[{"turn_id":"turn-1","kind":"tool_call","tool":"lookup","call_id":"k1"}]`
	manyKeys := `"m0":0,"m1":1,"m2":2,"m3":3,"m4":4,"m5":5,"m6":6,"m7":7,"m8":8,"m9":9,"m10":10,"m11":11,"m12":12,"m13":13,"m14":14,"m15":15,"m16":16,"m17":17,"m18":18,"m19":19,"m20":20,"m21":21,"m22":22,"m23":23,"m24":24,"m25":25,"m26":26,"m27":27,"m28":28,"m29":29,"m30":30,"m31":31,"m32":32,"m33":33,"m34":34,"m35":35,"m36":36,"m37":37,"m38":38,"m39":39`
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
		{traj, `"trajectory":[{"turn_id":"t","kind":"tool","tool":"x","call_id":null,"args":{"a":[1,2.5,"\u00e9"]},"result":null}]`},
		{traj, `"trajectory":[{"call_id":1}]`},
		{traj, `"trajectory":{}`},
		{`"sample":{`, `"sample":null,"Sample":{`},
		{`"case":{`, `"case":5,"x":{`},
		{`"sample_statistics":{`, `"sample_statistics":{"count":2},"Sample_Statistics":{`},
		{`"samples":null`, `"samples":[]`},
		{`"type":`, `"type":null,"Type":`},
		{`"case_id":"`, `"case_id":"\ud83d\ude00\n`},
		// One pass checks as it decodes: a repeated key (exact, escaped,
		// in what is not built, past the keys compared one by one), a
		// limit in what is not built, and an error after a key the types
		// refuse (Check's error, not the refusal).
		{`"status":`, `"status":"x","status":`},
		{`"case_id":`, `"c\u0061se_id":"x","case_id":`},
		{`"metadata":{}`, `"metadata":{"a":1,"a":2}`},
		{`"metadata":{}`, `"metadata":{` + manyKeys + `,"m7":0}`},
		{`"metadata":{}`, `"metadata":{` + manyKeys + `}`},
		{`"metadata":{}`, `"metadata":{"a":[[[[[[[[1]]]]]]]]}`},
		{`"metadata":{}`, `"metadata":{"a":"\u00e9\ud800"}`},
		{`"turn_id":`, `"bogus":1,"metadata":{"a":1,"a":2},"turn_id":`},
		{`"turn_id":`, `"turn_id":7,"input":[1,2,3,4,5,6,7,8,9,10,11,12],"turn_id":`},
		{traj, `"trajectory":[{"call_id":"c","args":{"x":[1,{"y":"\"\u0000"}],"x":2}}]`},
		{`"sample_statistics":{`, `"sample_statistics":{"count":1,"count":2,`},
		{`"type":`, `"type":"sample" ,"type":`},
	} {
		applied := false
		for _, l := range []string{sample, kase} {
			if l != "" && strings.Contains(l, edit[0]) {
				f.Add([]byte(strings.Replace(l, edit[0], edit[1], 1)))
				applied = true
			}
		}
		if !applied {
			f.Fatalf("the seed edit of %q matches no golden line", edit[0])
		}
	}
	for _, dir := range []string{filepath.Join("..", "internal", "jsonlimit", "testdata", "fuzz", "FuzzDecode"), filepath.Join("testdata", "fuzz", "FuzzLoadSet")} {
		for _, seed := range fuzzCorpus(f, dir) {
			f.Add(seed)
		}
	}
	f.Add([]byte(sample + ` x`))
	f.Add([]byte(kase + " \t"))
	f.Add([]byte(kase[:len(kase)/2]))
	f.Add([]byte(`null`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`{"type":"sample","sample":{"turns":[{"metrics":[{"metric_id":"m","score":0.5,"status":"ok"}]}]}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if d := evalengine.ScanDecodersAgree(line); d != "" {
			t.Fatal(d)
		}
	})
}

// fuzzCorpus reads the []byte inputs of a fuzz target's corpus directory
// (files in the "go test fuzz v1" encoding).
func fuzzCorpus(f *testing.F, dir string) [][]byte {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		f.Fatalf("corpus %s: %v (%d files)", dir, err, len(entries))
	}
	var seeds [][]byte
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if lines[0] != "go test fuzz v1" {
			f.Fatalf("corpus file %s: not go test fuzz v1", e.Name())
		}
		for _, l := range lines[1:] {
			q, ok := strings.CutPrefix(l, "[]byte(")
			q, ok2 := strings.CutSuffix(q, ")")
			v, err := strconv.Unquote(q)
			if !ok || !ok2 || err != nil {
				f.Fatalf("corpus file %s: cannot read %q", e.Name(), l)
			}
			seeds = append(seeds, []byte(v))
		}
	}
	return seeds
}
