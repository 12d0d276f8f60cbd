package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fadcedab/adk/bus"
)

// readyTimeout bounds the wait for JetStream and for creating a stream; a
// loaded CI machine needs seconds, never this long.
const readyTimeout = 30 * time.Second

// Server is a JetStream NATS server for one test with a connection to it.
// The test's cleanup closes the connection, then shuts the server down.
type Server struct {
	*bus.Server
	// NC is a connection for the test; JS is JetStream over it.
	NC *nats.Conn
	JS jetstream.JetStream
}

// Start runs an embedded nats-server with JetStream and waits until
// JetStream answers. cfg's zero Name and StoreDir are filled in (the store
// in t's temp dir). A zero Port serves in-process connections only, with
// no socket; Port -1 listens on a free 127.0.0.1 port (ClientURL), for
// tests that start other processes.
func Start(t testing.TB, cfg bus.ServerConfig) *Server {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	if cfg.StoreDir == "" {
		cfg.StoreDir = t.TempDir()
	}
	cfg.DontListen = cfg.Port == 0
	srv, err := bus.StartServer(cfg)
	if err != nil {
		t.Fatalf("bustest: start NATS: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatalf("bustest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("bustest: jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := bus.WaitJetStreamReady(ctx, js); err != nil {
		t.Fatalf("bustest: %v", err)
	}
	return &Server{Server: srv, NC: nc, JS: js}
}

// SignalStream creates the ADK_SIGNALS stream with cfg's bounds (zero
// fields take bus's defaults).
func (s *Server) SignalStream(t testing.TB, cfg bus.SignalStreamConfig) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	st, err := bus.EnsureSignalStream(ctx, s.JS, cfg)
	if err != nil {
		t.Fatalf("bustest: signal stream: %v", err)
	}
	return st
}
