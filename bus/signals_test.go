package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/observability"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// signalEnv is one embedded server with a client connection.
type signalEnv struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func newSignalEnv(t *testing.T) *signalEnv {
	t.Helper()
	s := bustest.Start(t, bus.ServerConfig{})
	return &signalEnv{nc: s.NC, js: s.JS}
}

func (e *signalEnv) ensure(t *testing.T, c bus.SignalStreamConfig) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := bus.EnsureSignalStream(ctx, e.js, c)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (e *signalEnv) publisher(t *testing.T, c bus.PublisherConfig) *bus.Publisher {
	t.Helper()
	if c.Principal == "" {
		c.Principal = "alice"
	}
	p, err := bus.NewPublisher(e.nc, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func span(i int) *observability.SpanSignal {
	return &observability.SpanSignal{
		Schema: 2, Signal: "span", Phase: "start", Name: "gen_ai.chat", Kind: "client",
		TraceID: fmt.Sprintf("%032x", i+1), SpanID: fmt.Sprintf("%016x", i+1), TraceFlags: 1,
		StartTimeUnixNano: int64(i) * 1000, Attributes: observability.Attributes{"gen_ai.operation.name": "chat"},
	}
}

func drain(t *testing.T, p *bus.Publisher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Drain(ctx); err != nil {
		t.Fatalf("drain: %v (stats %+v)", err, p.Stats())
	}
}

func TestSignalStream_EnsureIsIdempotentUpdatesBoundsAndReportsMismatch(t *testing.T) {
	e := newSignalEnv(t)
	c := bus.SignalStreamConfig{MaxMsgs: 100, MaxBytes: 1 << 20, MaxAge: time.Hour, MaxMsgSize: 64 << 10, DiscardNew: true}
	st := e.ensure(t, c)
	e.ensure(t, c) // same config: no error, no change
	// No block compression by default: publishers compress batches.
	if got := st.CachedInfo().Config.Compression; got != jetstream.NoCompression {
		t.Fatalf("compression %v, want none", got)
	}
	if _, err := e.js.Publish(context.Background(), "adk.signal.alice", []byte("x")); err != nil {
		t.Fatal(err)
	}

	// Bounds and compression are updated in place; the messages and
	// their sequence numbers stay.
	c2 := c
	c2.MaxMsgs, c2.MaxBytes, c2.DiscardNew, c2.Compression = 200, 2<<20, false, bus.SignalCompressionS2
	e.ensure(t, c2)
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg := info.Config; cfg.MaxMsgs != 200 || cfg.MaxBytes != 2<<20 || cfg.Discard != jetstream.DiscardOld ||
		cfg.Compression != jetstream.S2Compression || info.State.LastSeq != 1 || info.State.Msgs != 1 {
		t.Fatalf("after the update: %+v, state %+v", cfg, info.State)
	}
	// A stream created with S2 blocks (the default before publishers
	// compressed) is switched back to none in place, messages kept.
	c2.Compression = ""
	e.ensure(t, c2)
	if info, err = st.Info(context.Background()); err != nil || info.Config.Compression != jetstream.NoCompression || info.State.Msgs != 1 {
		t.Fatalf("back to none: %v %+v", err, info)
	}

	// Replicas is not a bound: refused, nothing changes.
	c3 := c2
	c3.Replicas = 3
	_, err = bus.EnsureSignalStream(context.Background(), e.js, c3)
	var mm *bus.StreamMismatchError
	if !errors.As(err, &mm) || mm.Field != "replicas" || !errors.Is(err, bus.ErrStreamMismatch) {
		t.Fatalf("mismatch: got %v", err)
	}
	if info, err := st.Info(context.Background()); err != nil || info.Config.Replicas != 1 || info.Config.MaxMsgs != 200 {
		t.Fatalf("stream changed: %v", err)
	}
	if _, err := bus.EnsureSignalStream(context.Background(), e.js, bus.SignalStreamConfig{Replicas: 2}); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Fatalf("replicas 2: %v", err)
	}
	var ce *bus.ConfigError
	if _, err := bus.EnsureSignalStream(context.Background(), e.js, bus.SignalStreamConfig{Compression: "zstd"}); !errors.As(err, &ce) || ce.Field != "Compression" {
		t.Fatalf("compression zstd: %v", err)
	}
}

func TestPublisher_BatchesAndExportsEverySignal(t *testing.T) {
	e := newSignalEnv(t)
	st := e.ensure(t, bus.SignalStreamConfig{})
	p := e.publisher(t, bus.PublisherConfig{BatchSize: 16, MaxInflightBatches: 4})
	const n = 500
	for i := range n {
		if err := p.Enqueue(span(i)); err != nil {
			t.Fatal(err)
		}
	}
	drain(t, p)
	s := p.Stats()
	if s.Accepted != n || s.Exported != n || s.QueueEvents != 0 || s.DeliveryGuarantee != "bounded_best_effort" {
		t.Fatalf("stats %+v", s)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs >= n || info.State.Msgs < n/16 {
		t.Fatalf("want batched messages, got %d for %d signals", info.State.Msgs, n)
	}
	// Every record arrives, in order, under the publisher's principal
	// subject, in S2-compressed messages that decode to exactly the
	// signals enqueued.
	next := 0
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if pr, err := bus.PrincipalFromSubject(m.Subject); err != nil || pr != "alice" {
			t.Fatalf("principal %q %v", pr, err)
		}
		if enc := m.Header.Get(bus.SignalEncodingHeader); enc != bus.SignalEncodingS2 {
			t.Fatalf("message %d: encoding %q, want s2", seq, enc)
		}
		if _, err := bus.DecodeSignalBatch(m.Data, 1<<20); err == nil {
			t.Fatalf("message %d: a compressed body decoded as a plain envelope", seq)
		}
		b, err := bus.DecodeSignalMessage(m.Header, m.Data, 1<<20)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		for _, r := range b.Records {
			want, _ := json.Marshal(span(next))
			if r.Kind != bus.RecordObservability || string(r.Data) != string(want) {
				t.Fatalf("record %d: %s %s, want %s", next, r.Kind, r.Data, want)
			}
			next++
		}
	}
	if next != n {
		t.Fatalf("%d records in the stream, want %d", next, n)
	}
}

// TestPublisher_TinyBatchIsSentPlain: a batch too small to gain from
// compression goes out as the plain envelope, without the header.
func TestPublisher_TinyBatchIsSentPlain(t *testing.T) {
	e := newSignalEnv(t)
	st := e.ensure(t, bus.SignalStreamConfig{})
	p := e.publisher(t, bus.PublisherConfig{})
	if err := p.EnqueueRecord(bus.RecordWorkflowLifecycle, []byte(`{"t":1}`)); err != nil {
		t.Fatal(err)
	}
	drain(t, p)
	m, err := st.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if enc := m.Header.Get(bus.SignalEncodingHeader); enc != "" {
		t.Fatalf("encoding %q, want plain", enc)
	}
	for _, decode := range []func() (bus.SignalBatch, error){
		func() (bus.SignalBatch, error) { return bus.DecodeSignalBatch(m.Data, 1<<20) },
		func() (bus.SignalBatch, error) { return bus.DecodeSignalMessage(m.Header, m.Data, 1<<20) },
	} {
		if b, err := decode(); err != nil || len(b.Records) != 1 || string(b.Records[0].Data) != `{"t":1}` {
			t.Fatalf("batch %+v %v", b, err)
		}
	}
}

func TestPublisher_StreamRejectionIsCountedNotRetried(t *testing.T) {
	e := newSignalEnv(t)
	e.ensure(t, bus.SignalStreamConfig{MaxMsgs: 3, DiscardNew: true})
	p := e.publisher(t, bus.PublisherConfig{BatchSize: 1, MaxInflightBatches: 1, MaxAttempts: 5})
	for i := range 10 {
		if err := p.Enqueue(span(i)); err != nil {
			t.Fatal(err)
		}
	}
	drain(t, p)
	s := p.Stats()
	if s.Exported != 3 || s.StreamRejected != 7 || s.PermanentFailures != 7 || s.Retried != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestPublisher_TransientFailureIsRetriedUntilTheStreamExists(t *testing.T) {
	e := newSignalEnv(t)
	p := e.publisher(t, bus.PublisherConfig{MaxAttempts: 100, RetryBaseDelay: 20 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond})
	if err := p.Enqueue(span(0)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "a retry", func() bool { return p.Stats().Retried > 0 })
	e.ensure(t, bus.SignalStreamConfig{})
	drain(t, p)
	if s := p.Stats(); s.Exported != 1 || s.FailedAttempts == 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestPublisher_DropPolicies(t *testing.T) {
	// No stream: publishes fail transiently and wait a long backoff, so the
	// queue stays full while we probe it.
	cfg := bus.PublisherConfig{MaxQueueEvents: 4, BatchSize: 1, MaxInflightBatches: 1, MaxAttempts: 2, RetryBaseDelay: time.Minute}
	for _, tc := range []struct {
		policy  bus.DropPolicy
		wantErr error
	}{
		{bus.DropReject, bus.ErrQueueFull},
		{bus.DropNewest, bus.ErrSignalDropped},
		{bus.DropOldest, nil},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			e := newSignalEnv(t)
			c := cfg
			c.DropPolicy = tc.policy
			p := e.publisher(t, c)
			for i := range 4 {
				if err := p.Enqueue(span(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Enqueue(span(9)); !errors.Is(err, tc.wantErr) {
				t.Fatalf("fifth enqueue: %v", err)
			}
			s := p.Stats()
			switch tc.policy {
			case bus.DropReject:
				if s.Rejected != 1 || s.Accepted != 4 {
					t.Fatalf("%+v", s)
				}
			case bus.DropNewest:
				if s.DroppedNewest != 1 || s.Accepted != 4 {
					t.Fatalf("%+v", s)
				}
			case bus.DropOldest:
				if s.DroppedOldest != 1 || s.Accepted != 5 || s.QueueEvents != 4 {
					t.Fatalf("%+v", s)
				}
			}
		})
	}
}

// queueGauge reads adk_observability_bus_queue_events.
func queueGauge(t *testing.T, m *observability.Metrics) float64 {
	t.Helper()
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == observability.MetricBusQueueEvents {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no queue gauge")
	return 0
}

func TestPublisher_DrainIsBounded(t *testing.T) {
	e := newSignalEnv(t)
	m, err := observability.NewMetrics(observability.MetricsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p := e.publisher(t, bus.PublisherConfig{MaxDrainWaiters: 1, RetryBaseDelay: time.Minute, Metrics: m})
	if err := p.Enqueue(span(0)); err != nil {
		t.Fatal(err)
	}
	if g := queueGauge(t, m); g != 1 {
		t.Fatalf("queue gauge %v with one signal queued", g)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Drain(ctx) }()
	testutil.WaitFor(t, 5*time.Second, "one drain waiter", func() bool { return p.Stats().DrainWaiters == 1 })
	if err := p.Drain(context.Background()); !errors.Is(err, bus.ErrDrainWaiterLimit) {
		t.Fatalf("second waiter: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, bus.ErrDrainTimeout) {
		t.Fatalf("drain: %v", err)
	}
	p.Close()
	if s := p.Stats(); s.ClosedDropped != 1 || s.QueueEvents != 0 {
		t.Fatalf("close accounting %+v", s)
	}
	if g := queueGauge(t, m); g != 0 {
		t.Fatalf("queue gauge %v after close", g)
	}
	if err := p.Enqueue(span(1)); !errors.Is(err, bus.ErrPublisherClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestPublisher_RejectsBadConfigAndOversizedSignals(t *testing.T) {
	e := newSignalEnv(t)
	for _, c := range []bus.PublisherConfig{
		{Principal: "a.b"},
		{Principal: "a", BatchSize: 10_001},
		{Principal: "a", DropPolicy: "maybe"},
		{Principal: "a", MaxEventBytes: 1 << 20, MaxBatchBytes: 512 << 10},
	} {
		if _, err := bus.NewPublisher(e.nc, c); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	p := e.publisher(t, bus.PublisherConfig{MaxEventBytes: 100})
	if err := p.EnqueueRecord(bus.RecordObservability, make([]byte, 101)); !errors.Is(err, bus.ErrSignalTooLarge) {
		t.Fatal(err)
	}
}

func TestPublisher_NATSUserIsBoundToItsPrincipal(t *testing.T) {
	alice, err := bus.SignalPublisherUser("alice", "alice-pw", "alice")
	if err != nil {
		t.Fatal(err)
	}
	s, err := bus.StartServer(bus.ServerConfig{Name: "auth", StoreDir: t.TempDir(), DontListen: true,
		Users: []bus.User{{Name: "admin", Password: "admin-pw"}, alice}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	admin, err := s.Connect(nats.UserInfo("admin", "admin-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	js, _ := jetstream.New(admin)
	(&signalEnv{nc: admin, js: js}).ensure(t, bus.SignalStreamConfig{})
	nc, err := s.Connect(nats.UserInfo("alice", "alice-pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	env := &signalEnv{nc: nc}
	own := env.publisher(t, bus.PublisherConfig{Principal: "alice"})
	other := env.publisher(t, bus.PublisherConfig{Principal: "bob", MaxAttempts: 2, BatchTimeout: 200 * time.Millisecond, RetryBaseDelay: 10 * time.Millisecond})
	if err := own.Enqueue(span(0)); err != nil {
		t.Fatal(err)
	}
	if err := other.Enqueue(span(1)); err != nil {
		t.Fatal(err)
	}
	drain(t, own)
	drain(t, other)
	if s := own.Stats(); s.Exported != 1 {
		t.Fatalf("own principal: %+v", s)
	}
	if s := other.Stats(); s.Exported != 0 || s.ExportFailed != 1 {
		t.Fatalf("foreign principal: %+v", s)
	}
}

func TestPublisherPool_PublishesPerPrincipalAndIsBounded(t *testing.T) {
	e := newSignalEnv(t)
	st := e.ensure(t, bus.SignalStreamConfig{})
	pool := bus.NewPublisherPool(e.nc, bus.PublisherConfig{BatchSize: 8}, 2)
	t.Cleanup(pool.Close)
	if n, err := pool.PublishSpans("alice", []*observability.SpanSignal{span(0), span(1)}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	if err := pool.PublishRecord("bob", bus.RecordWorkflowLifecycle, []byte(`{"schema_version":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.PublishSpans("carol", []*observability.SpanSignal{span(2)}); !errors.Is(err, bus.ErrTooManyPrincipals) {
		t.Fatalf("third principal: %v", err)
	}
	if _, err := pool.PublishSpans("a.b", nil); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Fatalf("bad principal: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if s := pool.Stats(); s["alice"].Exported != 2 || s["bob"].Exported != 1 {
		t.Fatalf("stats %+v", s)
	}
	info, _ := st.Info(ctx)
	if info.State.NumSubjects != 2 {
		t.Fatalf("want one subject per principal, got %d", info.State.NumSubjects)
	}
}

func TestPublisherPool_QueuedBytesAreBoundedAcrossPrincipals(t *testing.T) {
	// No stream: nothing is exported, so queued signals stay queued.
	e := newSignalEnv(t)
	pool := bus.NewPublisherPool(e.nc, bus.PublisherConfig{PoolMaxQueueBytes: 4 << 10, RetryBaseDelay: time.Minute}, 0)
	t.Cleanup(pool.Close)
	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		_, full = pool.PublishSpans("alice", []*observability.SpanSignal{span(i)})
	}
	if !errors.Is(full, bus.ErrQueueFull) {
		t.Fatalf("alice never hit the pool bound: %v", full)
	}
	// Bob's own queue is empty, but the pool's bytes are spent.
	if _, err := pool.PublishSpans("bob", []*observability.SpanSignal{span(0)}); !errors.Is(err, bus.ErrQueueFull) {
		t.Fatalf("bob past the pool bound: %v", err)
	}
	if s := pool.Stats(); s["bob"].Rejected != 1 || s["bob"].QueueEvents != 0 || s["alice"].QueueBytes > 4<<10 {
		t.Fatalf("stats %+v", s)
	}

	bad := bus.NewPublisherPool(e.nc, bus.PublisherConfig{PoolMaxQueueBytes: 5 << 30}, 0)
	t.Cleanup(bad.Close)
	if _, err := bad.Publisher("alice"); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Fatalf("pool bound above 4 GiB: %v", err)
	}
}
