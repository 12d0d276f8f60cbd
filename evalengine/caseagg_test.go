package evalengine_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
)

// TestCaseAggregator_EqualsAggregate checks that aggregating case by case
// (the fleet's records) writes the same case lines and summary as the
// whole result Aggregate builds, and refuses a case out of order.
func TestCaseAggregator_EqualsAggregate(t *testing.T) {
	set := streamSet(t, 40)
	o := opts(func(o *evalengine.Options) { o.Samples = 3; o.Concurrency = 8 })
	metrics := evalengine.DefaultCriteria()
	full, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: &countingAdapter{}, Metrics: metrics, Options: o})
	if err != nil {
		t.Fatal(err)
	}
	var all []evalengine.SampleResult
	for _, c := range full.Cases {
		all = append(all, c.Samples...)
	}
	want, err := evalengine.Aggregate(set, metrics, o, all, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	agg, err := evalengine.NewCaseAggregator(set, metrics, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range full.Cases {
		if err := agg.Add(c.Samples); err != nil {
			t.Fatal(err)
		}
	}
	got, err := agg.Result(1500 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	tail := func(r *evalengine.Result) string {
		var b bytes.Buffer
		sw, _ := evalengine.NewStreamWriter(&b, nil, 0, 0)
		if err := sw.WriteSummary(r); err != nil {
			t.Fatal(err)
		}
		_ = sw.Flush()
		return b.String()
	}
	if tail(got) != tail(want) {
		t.Fatal("case by case, the case lines and summary differ from Aggregate's")
	}
	again, _ := evalengine.NewCaseAggregator(set, metrics, o)
	if err := again.Add(full.Cases[1].Samples); err == nil {
		t.Fatal("case 1's samples were taken as case 0's")
	}
	if _, err := again.Result(0); err == nil {
		t.Fatal("a result with no cases added")
	}
}
