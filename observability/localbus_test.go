package observability

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gateExporter blocks every export until release is closed and counts
// what it got.
type gateExporter struct {
	release chan struct{}
	got     atomic.Int64
	err     error
}

func (g *gateExporter) Export(ctx context.Context, _ Signal) error {
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if g.err != nil {
		return g.err
	}
	g.got.Add(1)
	return nil
}

func span() *SpanSignal {
	return &SpanSignal{Schema: 2, Signal: "span", Phase: PhaseEnd, Name: "gen_ai.chat", Kind: SpanKindClient}
}

func TestLocalBus_BoundedByItemsAndCountsEveryDrop(t *testing.T) {
	g := &gateExporter{release: make(chan struct{})}
	b, err := NewLocalBus(LocalBusConfig{Exporters: []ExporterDescriptor{{ID: "g", Exporter: g, Timeout: 10 * time.Second}}, MaxQueueEvents: 4})
	if err != nil {
		t.Fatal(err)
	}
	full := 0
	for range 10 {
		if err := b.Enqueue(span()); errors.Is(err, ErrLocalBusFull) {
			full++
		}
	}
	if full != 6 {
		t.Fatalf("%d rejected, want 6", full)
	}
	close(g.release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	st := b.Stats()
	if st.Accepted != 4 || st.Exported != 4 || st.Rejected != 6 || st.Dropped() != 6 || g.got.Load() != 4 {
		t.Fatalf("stats %+v, exporter got %d", st, g.got.Load())
	}
}

func TestLocalBus_BoundedByBytes(t *testing.T) {
	g := &gateExporter{release: make(chan struct{})}
	defer close(g.release)
	b, err := NewLocalBus(LocalBusConfig{Exporters: []ExporterDescriptor{{ID: "g", Exporter: g}}, MaxQueueBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ok := 0
	for range 10 {
		if b.Enqueue(span()) == nil {
			ok++
		}
	}
	if ok != 3 { // 320 B each
		t.Fatalf("%d admitted under 1000 B", ok)
	}
}

func TestLocalBus_DrainIsBoundedAndCloseCountsTheRest(t *testing.T) {
	g := &gateExporter{release: make(chan struct{})} // never released: a stalled collector
	b, err := NewLocalBus(LocalBusConfig{Exporters: []ExporterDescriptor{{ID: "g", Exporter: g, Timeout: 10 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := b.Enqueue(span()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain: %v", err)
	}
	b.Close()
	if st := b.Stats(); st.ClosedDropped != 5 || st.Exported != 0 || st.QueueEvents != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := b.Enqueue(span()); !errors.Is(err, ErrLocalBusClosed) {
		t.Fatalf("enqueue after close: %v", err)
	}
}

func TestLocalBus_RetriesTransientFailuresThenCountsThem(t *testing.T) {
	g := &gateExporter{release: make(chan struct{}), err: transient("http_status")}
	close(g.release)
	b, err := NewLocalBus(LocalBusConfig{Exporters: []ExporterDescriptor{{ID: "g", Exporter: g}}, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = b.Enqueue(span()) }()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if st := b.Stats(); st.ExportFailed != 3 || st.Retried != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestLocalBus_NoExporterAcceptsNothing(t *testing.T) {
	b, err := NewLocalBus(LocalBusConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Enqueue(span()); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if st := b.Stats(); st != (LocalBusStats{}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestExporterFromEnv_Precedence(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		vars              map[string]string
		traces, logs, svc string
	}{
		{map[string]string{EnvOTLPEndpoint: "http://a:1", EnvOTELEndpoint: "http://b:2"}, "http://a:1/v1/traces", "http://a:1/v1/logs", "adk"},
		{map[string]string{EnvOTELTracesEndpoint: "http://c:3/custom/traces", EnvOTELEndpoint: "http://b:2"}, "http://c:3/custom/traces", "http://c:3/v1/logs", "adk"},
		{map[string]string{EnvOTELEndpoint: "http://b:2/base/", EnvOTELServiceName: "svc"}, "http://b:2/base/v1/traces", "http://b:2/base/v1/logs", "svc"},
		{map[string]string{EnvOTELEndpoint: "http://b:2", EnvOTELResourceAttributes: "service.name=fromattrs,a=b"}, "http://b:2/v1/traces", "http://b:2/v1/logs", "fromattrs"},
	} {
		d, err := ExporterFromEnv(env(tc.vars), "adk")
		if err != nil {
			t.Fatal(err)
		}
		e := d.Exporter.(*OTLPExporter)
		if e.tracesURL != tc.traces || e.logsURL != tc.logs || e.cfg.Resource.ServiceName != tc.svc {
			t.Errorf("%v: traces %s logs %s service %s", tc.vars, e.tracesURL, e.logsURL, e.cfg.Resource.ServiceName)
		}
		_ = e.Close()
	}
	if d, err := ExporterFromEnv(env(nil), "adk"); d != nil || err != nil {
		t.Fatalf("no endpoint: %v %v", d, err)
	}
}
