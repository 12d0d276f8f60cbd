package evalengine_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// comparisonJSON is the json of readSides' comparison of n current cases
// (2n rows, metric rows too).
func comparisonJSON(t testing.TB, n int) []byte {
	t.Helper()
	_, _, cmp := readSides(t, n)
	var buf bytes.Buffer
	if _, err := evalengine.WriteComparison(&buf, cmp, evalengine.FormatJSON, evalengine.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReadComparison_EqualsDecodeComparison: the row-at-a-time reader
// reads a comparison document as the whole-document decoder does (its
// size is not the point here: its memory is, and cmd/adk crosses 16 MiB),
// and renders the same bytes in every format.
func TestReadComparison_EqualsDecodeComparison(t *testing.T) {
	data := comparisonJSON(t, 60)
	want, err := evalengine.DecodeComparison(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.MetricDiffs) == 0 || len(want.CaseDiffs) != 120 || want.Passed {
		t.Fatalf("the fixture: %d metric rows, %d case rows, passed %v", len(want.MetricDiffs), len(want.CaseDiffs), want.Passed)
	}
	// Any white space between tokens, as any JSON writer may put it.
	spaced := bytes.ReplaceAll(bytes.ReplaceAll(data, []byte(`,"`), []byte(",\n\t \"")), []byte(`":`), []byte(`" :  `))
	for name, doc := range map[string][]byte{"canonical": data, "spaced": spaced} {
		got, err := evalengine.ReadComparison(bytes.NewReader(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, format := range []string{evalengine.FormatJSON, evalengine.FormatMarkdown} {
			var a, b bytes.Buffer
			if _, err := evalengine.WriteComparison(&a, got, format, evalengine.ExportOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := evalengine.WriteComparison(&b, want, format, evalengine.ExportOptions{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("%s, %s: the read comparison renders differently", name, format)
			}
		}
		pa, err := evalengine.RenderComparisonPage(got, evalengine.ExportOptions{MaxBytes: 20_000})
		if err != nil {
			t.Fatal(err)
		}
		pb, _ := evalengine.RenderComparisonPage(want, evalengine.ExportOptions{MaxBytes: 20_000})
		if !bytes.Equal(pa, pb) {
			t.Fatalf("%s: the html page differs", name)
		}
	}
}

// TestReadComparison_Refuses: what the whole-document decoder refuses,
// the row reader refuses with the same code and reason, and its detail
// names the field.
func TestReadComparison_Refuses(t *testing.T) {
	data := string(comparisonJSON(t, 20))
	row := strings.Index(data, `{"baseline_status":`)
	second := row + 1 + strings.Index(data[row+1:], `{"baseline_status":`)
	at := func(i int, s string) string { return data[:i] + s + data[i:] }
	firstRow := data[row : strings.Index(data[row:], "}")+row+1]
	secondRow := data[second : strings.Index(data[second:], "}")+second+1]
	metrics := strings.Index(data, `"metric_diffs":[`) + len(`"metric_diffs":`)
	metricsEnd := metrics + strings.Index(data[metrics:], "]") + 1
	for _, tc := range []struct {
		name, doc, reason, detail string
	}{
		{"unknown field in a row", at(row+1, `"extra":1,`), "unknown_field", `$.case_diffs[0] key "extra"`},
		{"wrong type in a row", strings.Replace(data, `"regression":false`, `"regression":"no"`, 1), "invalid_type", "$.case_diffs[0].regression"},
		{"duplicate key in a row", at(row+1, `"case_id":"x",`), "duplicate_key", `$.case_diffs[0] key "case_id"`},
		{"a row without a key", strings.Replace(data, `,"trajectory_changed":false}`, "}", 1), "inconsistent", "$.case_diffs[0]"},
		{"rows out of order", data[:row] + secondRow + "," + firstRow + data[second+len(secondRow):], "case_order", "$.case_diffs[1]"},
		{"unknown top-level field", `{"zzz":1,` + data[1:], "unknown_field", `$ key "zzz"`},
		{"a forged verdict", strings.Replace(data, `"passed":false`, `"passed":true`, 1), "passed", ""},
		{"null rows", data[:metrics] + "null" + data[metricsEnd:], "inconsistent", "$.metric_diffs"},
		{"truncated", data[:len(data)/2], "invalid_json", ""},
		{"trailing data", data + "{}", "invalid_json", ""},
		{"not an object", "[]", "", ""},
		{"empty", "", "invalid_json", ""},
	} {
		_, derr := evalengine.DecodeComparison([]byte(tc.doc))
		_, err := evalengine.ReadComparison(strings.NewReader(tc.doc))
		if derr == nil || evalengine.ErrorCode(err) != evalengine.CodeInvalidComparison {
			t.Errorf("%s: ReadComparison %v (DecodeComparison %v)", tc.name, err, derr)
			continue
		}
		if tc.reason != "" && (evalengine.ErrorReason(err) != tc.reason || evalengine.ErrorReason(derr) != tc.reason) {
			t.Errorf("%s: reason %q, DecodeComparison's %q, want %q", tc.name, evalengine.ErrorReason(err), evalengine.ErrorReason(derr), tc.reason)
		}
		var ee *evalengine.Error
		if tc.detail != "" && (!errors.As(err, &ee) || !strings.HasPrefix(ee.Detail, tc.detail)) {
			t.Errorf("%s: detail of %v, want %q", tc.name, err, tc.detail)
		}
	}
}

// FuzzReadComparison holds the row reader to the whole-document decoder on
// any input: both accept or both refuse (with invalid_eval_comparison),
// and what they accept renders the same.
func FuzzReadComparison(f *testing.F) {
	data := comparisonJSON(f, 3)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add(bytes.Replace(data, []byte(`"regression":false`), []byte(`"regression":0`), 1))
	f.Add([]byte(`{"baseline_pass_rate":1,"baseline_version":"v","case_diffs":[],"current_pass_rate":1,"current_version":"v","eval_set_id":"s","max_pass_rate_drop":0,"metric_diffs":[],"pass_rate_drop":0,"passed":true,"report_schema_version":1,"report_type":"baseline_comparison"}`))
	f.Add([]byte(`{"case_diffs":[{"a":"\"}]"}]}`))
	f.Add([]byte(`{"case_diffs":[1,]}`))
	// What the one-pass row decoder must refuse as the three readings
	// before it did: a key that matches only by case folding, a null
	// field, a missing one, a folded repeat, a null or non-object row,
	// an unknown key after a wrong type, a number out of range.
	row := []byte(`"case_id":"`)
	for _, edit := range [][2]string{
		{`"case_id":"`, `"CASE_ID":"`},
		{`"regression":false`, `"regression":null`},
		{`,"trajectory_changed":false`, ``},
		{`"case_id":"`, `"Case_Id":"x","case_id":"`},
		{`"metric_id":"`, `"metric_ID":"`},
		{`"baseline_score":`, `"baseline_score":1e400,"x":`},
		{`"regression":false`, `"regression":0,"zzz":1`},
	} {
		f.Add(bytes.Replace(data, []byte(edit[0]), []byte(edit[1]), 1))
	}
	if i := bytes.Index(data, row); i > 0 {
		start := bytes.LastIndexByte(data[:i], '{')
		end := start + bytes.IndexByte(data[start:], '}') + 1
		for _, r := range []string{"null", "[]", `"row"`, "{}"} {
			f.Add(append(append(append([]byte{}, data[:start]...), r...), data[end:]...))
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		want, derr := evalengine.DecodeComparison(doc)
		got, err := evalengine.ReadComparison(bytes.NewReader(doc))
		if err != nil && evalengine.ErrorCode(err) != evalengine.CodeInvalidComparison {
			t.Fatalf("untyped error %v", err)
		}
		if (err == nil) != (derr == nil) {
			t.Fatalf("ReadComparison %v, DecodeComparison %v", err, derr)
		}
		if err != nil {
			return
		}
		a, aerr := evalengine.Render(got, evalengine.FormatJSON, evalengine.ExportOptions{})
		b, berr := evalengine.Render(want, evalengine.FormatJSON, evalengine.ExportOptions{})
		if aerr != nil || berr != nil || !bytes.Equal(a, b) {
			t.Fatalf("the two readings render differently: %v %v", aerr, berr)
		}
	})
}
