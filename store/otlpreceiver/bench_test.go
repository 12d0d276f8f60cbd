package otlpreceiver_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/store/otlpreceiver"
	"github.com/fadcedab/adk/store/tracenode"
)

// BenchmarkOTLPReceiver: protobuf requests of 512 spans through the
// handler (decode, map, enqueue) into a PublisherPool with the receiver's
// PublisherConfig (what adk serve runs), publishing to ADK_SIGNALS on an
// embedded JetStream, drained at the end. No store node: it measures the
// receiver and the bus, not Badger.
func BenchmarkOTLPReceiver(b *testing.B) {
	const spansPerRequest = 512
	srv := bustest.Start(b, bus.ServerConfig{})
	srv.SignalStream(b, bus.SignalStreamConfig{MaxBytes: 1 << 30, MaxMsgs: 10_000_000})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // bounds the drains
	defer cancel()
	pool := bus.NewPublisherPool(srv.NC, otlpreceiver.PublisherConfig(nil), 0)
	defer pool.Close()
	recv, err := otlpreceiver.New(otlpreceiver.Config{Auth: tracenode.NewTokens(map[string]string{tokAlice: "alice"}), Publisher: pool})
	if err != nil {
		b.Fatal(err)
	}
	body := marshal(b, makeTraces(traceID16(7), spansPerRequest), false)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for {
			req := httptest.NewRequest(http.MethodPost, otlpreceiver.TracesPath, bytes.NewReader(body))
			req.Header.Set("Content-Type", otlpreceiver.ContentTypeProtobuf)
			req.Header.Set("Authorization", "Bearer "+tokAlice)
			rec := httptest.NewRecorder()
			recv.ServeHTTP(rec, req)
			if rec.Code == http.StatusOK {
				break
			}
			if rec.Code != http.StatusServiceUnavailable {
				b.Fatalf("status %d", rec.Code)
			}
			if err := pool.Drain(ctx); err != nil { // back-pressure: wait, then retry like a client
				b.Fatal(err)
			}
		}
	}
	if err := pool.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*spansPerRequest)/time.Since(start).Seconds(), "spans/s")
	if s := recv.Stats(); s.SpansAccepted != uint64(b.N*spansPerRequest) {
		b.Fatalf("accepted %d", s.SpansAccepted)
	}
}
