package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/store/otlpreceiver"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// otlpServer is serve's OTLP/HTTP listener: POST /v1/traces (the
// receiver, publishing through its own per-principal publisher pool) and
// GET /metrics (the bus counters of that pool and the receiver's).
type otlpServer struct {
	addr  string
	srv   *http.Server
	pool  *bus.PublisherPool
	watch *signalWatch // warns on log while spans the receiver took are lost
	done  chan error
}

// startOTLP listens on addr and serves until stop; lost signals are
// logged at most once per warnEvery.
func startOTLP(nc *nats.Conn, auth otlpreceiver.Authenticator, addr string, log *slog.Logger, warnEvery time.Duration) (*otlpServer, error) {
	if auth == nil {
		return nil, usageError{errors.New("--otlp-addr needs --tokens (the receiver authenticates bearer tokens)")}
	}
	metrics, err := observability.NewMetrics(observability.MetricsConfig{})
	if err != nil {
		return nil, err
	}
	pool := bus.NewPublisherPool(nc, otlpreceiver.PublisherConfig(metrics), 0)
	recv, err := otlpreceiver.New(otlpreceiver.Config{Auth: auth, Publisher: pool})
	if err != nil {
		pool.Close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(recv.Collector()); err != nil {
		pool.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(otlpreceiver.TracesPath, recv)
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{metrics.Gatherer(), reg}, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("otlp listen: %w", err)
	}
	s := &otlpServer{
		addr:  ln.Addr().String(),
		srv:   &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10},
		pool:  pool,
		watch: newSignalWatch(log, warnEvery, "adk serve otlp receiver", pool.Stats, nc.IsConnected),
		done:  make(chan error, 1),
	}
	s.watch.start(signalWarnCheck)
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// stop shuts the listener down, then drains (bounded) and closes the pool.
func (s *otlpServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close() // connections still busy after the grace period
	}
	<-s.done
	s.watch.stop()
	_ = s.pool.Drain(ctx)
	s.pool.Close()
}
