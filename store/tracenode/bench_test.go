package tracenode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type benchEnv struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	store *tracestore.Store
	node  *tracenode.Node
	dir   string
}

func newBenchEnv(b *testing.B, withNode bool) (*benchEnv, func()) {
	b.Helper()
	srv, err := bus.StartServer(bus.ServerConfig{Name: "bench", StoreDir: b.TempDir(), DontListen: true, MaxStore: 8 << 30})
	if err != nil {
		b.Fatal(err)
	}
	nc, err := srv.Connect()
	if err != nil {
		b.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bus.EnsureSignalStream(ctx, js, bus.SignalStreamConfig{MaxBytes: 4 << 30, MaxMsgs: 10_000_000}); err != nil {
		b.Fatal(err)
	}
	env := &benchEnv{nc: nc, js: js, dir: b.TempDir()}
	if withNode {
		env.store, err = tracestore.Open(tracestore.Config{Dir: env.dir, Options: tracestore.Options{
			MaxEvents: tracestore.MaxEventsLimit, MaxEventsPerPrincipal: tracestore.MaxEventsLimit,
			MaxBytes: tracestore.MaxBytesLimit, MaxBytesPerPrincipal: tracestore.MaxBytesLimit, Retention: tracestore.MaxRetention}})
		if err != nil {
			b.Fatal(err)
		}
		env.node, err = tracenode.Start(ctx, tracenode.Config{Name: "bench", Conn: nc, Store: env.store,
			Auth: tracenode.NewTokens(map[string]string{"tok": "alice"}), FetchBatch: 64})
		if err != nil {
			b.Fatal(err)
		}
	}
	return env, func() {
		if env.node != nil {
			env.node.Stop()
			_ = env.store.Close()
		}
		nc.Close()
		srv.Shutdown()
	}
}

func benchSpan(i int) *observability.SpanSignal {
	d := int64(500)
	return &observability.SpanSignal{
		Schema: 2, Signal: "span", Phase: "end", Name: "gen_ai.chat", Kind: "client",
		TraceID: fmt.Sprintf("%032x", i/8+1), SpanID: fmt.Sprintf("%016x", i+1), TraceFlags: 1,
		StartTimeUnixNano: int64(i) * 1000, EndTimeUnixNano: int64(i)*1000 + d, DurationNano: &d, Status: "ok",
		Attributes: observability.Attributes{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
			"gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": int64(120), "gen_ai.usage.output_tokens": int64(40),
			"run_id": "run-" + strconv.Itoa(i/64)},
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func diskUsage(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

const benchBatch = 256

// BenchmarkIngestEndToEnd publishes b.N spans through the Publisher into
// ADK_SIGNALS, a store node applies them to Badger, and the benchmark
// reports spans/s until all are queryable, the p99 visibility lag
// (enqueue → applied, sampled every 256 spans), CPU µs and disk bytes per
// stored span, and the raw JetStream publish+consume rate of the same
// message bytes on the same server as the ceiling.
func BenchmarkIngestEndToEnd(b *testing.B) {
	env, stop := newBenchEnv(b, true)
	defer stop()
	pub, err := bus.NewPublisher(env.nc, bus.PublisherConfig{Principal: "alice", BatchSize: benchBatch, MaxInflightBatches: 8, MaxQueueEvents: 200_000, MaxQueueBytes: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()

	n := max(b.N, 10_000)                    // below this fixed costs dominate; spans/s is the figure, not ns/op
	samples := make([]int64, n/benchBatch+1) // enqueue time (ns) of every 256th span
	lags := make([]time.Duration, 0, len(samples))
	var done atomic.Bool
	watch := make(chan struct{})
	go func() { // polls the store: when accepted passes a sampled span, record its lag
		defer close(watch)
		next := 0
		for !done.Load() || next < len(samples) {
			acc := int(env.store.Status().Counters.Accepted)
			now := time.Now().UnixNano()
			for next < len(samples) && next*benchBatch < acc {
				if t0 := atomic.LoadInt64(&samples[next]); t0 > 0 {
					lags = append(lags, time.Duration(now-t0))
				}
				next++
			}
			if next >= len(samples) || acc >= n {
				if acc >= n {
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	cpu0 := cpuTime()
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < n; i++ {
		if i%benchBatch == 0 {
			atomic.StoreInt64(&samples[i/benchBatch], time.Now().UnixNano())
		}
		for {
			err := pub.Enqueue(benchSpan(i))
			if err == nil {
				break
			}
			if !errors.Is(err, bus.ErrQueueFull) {
				b.Fatal(err)
			}
			time.Sleep(100 * time.Microsecond) // back-pressure
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := pub.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	for env.store.Status().Counters.Accepted < uint64(n) {
		if ctx.Err() != nil {
			b.Fatalf("store accepted %d of %d", env.store.Status().Counters.Accepted, n)
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	done.Store(true)
	<-watch
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	rate := float64(n) / elapsed.Seconds()
	b.ReportMetric(rate, "spans/s")
	if len(lags) > 0 {
		b.ReportMetric(float64(lags[len(lags)*99/100].Milliseconds()), "p99-lag-ms")
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/span")
	b.ReportMetric(float64(diskUsage(env.dir))/float64(n), "disk-B/span")
	st := env.node.Stats()
	b.Logf("node: prepare %v, apply %v of %v wall", st.PrepareTime, st.ApplyTime, elapsed)

	// The ceiling: the same message bytes, raw JetStream publish+consume.
	ceiling := rawCeiling(b, env, n)
	b.ReportMetric(ceiling, "ceiling-spans/s")
	b.ReportMetric(100*rate/ceiling, "%-of-ceiling")
}

// rawCeiling publishes the same batch messages to a plain stream with
// async acks while a pull consumer acks them, and returns spans/s.
func rawCeiling(b *testing.B, env *benchEnv, n int) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: jetstream.FileStorage, MaxBytes: 4 << 30})
	if err != nil {
		b.Fatal(err)
	}
	sig, _ := env.js.Stream(ctx, bus.SignalStreamName)
	msgs := make([][]byte, 0, n/benchBatch+1)
	for seq := uint64(1); len(msgs) < cap(msgs); seq++ {
		m, err := sig.GetMsg(ctx, seq)
		if err != nil {
			break
		}
		msgs = append(msgs, m.Data)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1024})
	if err != nil {
		b.Fatal(err)
	}
	var got atomic.Int64
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		got.Add(1)
	}, jetstream.PullMaxMessages(64))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	pjs, _ := jetstream.New(env.nc, jetstream.WithPublishAsyncMaxPending(8))
	start := time.Now()
	for _, m := range msgs {
		if _, err := pjs.PublishAsync("raw.x", m); err != nil {
			b.Fatal(err)
		}
	}
	<-pjs.PublishAsyncComplete()
	for got.Load() < int64(len(msgs)) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	return float64(len(msgs)*benchBatch) / time.Since(start).Seconds()
}

// BenchmarkPageQueryNATS: a 100-event page of one run at 10k stored
// events, through adk.trace.v1.query.
func BenchmarkPageQueryNATS(b *testing.B) {
	env, stop := newBenchEnv(b, true)
	defer stop()
	const n = 10_000
	recs := make([]tracestore.Record, 0, benchBatch)
	for i := 0; i < n; i++ {
		data, _ := jsonOf(benchSpan(i))
		recs = append(recs, tracestore.Record{Kind: tracestore.KindObservability, Data: data})
		if len(recs) == benchBatch || i == n-1 {
			if _, err := env.store.Apply(tracestore.Batch{Seq: env.store.AppliedSeq() + 1, TimeMS: 1, Principal: "alice", Records: recs}); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := tracenode.Query(ctx, env.nc, tracenode.QueryRequest{Token: "tok", Selector: map[string]string{"run_id": "run-" + strconv.Itoa(i%(n/64))}, Limit: 100})
		lat = append(lat, time.Since(t0))
		if err != nil || len(r.Page.Events) == 0 {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }
