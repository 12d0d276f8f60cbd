package testcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Harness defaults: small enough that a few clusters fit beside the rest of
// the test suite on a 2-core machine.
const (
	defaultMaxMemory int64 = 64 << 20
	defaultMaxStore  int64 = 512 << 20
	startAttempts          = 3
	readyTimeout           = 20 * time.Second
)

// Option configures StartNATS.
type Option func(*natsConfig)

type natsConfig struct {
	clusterName         string
	maxMemory, maxStore int64
	logger              *slog.Logger
	users               []bus.User // see WithUsers (testcluster/coord_nats.go)
}

// WithJetStreamLimits sets every node's JetStream memory and file limits.
func WithJetStreamLimits(maxMemory, maxStore int64) Option {
	return func(c *natsConfig) { c.maxMemory, c.maxStore = maxMemory, maxStore }
}

// WithClusterName sets the NATS cluster name (default "adk-test").
func WithClusterName(name string) Option { return func(c *natsConfig) { c.clusterName = name } }

// WithServerLogger routes every node's nats-server log to l (default off).
func WithServerLogger(l *slog.Logger) Option { return func(c *natsConfig) { c.logger = l } }

// NATSCluster is n embedded nats-servers in one process forming one
// JetStream cluster over loopback routes.
type NATSCluster struct {
	t       testing.TB
	cfg     natsConfig
	baseDir string // parent of every node's store dir

	mu    sync.Mutex
	nodes []*natsNode
}

// natsNode is what survives a Kill: identity, ports and the store dir.
type natsNode struct {
	name       string
	storeDir   string
	clientPort int // 0 until the first start picks one
	routePort  int
	srv        *bus.Server // nil while killed
}

// StartNATS starts n nodes (typically 3) with explicit full-mesh routes,
// and returns once a JetStream meta leader exists and AccountInfo answers
// on every node. Everything is shut down by t.Cleanup.
func StartNATS(t testing.TB, n int, opts ...Option) *NATSCluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("testcluster: StartNATS needs n >= 1, got %d", n)
	}
	cfg := natsConfig{clusterName: "adk-test", maxMemory: defaultMaxMemory, maxStore: defaultMaxStore}
	for _, o := range opts {
		o(&cfg)
	}
	// The store dirs live under one TempDir made before the shutdown is
	// registered: cleanups run last-in first-out, so every server is down
	// before its directory is removed (a running JetStream server still
	// writes there, and RemoveAll then fails with "directory not empty").
	c := &NATSCluster{t: t, cfg: cfg, baseDir: t.TempDir()}
	t.Cleanup(c.shutdownAll)

	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if lastErr = c.startAll(n); lastErr == nil {
			break
		}
		// Most likely a reserved route port was taken between reserving and
		// binding it: start over with fresh ports.
		t.Logf("testcluster: start attempt %d: %v", attempt, lastErr)
		c.shutdownAll()
	}
	if lastErr != nil {
		t.Fatalf("testcluster: start %d NATS nodes: %v", n, lastErr)
	}
	c.WaitReady(t)
	return c
}

func (c *NATSCluster) startAll(n int) error {
	ports, err := reservePorts(n)
	if err != nil {
		return err
	}
	nodes := make([]*natsNode, n)
	for i := range nodes {
		dir, err := os.MkdirTemp(c.baseDir, "n"+strconv.Itoa(i)+"-")
		if err != nil {
			return fmt.Errorf("store dir: %w", err)
		}
		nodes[i] = &natsNode{
			name:      "n" + strconv.Itoa(i),
			storeDir:  dir,
			routePort: ports[i],
		}
	}
	c.mu.Lock()
	c.nodes = nodes
	c.mu.Unlock()
	for i := range nodes {
		if err := c.startNode(i); err != nil {
			return err
		}
	}
	return nil
}

// reservePorts finds n free loopback ports by listening and closing. Another
// process may grab one before we bind it; StartNATS then retries.
func reservePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve route port: %w", err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		defer l.Close()
	}
	return ports, nil
}

func (c *NATSCluster) routes() []string {
	urls := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		urls[i] = "nats://127.0.0.1:" + strconv.Itoa(nd.routePort)
	}
	return urls
}

// startNode builds a fresh config (and so fresh server Options) for node i
// from what it keeps across restarts.
func (c *NATSCluster) startNode(i int) error {
	c.mu.Lock()
	nd := c.nodes[i]
	routes := c.routes()
	c.mu.Unlock()
	port := nd.clientPort
	if port == 0 {
		port = -1
	}
	var cluster *bus.ClusterConfig
	if len(routes) > 1 {
		// One node is a standalone server: a JetStream cluster of one
		// never elects a meta leader.
		cluster = &bus.ClusterConfig{
			Name:   c.cfg.clusterName,
			Host:   "127.0.0.1",
			Port:   nd.routePort,
			Routes: routes,
		}
	}
	srv, err := bus.StartServer(bus.ServerConfig{
		Name:      nd.name,
		StoreDir:  nd.storeDir,
		Host:      "127.0.0.1",
		Port:      port,
		MaxMemory: c.cfg.maxMemory,
		MaxStore:  c.cfg.maxStore,
		Logger:    c.cfg.logger,
		Users:     c.cfg.users,
		Cluster:   cluster,
	})
	if err != nil {
		return fmt.Errorf("node %s: %w", nd.name, err)
	}
	c.mu.Lock()
	nd.srv = srv
	nd.clientPort = srv.ClientPort()
	c.mu.Unlock()
	return nil
}

func (c *NATSCluster) shutdownAll() {
	c.mu.Lock()
	nodes := c.nodes
	c.mu.Unlock()
	for _, nd := range nodes {
		c.mu.Lock()
		srv := nd.srv
		nd.srv = nil
		c.mu.Unlock()
		if srv != nil {
			srv.Shutdown()
		}
	}
}

// Size returns the number of nodes, running or killed.
func (c *NATSCluster) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodes)
}

// Name returns node i's server name.
func (c *NATSCluster) Name(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].name
}

// Index returns the index of the node with the given server name, or -1.
func (c *NATSCluster) Index(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, nd := range c.nodes {
		if nd.name == name {
			return i
		}
	}
	return -1
}

// Server returns node i's server, or nil while it is killed.
func (c *NATSCluster) Server(i int) *bus.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv
}

// URLs returns every node's client URL, killed nodes included (their port
// is kept for Restart), so a client given all of them reconnects across
// kills.
func (c *NATSCluster) URLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	urls := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		urls[i] = "nats://127.0.0.1:" + strconv.Itoa(nd.clientPort)
	}
	return urls
}

// Connect opens a client connection to node i alone, closed by t.Cleanup.
// Its async errors are logged to t.
func (c *NATSCluster) Connect(t testing.TB, i int, opts ...bus.Option) *nats.Conn {
	t.Helper()
	return c.connect(t, c.URLs()[i], opts...)
}

// ConnectAll opens a client connection that knows every node's URL.
func (c *NATSCluster) ConnectAll(t testing.TB, opts ...bus.Option) *nats.Conn {
	t.Helper()
	return c.connect(t, strings.Join(c.URLs(), ","), opts...)
}

func (c *NATSCluster) connect(t testing.TB, url string, opts ...bus.Option) *nats.Conn {
	t.Helper()
	w := &testLogWriter{t: t}
	base := []bus.Option{
		bus.WithName("testcluster-" + t.Name()),
		bus.WithLogger(slog.New(slog.NewTextHandler(w, nil))),
	}
	nc, err := bus.Connect(url, append(base, opts...)...)
	if err != nil {
		t.Fatalf("testcluster: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	t.Cleanup(w.stop) // runs before Close: t.Log after a test ends panics
	return nc
}

// Kill shuts node i down, keeping its name, ports and store dir.
func (c *NATSCluster) Kill(i int) {
	c.mu.Lock()
	srv := c.nodes[i].srv
	c.nodes[i].srv = nil
	c.mu.Unlock()
	if srv == nil {
		c.t.Fatalf("testcluster: Kill(%d): node is not running", i)
	}
	srv.Shutdown()
}

// Restart starts a killed node again with the same server name, store dir
// and ports, and waits until it is a current member of the JetStream meta
// group and answers AccountInfo.
func (c *NATSCluster) Restart(i int) {
	c.t.Helper()
	if c.Server(i) != nil {
		c.t.Fatalf("testcluster: Restart(%d): node is running", i)
	}
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = c.startNode(i); err == nil {
			break
		}
		c.t.Logf("testcluster: restart %d attempt %d: %v", i, attempt, err)
	}
	if err != nil {
		c.t.Fatalf("testcluster: Restart(%d): %v", i, err)
	}
	c.waitNodeReady(c.t, i, readyTimeout)
}

// WaitReady waits until a meta leader exists, and every running node is
// current and answers AccountInfo.
func (c *NATSCluster) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	waitUntil(t, deadline, "a JetStream meta leader", func() bool {
		if c.Size() == 1 {
			return true // standalone: no meta group
		}
		for i := range c.Size() {
			if s := c.Server(i); s != nil && s.NATS().JetStreamIsLeader() {
				return true
			}
		}
		return false
	})
	for i := range c.Size() {
		if c.Server(i) != nil {
			c.waitNodeReady(t, i, time.Until(deadline))
		}
	}
}

func (c *NATSCluster) waitNodeReady(t testing.TB, i int, timeout time.Duration) {
	t.Helper()
	s := c.Server(i)
	deadline := time.Now().Add(timeout)
	waitUntil(t, deadline, s.Name()+" routed and JetStream-current", func() bool {
		return s.NATS().NumRoutes() > 0 || c.Size() == 1
	})
	waitUntil(t, deadline, s.Name()+" JetStream-current", s.NATS().JetStreamIsCurrent)

	nc, err := s.Connect(c.cfg.adminOptions()...)
	if err != nil {
		t.Fatalf("testcluster: connect to %s: %v", s.Name(), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("testcluster: jetstream on %s: %v", s.Name(), err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := bus.WaitJetStreamReady(ctx, js); err != nil {
		t.Fatalf("testcluster: %s: %v", s.Name(), err)
	}
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t testing.TB, deadline time.Time, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, time.Until(deadline), what, cond)
}

// testLogWriter sends client log lines to t.Log until stopped.
type testLogWriter struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

var _ io.Writer = (*testLogWriter)(nil)
