package evalengine_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// statsResult runs n cases of 1-3 turns, samples samples each, scored by
// the default criteria and a turn-scope token F1 whose scores are
// fractions (so the order the statistics sum them in shows in the last
// digits); shift moves which answers overlap their expectations.
func statsResult(t testing.TB, version string, n, samples, shift int) *evalengine.Result {
	t.Helper()
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota"}
	var cases []string
	for i := range n {
		var turns []string
		for j := range 1 + i%3 {
			in := strings.Join(words[(i+j)%4:(i+j)%4+3], " ")
			exp := strings.Join(words[(i+j+shift)%5:(i+j+shift)%5+2+j], " ")
			turns = append(turns, fmt.Sprintf(`{"input":%q,"expected_response":%q}`, in, exp))
		}
		cases = append(cases, fmt.Sprintf(`{"id":"c%03d","turns":[%s]}`, i, strings.Join(turns, ",")))
	}
	set := mustSet(t, fmt.Sprintf(`{"id":"stats","version":%q,"cases":[%s]}`, version, strings.Join(cases, ",")))
	f1, err := evalengine.NewBuiltinMetric("f1", evalengine.ScopeTurn, 0.5, map[string]any{"metric": "semantic_quality"})
	if err != nil {
		t.Fatal(err)
	}
	o := opts(func(o *evalengine.Options) { o.PassRateThreshold, o.Samples = 0, samples })
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: &fakeAdapter{echo: true}, Metrics: append(evalengine.DefaultCriteria(), f1), Options: o,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// jsonlOf is r's jsonl form with its samples in reverse order (not in
// case order, as a run finishes them).
func jsonlOf(t testing.TB, r *evalengine.Result) []byte {
	t.Helper()
	data, err := evalengine.Render(r, evalengine.FormatJSONL, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return shuffleSamples(data)
}

// TestStatsReport_StreamEqualsDocument: the statistics of a JSON Lines
// result are those of the same result as a document, byte for byte, in
// every format and whichever of a history's results are streams.
func TestStatsReport_StreamEqualsDocument(t *testing.T) {
	results := []*evalengine.Result{
		statsResult(t, "v1", 40, 3, 0),
		statsResult(t, "v2", 40, 3, 1),
		statsResult(t, "v3", 31, 2, 3),
	}
	streams := make([][]byte, len(results))
	for i, r := range results {
		streams[i] = jsonlOf(t, r)
	}
	for _, format := range []string{evalengine.FormatText, evalengine.FormatMarkdown, evalengine.FormatJSON} {
		o := evalengine.DefaultStatsOptions()
		o.Format = format
		o.Gate.RequireSignificance = false
		want, doc, err := evalengine.StatsReport(results, o)
		if err != nil {
			t.Fatal(err)
		}
		// The test means something: a metric with fractional scores
		// from every turn of every sample, and a gate on it.
		f1 := doc.Results[0].Metrics[len(doc.Results[0].Metrics)-1]
		if f1.MetricID != "f1" || f1.Interval == nil || f1.Interval.Count < 200 || f1.Interval.Mean <= 0.1 || f1.Interval.Mean >= 0.9 || doc.Gate == nil || len(doc.Gate.Metrics) == 0 {
			t.Fatalf("%s: the fixture's statistics are trivial: %+v", format, doc)
		}
		for mask := range 1 << len(results) {
			b, err := evalengine.NewStatsBuilder(len(results), o)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range results {
				if mask&(1<<i) == 0 {
					err = b.AddResult(r)
				} else {
					var s *evalengine.StatsSeries
					if s, err = evalengine.ReadStreamSeries(bytes.NewReader(streams[i])); err != nil {
						t.Fatal(err)
					}
					err = b.Add(s)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			got, _, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s, streams %03b: the report differs from the documents':\n%s\nwant\n%s", format, mask, got, want)
			}
		}
	}
}

// TestReadStreamSeries_Refuses: a stream is checked as a comparison side
// is, and its samples' metrics must be the summary's.
func TestReadStreamSeries_Refuses(t *testing.T) {
	data := jsonlOf(t, statsResult(t, "v1", 5, 2, 0))
	first := bytes.Index(data, []byte(`"metric_id":"f1"`))
	if first < 0 {
		t.Fatal("no f1 score in the stream")
	}
	unknown := bytes.Clone(data)
	copy(unknown[first:], `"metric_id":"f9"`)
	cut := data[:bytes.LastIndex(data[:len(data)-1], []byte("\n"))+1] // no summary
	for _, tc := range []struct {
		name, reason string
		data         []byte
	}{
		{"a sample's metric the summary lacks", "unknown_metric", unknown},
		{"no summary", "incomplete", cut},
		{"not a stream", "missing_header", []byte("{}\n")},
	} {
		_, err := evalengine.ReadStreamSeries(bytes.NewReader(tc.data))
		if evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalStream || evalengine.ErrorReason(err) != tc.reason {
			t.Errorf("%s: %v, want %s %s", tc.name, err, evalengine.CodeInvalidEvalStream, tc.reason)
		}
	}
	s, err := evalengine.ReadStreamSeries(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b, err := evalengine.NewStatsBuilder(2, evalengine.DefaultStatsOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Add(s); err != nil {
		t.Fatal(err)
	}
	wantCode(t, b.AddResult(passResult(t, "other", "v1", 1, 1)), evalengine.CodeEvalSetMismatch)
	if _, _, err := b.Finish(); evalengine.ErrorCode(err) != evalengine.CodeInvalidEvaluationStatistic {
		t.Fatalf("one of two results added: %v", err)
	}
}

// FuzzReadStreamSeries holds the statistics' stream reader to the
// comparison side's checks on any input: it accepts only what
// ReadStreamSide accepts (with a typed error otherwise), and when the
// whole-result reader accepts the stream too, its statistics are the
// document's, byte for byte.
func FuzzReadStreamSeries(f *testing.F) {
	good, err := os.ReadFile(filepath.Join("testdata", "golden", "result.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(shuffleSamples(good))
	f.Add(good[:len(good)/2])
	f.Add(jsonlOf(f, statsResult(f, "v1", 3, 2, 1)))
	f.Add([]byte(`{"type":"header","format":"adk-eval-stream","version":1,"eval_set_id":"s","eval_set_version":"1","case_count":0,"sample_count":1,"digests":{}}` + "\n"))
	f.Add([]byte("{}\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := evalengine.ReadStreamSeries(bytes.NewReader(data))
		_, serr := evalengine.ReadStreamSide(bytes.NewReader(data))
		if err != nil {
			if evalengine.ErrorCode(err) != evalengine.CodeInvalidEvalStream {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if serr != nil {
			t.Fatalf("ReadStreamSeries accepts what ReadStreamSide refuses: %v", serr)
		}
		st, err := evalengine.ReadStream(bytes.NewReader(data))
		if err != nil {
			return
		}
		whole, err := evalengine.StreamToResult(st)
		if err != nil {
			return
		}
		want, _, werr := evalengine.StatsReport([]*evalengine.Result{whole}, evalengine.DefaultStatsOptions())
		b, err := evalengine.NewStatsBuilder(1, evalengine.DefaultStatsOptions())
		if err != nil {
			t.Fatal(err)
		}
		got, _, gerr := []byte(nil), (*evalengine.StatsDocument)(nil), b.Add(s)
		if gerr == nil {
			got, _, gerr = b.Finish()
		}
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("stream statistics %q (%v), document's %q (%v)", got, gerr, want, werr)
		}
	})
}
