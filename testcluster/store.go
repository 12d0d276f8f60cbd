package testcluster

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/nats-io/nats.go"
)

// StoreNodeConfig configures a test store node.
type StoreNodeConfig struct {
	// Options bound the node's trace store.
	Options tracestore.Options
	// Tokens, when set, makes the node serve adk.trace.v1.query
	// (bearer token → principal); nil runs an ingest-only node.
	Tokens map[string]string
	// NATS is the index of the NATS node to connect to; -1 connects to
	// all of them.
	NATS int
}

// StoreNode is a trace store node (Badger in a temp dir, durable consumer,
// optional query service) that a test can kill and restart with the same
// data directory.
type StoreNode struct {
	t    testing.TB
	c    *NATSCluster
	name string
	dir  string
	cfg  StoreNodeConfig

	mu    sync.Mutex
	nc    *nats.Conn
	store *tracestore.Store
	node  *tracenode.Node
}

// StartStoreNode starts a store node named name. ADK_SIGNALS must exist.
// It is stopped by t.Cleanup.
func (c *NATSCluster) StartStoreNode(t testing.TB, name string, cfg StoreNodeConfig) *StoreNode {
	t.Helper()
	s := &StoreNode{t: t, c: c, name: name, dir: t.TempDir(), cfg: cfg}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *StoreNode) start() {
	s.t.Helper()
	url := strings.Join(s.c.URLs(), ",")
	if s.cfg.NATS >= 0 {
		url = s.c.URLs()[s.cfg.NATS]
	}
	nc, err := bus.Connect(url, bus.WithName("store-"+s.name))
	if err != nil {
		s.t.Fatalf("testcluster: store node %s: connect: %v", s.name, err)
	}
	st, err := tracestore.Open(tracestore.Config{Dir: s.dir, Small: true, Options: s.cfg.Options})
	if err != nil {
		nc.Close()
		s.t.Fatalf("testcluster: store node %s: open: %v", s.name, err)
	}
	var auth tracenode.Authenticator
	if s.cfg.Tokens != nil {
		auth = tracenode.NewTokens(s.cfg.Tokens)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := tracenode.Start(ctx, tracenode.Config{Name: s.name, Conn: nc, Store: st, Auth: auth})
	if err != nil {
		_ = st.Close()
		nc.Close()
		s.t.Fatalf("testcluster: store node %s: start: %v", s.name, err)
	}
	s.mu.Lock()
	s.nc, s.store, s.node = nc, st, n
	s.mu.Unlock()
}

func (s *StoreNode) stop() {
	s.mu.Lock()
	nc, st, n := s.nc, s.store, s.node
	s.nc, s.store, s.node = nil, nil, nil
	s.mu.Unlock()
	if n == nil {
		return
	}
	n.Stop()
	_ = st.Close()
	nc.Close()
}

// Kill stops the node abruptly from the stream's point of view: its
// consumer stops acknowledging mid-ingest, its store is closed, its
// connection dropped. The data directory is kept.
func (s *StoreNode) Kill() {
	if s.Node() == nil {
		s.t.Fatalf("testcluster: Kill store node %s: not running", s.name)
	}
	s.stop()
}

// Restart starts a killed node again on the same data directory.
func (s *StoreNode) Restart() {
	s.t.Helper()
	if s.Node() != nil {
		s.t.Fatalf("testcluster: Restart store node %s: running", s.name)
	}
	s.start()
}

// Store returns the running node's store (nil while killed).
func (s *StoreNode) Store() *tracestore.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store
}

// Node returns the running node (nil while killed).
func (s *StoreNode) Node() *tracenode.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// WaitApplied waits until the node has applied seq.
func (s *StoreNode) WaitApplied(t testing.TB, seq uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	waitUntil(t, deadline, "store node "+s.name+" to apply the stream", func() bool {
		st := s.Store()
		return st != nil && st.AppliedSeq() >= seq
	})
}
