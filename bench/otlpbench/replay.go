package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fadcedab/adk/internal/otlpwire"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// replayBodies is how many distinct request bodies the replay load cycles
// through; span and trace ids repeat after replayBodies × BatchSize spans.
const replayBodies = 64

// runReplay is the -load replay generator: cfg.Procs × cfg.Workers
// connections each POST pre-encoded protobuf requests shaped like
// telemetrygen's (BatchSize spans, traces of 1 + ChildSpans spans with the
// generator's two peer attributes, service.name on the resource) back to
// back for cfg.Duration, retrying a 503 after its Retry-After. It measures
// adk without telemetrygen's own cost (its SDK, and the spans its batch
// processor generates and drops), so it is a ceiling, not what an
// OpenTelemetry SDK achieves. It returns the spans posted (a request
// refused with 503 and posted again counts each time, as the receiver
// counts it) and this process's CPU over the run.
func runReplay(ctx context.Context, cfg Config, hc *http.Client, url, token string) (uint64, time.Duration, error) {
	bodies := make([][]byte, replayBodies)
	for i := range bodies {
		b, err := replayRequest(cfg.BatchSize, 1+cfg.ChildSpans)
		if err != nil {
			return 0, 0, err
		}
		bodies[i] = b
	}
	cpu0 := selfCPU()
	// Requests started before the deadline finish, so every posted span
	// is counted on both sides.
	deadline := time.Now().Add(cfg.Duration)
	var sent atomic.Uint64
	var next atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Procs*cfg.Workers)
	for range cfg.Procs * cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				body := bodies[next.Add(1)%replayBodies]
				ok, err := postOnce(ctx, hc, url, token, body)
				if err != nil {
					errs <- err
					return
				}
				sent.Add(uint64(cfg.BatchSize))
				if ok {
					continue
				}
				t := time.NewTimer(time.Until(deadline)) // 503: back off as Retry-After says, not past the deadline
				if d := time.Second; d < time.Until(deadline) {
					t.Reset(d)
				}
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	return sent.Load(), selfCPU() - cpu0, nil
}

// postOnce posts one body: true on 200, false on 503, an error otherwise.
func postOnce(ctx context.Context, hc *http.Client, url, token string, body []byte) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusServiceUnavailable:
		return false, nil
	}
	return false, fmt.Errorf("replay: %s", resp.Status)
}

// replayRequest is one telemetrygen-shaped request of n spans in traces of
// perTrace spans (a client parent and server children), with fresh ids.
func replayRequest(n, perTrace int) ([]byte, error) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "telemetrygen")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("telemetrygen")
	now := time.Now()
	var tid pcommon.TraceID
	var parent pcommon.SpanID
	for i := range n {
		sp := ss.Spans().AppendEmpty()
		var sid pcommon.SpanID
		_, _ = rand.Read(sid[:])
		if i%perTrace == 0 {
			_, _ = rand.Read(tid[:])
			parent = sid
			sp.SetName("lets-go")
			sp.SetKind(ptrace.SpanKindClient)
			sp.Attributes().PutStr("network.peer.address", "1.2.3.4")
			sp.Attributes().PutStr("peer.service", "telemetrygen-server")
		} else {
			sp.SetParentSpanID(parent)
			sp.SetName(fmt.Sprintf("okey-dokey-%d", i%perTrace-1))
			sp.SetKind(ptrace.SpanKindServer)
			sp.Attributes().PutStr("network.peer.address", "1.2.3.4")
			sp.Attributes().PutStr("peer.service", "telemetrygen-client")
		}
		sp.SetTraceID(tid)
		sp.SetSpanID(sid)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(123 * time.Microsecond)))
	}
	return otlpwire.EncodeTraces(td)
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
