package evalengine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/canonjson"
)

// TestResult_MarshalJSONWithIsByteIdentical checks that splicing samples
// encoded beforehand gives MarshalJSON's bytes, with metadata that needs
// escaping, keys that look like fields, cases without samples, and some
// samples left for MarshalJSONWith to encode.
func TestResult_MarshalJSONWithIsByteIdentical(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 100} {
		r := manyCases(n, func(i int) int { return i % 4 })
		want, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		for name, enc := range map[string]func(ci, si int) []byte{
			"none": func(int, int) []byte { return nil },
			"all": func(ci, si int) []byte {
				b, err := json.Marshal(&r.Cases[ci].Samples[si])
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			"some": func(ci, si int) []byte {
				if (ci+si)%2 == 0 {
					return nil
				}
				b, _ := json.Marshal(r.Cases[ci].Samples[si])
				return b
			},
		} {
			got, err := r.MarshalJSONWith(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%d cases, %s encoded: differs from MarshalJSON (%d vs %d bytes)\n%s\n%s", n, name, len(got), len(want), got, want)
			}
		}
	}
	r := manyCases(3, func(int) int { return 1 })
	r.Cases = nil
	want, _ := r.MarshalJSON()
	if got, err := r.MarshalJSONWith(func(int, int) []byte { return nil }); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("no cases: %s vs %s (%v)", got, want, err)
	}
}

// manyCases is a result of n cases, case i with samples(i) samples.
func manyCases(n int, samples func(int) int) *evalengine.Result {
	r := &evalengine.Result{
		ResultSchemaVersion: evalengine.ResultSchemaVersion, EvalSetID: `set "<&>"`, EvalSetVersion: "v\u2028",
		PassRate: 0.1 + 0.2, CaseCount: n, SampleCount: 2,
		Metrics:  []evalengine.MetricSummary{{MetricID: `"cases":null`, Kind: "k", AverageScore: 1e-9}},
		Metadata: map[string]any{"cases": nil, "samples": nil, "z": []any{1.5, "<b>"}, "a": map[string]any{"x": nil}},
	}
	for i := range n {
		c := evalengine.CaseResult{
			CaseID: fmt.Sprintf("c%05d \x01 ü", i), Status: "passed", Passed: i%3 == 0, DurationMS: int64(i),
			Metadata: map[string]any{"i": float64(i), "html": "<script>&", "samples": nil},
			Criteria: []evalengine.MetricResult{{MetricID: "m", Score: float64(i) / 7}},
		}
		for s := range samples(i) {
			c.Samples = append(c.Samples, evalengine.SampleResult{
				CaseID: c.CaseID, SampleID: fmt.Sprintf("%d/%d", i, s), SampleIndex: s, Status: "failed",
				Metadata: map[string]any{"k": `"samples":null}`},
				Turns:    []evalengine.TurnResult{{TurnID: "t", Input: map[string]any{"q": "\"hi\""}, Actual: "ok", Expected: nil}},
			})
		}
		r.Cases = append(r.Cases, c)
	}
	return r
}

// TestRender_JSONIsTheCanonicalFormOfMarshalJSON checks that the JSON
// report, which canonjson now encodes from the struct by reflection, is
// the canonical form of the document's encoding/json bytes, as it was.
func TestRender_JSONIsTheCanonicalFormOfMarshalJSON(t *testing.T) {
	for _, failing := range []bool{false, true} {
		r := fixedResult(t, failing)
		r.Metadata["odd"] = map[string]any{"\U0001F600": "<\u2028>", "\uFB33": []any{1e21, 1e-7, math.Copysign(0, -1), 0.1 + 0.2, int64(1) << 60}}
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := canonjson.Canonicalize(data)
		if err != nil {
			t.Fatal(err)
		}
		checked, err := evalengine.DecodeResult(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := evalengine.Render(checked, evalengine.FormatJSON, evalengine.ExportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(want, '\n')) {
			t.Fatalf("render differs from the canonical form:\n%s\n%s", got, want)
		}
	}
}

// TestResultSize_EqualsTheEncodedSize checks the run's size check, which
// adds up the samples' canonical sizes measured as they finished, against
// the JSON report's document.
func TestResultSize_EqualsTheEncodedSize(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 40} {
		r := manyCases(n, func(i int) int { return i % 4 })
		if n == 7 {
			r.Cases[3].Samples = nil
		}
		sum := 0
		for _, c := range r.Cases {
			for i := range c.Samples {
				b, err := canonjson.Marshal(&c.Samples[i])
				if err != nil {
					t.Fatal(err)
				}
				sum += len(b)
			}
		}
		got, err := evalengine.ResultSize(r, sum)
		if err != nil {
			t.Fatal(err)
		}
		want, err := canonjson.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got != len(want) {
			t.Fatalf("%d cases: resultSize = %d, encoding is %d bytes", n, got, len(want))
		}
	}
}

// TestRender_SplicedSamplesAreByteIdentical checks the JSON report of a
// run, which splices the samples its workers encoded, against encoding
// the whole result: with keys and strings that look like the members
// spliced ("cases":null, "samples":null), escapes, cases without samples
// and no cases at all.
func TestRender_SplicedSamplesAreByteIdentical(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 100} {
		r := manyCases(n, func(i int) int { return i % 4 })
		if n == 7 {
			r.Cases[3].Samples = nil
		}
		if n == 0 {
			r.Cases = []evalengine.CaseResult{}
		}
		want, err := canonjson.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := evalengine.SpliceSamples(r)
		if err != nil || !ok {
			t.Fatalf("%d cases: spliced %v, %v", n, ok, err)
		}
		if !bytes.Equal(got, append(want, '\n')) {
			t.Fatalf("%d cases: splice differs from the whole encoding\n%s\n%s", n, got, want)
		}
	}
	r := manyCases(3, func(int) int { return 1 })
	r.Cases = nil
	if _, ok, err := evalengine.SpliceSamples(r); ok || err != nil {
		t.Fatalf("no cases: spliced %v, %v; want the whole encoding", ok, err)
	}
}

// TestRender_RunResultEqualsItsDecodedCopy checks the JSON report of a
// result straight from Run (samples spliced) against the same result
// decoded from its document (encoded whole).
func TestRender_RunResultEqualsItsDecodedCopy(t *testing.T) {
	set := streamSet(t, 20)
	o := opts(func(o *evalengine.Options) { o.Samples = 3; o.Concurrency = 4 })
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: evalengine.DefaultCriteria(), Options: o})
	if err != nil {
		t.Fatal(err)
	}
	got, err := evalengine.Render(r, evalengine.FormatJSON, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := evalengine.DecodeResult(data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := evalengine.Render(back, evalengine.FormatJSON, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the run's report differs from its decoded copy's:\n%s\n%s", got, want)
	}
}
