package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/nats-io/nats.go"
)

// QueryStats is the query half of the comparison: after the load, the
// store holding everything it ingested answers selector pages through
// adk.trace.v1.query (NATS request/reply, as any client would ask).
type QueryStats struct {
	// TraceByID is one trace's spans (trace_id selector, a full page)
	// for trace ids sampled evenly across the stored stream.
	TraceByID []time.Duration
	// TraceSpans is the spans those pages returned in all.
	TraceSpans int
	// ByRun is the probes' runs (run_id selector): a selector over the
	// principal's whole stream that matches one run, the kind of search the
	// reference answers by service.
	ByRun []time.Duration
}

// querySamples is how many traces are sampled, and how many times each
// query is asked.
const (
	querySamples = 50
	queryRounds  = 4
)

// measureQueries samples trace ids across what the store holds (the first
// event after querySamples evenly spaced cursors between the oldest live
// event and the latest: once the store has evicted, a cursor below the
// oldest one is a replay_gap) and times their trace-by-id pages, then the
// run_id pages of the probes that were sent (evicted probes' runs answer
// empty pages, a search all the same).
func measureQueries(ctx context.Context, nc *nats.Conn, token string, probeRuns int) (*QueryStats, error) {
	ask := func(sel map[string]string, after *uint64, limit int) (*tracestore.Page, time.Duration, error) {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		t0 := time.Now()
		r, err := tracenode.Query(qctx, nc, tracenode.QueryRequest{Token: token, Selector: sel, AfterCursor: after, Limit: limit})
		d := time.Since(t0)
		if err != nil {
			return nil, d, err
		}
		if r.Page == nil {
			return nil, d, fmt.Errorf("query %v: no page", sel)
		}
		return r.Page, d, nil
	}
	head, _, err := ask(nil, nil, 1)
	if err != nil {
		return nil, err
	}
	if head.OldestAvailableCursor == nil {
		return nil, fmt.Errorf("the store holds no event (latest cursor %d)", head.LatestCursor)
	}
	// After oldest-1 the first event is the oldest; every cursor sampled
	// is at or above the eviction watermark.
	first, latest := *head.OldestAvailableCursor-1, head.LatestCursor
	var traces []string
	seen := map[string]bool{}
	for i := range querySamples {
		after := first + uint64(i)*(latest-first)/querySamples
		p, _, err := ask(nil, &after, 1)
		if err != nil {
			return nil, err
		}
		if len(p.Events) == 0 {
			continue
		}
		var ev struct {
			Identity struct {
				TraceID string `json:"trace_id"`
			} `json:"identity"`
		}
		if err := json.Unmarshal(p.Events[0], &ev); err != nil {
			return nil, fmt.Errorf("a stored event: %w", err)
		}
		if id := ev.Identity.TraceID; id != "" && !seen[id] {
			seen[id] = true
			traces = append(traces, id)
		}
	}
	if len(traces) == 0 {
		return nil, fmt.Errorf("no trace id found in %d sampled events", querySamples)
	}
	st := &QueryStats{}
	for round := range queryRounds {
		for _, id := range traces {
			p, d, err := ask(map[string]string{"trace_id": id}, nil, 0)
			if err != nil {
				return nil, err
			}
			if len(p.Events) == 0 {
				return nil, fmt.Errorf("trace %s: empty page", id)
			}
			st.TraceByID = append(st.TraceByID, d)
			if round == 0 {
				st.TraceSpans += len(p.Events)
			}
		}
		for n := range probeRuns {
			_, d, err := ask(map[string]string{"run_id": probeRunID(n)}, nil, 0)
			if err != nil {
				return nil, err
			}
			st.ByRun = append(st.ByRun, d)
		}
	}
	return st, nil
}
