package evalengine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// TestRun_WorkersRunningCountsTheStoppedWorkers: WorkersRunning is called
// once for each worker that stops, one call at a time, with how many
// still run, down to 0 before Run returns; at each call no more samples
// are in flight than the workers it says still run (a stopped worker runs
// none), which is what lets the local runner close the connections beyond
// them.
func TestRun_WorkersRunningCountsTheStoppedWorkers(t *testing.T) {
	for _, tc := range []struct {
		cases, samples, conc, workers int
	}{
		{cases: 10, samples: 3, conc: 4, workers: 4},
		{cases: 2, samples: 1, conc: 8, workers: 2}, // fewer samples than workers
	} {
		t.Run(fmt.Sprintf("%d samples at %d", tc.cases*tc.samples, tc.conc), func(t *testing.T) {
			var cases []string
			for i := range tc.cases {
				cases = append(cases, fmt.Sprintf(`{"id":"c%d","input":"x","expected":"x"}`, i))
			}
			set := mustSet(t, `{"id":"s","version":"1","cases":[`+strings.Join(cases, ",")+`]}`)
			a := &fakeAdapter{echo: true}
			var (
				calls   []int
				inCall  atomic.Bool
				overlap atomic.Bool
			)
			opts := evalengine.DefaultOptions()
			opts.Samples, opts.Concurrency = tc.samples, tc.conc
			res, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
				Adapter: a, Metrics: []evalengine.Metric{mustCriterion(t, "r", "exact_response", 1, nil)}, Options: opts,
				WorkersRunning: func(n int) {
					if !inCall.CompareAndSwap(false, true) {
						overlap.Store(true)
					}
					a.mu.Lock()
					if a.inFlight > n {
						t.Errorf("%d samples in flight after a worker stopped, %d workers running", a.inFlight, n)
					}
					a.mu.Unlock()
					calls = append(calls, n)
					inCall.Store(false)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Cases) != tc.cases || !res.Passed {
				t.Fatalf("result: %d cases, passed %v", len(res.Cases), res.Passed)
			}
			if overlap.Load() {
				t.Fatal("WorkersRunning was called by two workers at once")
			}
			want := make([]int, tc.workers)
			for i := range want {
				want[i] = tc.workers - 1 - i
			}
			if !slices.Equal(calls, want) {
				t.Fatalf("WorkersRunning calls %v, want %v", calls, want)
			}
		})
	}
}
