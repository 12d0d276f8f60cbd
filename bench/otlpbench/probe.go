package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/fadcedab/adk/internal/otlpwire"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// probeTimeout bounds the wait for one probe to become queryable.
const probeTimeout = 30 * time.Second

// prober measures visibility lag while the load runs: every interval it
// sends one span with a fresh run_id through the receiver, under the
// benchmark's principal (so it queues behind the load's spans), and polls
// adk.trace.v1.query for that run_id until the span is there. One probe
// is outstanding at a time. The lag is request sent → first query that
// returns the span, polled at a tenth of the lag so far.
type prober struct {
	hc    *http.Client
	nc    *nats.Conn
	url   string
	token string
	every time.Duration

	// Owned by run; read after it returned.
	lags   []time.Duration
	failed int
	sent   int
}

func (p *prober) run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lag, err := p.probe(ctx, probeRunID(n))
		switch {
		case ctx.Err() != nil:
			return // stopped mid-probe: neither a sample nor a failure
		case err != nil:
			p.failed++
		default:
			p.lags = append(p.lags, lag)
		}
	}
}

// probeRunID is the run_id of the n-th probe span.
func probeRunID(n int) string { return "otlpbench-probe-" + strconv.Itoa(n) }

func (p *prober) probe(ctx context.Context, runID string) (time.Duration, error) {
	body, err := probeRequest(runID)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Authorization", "Bearer "+p.token)
	start := time.Now()
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("probe: %s", resp.Status)
	}
	p.sent++
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	for {
		r, err := tracenode.Query(ctx, p.nc, tracenode.QueryRequest{Token: p.token, Selector: map[string]string{"run_id": runID}, Limit: 1})
		if err != nil {
			return 0, err
		}
		lag := time.Since(start)
		if len(r.Page.Events) > 0 {
			return lag, nil
		}
		// Poll every tenth of the lag so far (1..20 ms): a resolution of
		// about 10%, without flooding the query service while the store
		// catches up.
		t := time.NewTimer(min(max(lag/10, time.Millisecond), 20*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// probeRequest is an ExportTraceServiceRequest of one span whose resource
// carries run_id.
func probeRequest(runID string) ([]byte, error) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("run_id", runID)
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	var tid pcommon.TraceID
	var sid pcommon.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	sp.SetTraceID(tid)
	sp.SetSpanID(sid)
	sp.SetName("otlpbench-probe")
	now := time.Now()
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	return otlpwire.EncodeTraces(td)
}
