package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/settings"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/fadcedab/adk/store/otlpreceiver"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// serveOptions configure `adk serve`.
type serveOptions struct {
	dataDir    string
	host       string
	port       int
	tokensFile string
	// eval: the embedded coordinator and worker (serve_eval.go).
	eval serveEvalOptions
	// otlpAddr, when set, serves the OTLP/HTTP receiver and /metrics.
	otlpAddr string
	// otlpListening, when set, receives the OTLP listener's address
	// (tests).
	otlpListening func(addr string)
	// ready, when set, receives the client URL once everything is up
	// (tests).
	ready func(url string)
	// set binds --config and the settings flags; file is what they
	// resolve to.
	set  *settings.Flags
	file settings.File
	// api is the developer HTTP API (--http-addr, off when empty); ops
	// is --metrics-addr.
	api apiFlags
	ops opsFlags
	// apiListening, when set, receives the API's base URL (tests).
	apiListening func(url string)
}

// serveSettingsKeys are the settings `adk serve` has flags for.
var serveSettingsKeys = []string{"log.level", "log.format", "coordinator.max_running_jobs", "coordinator.max_queued_jobs",
	"coordinator.task_timeout", "coordinator.job_timeout", "coordinator.result_tails", "serve.worker_capacity",
	"store.max_events", "store.max_bytes", "store.retention", "store.content_policy"}

// resolve merges the settings under the flags: serve's own flags fill from
// the file's serve section, the embedded worker's agents from
// worker.agents, unless given on the command line.
func (o *serveOptions) resolve(changed func(string) bool) error {
	f, err := o.set.Resolve()
	if err != nil {
		return settingsError(err)
	}
	o.file = f
	if !changed("data-dir") && f.Serve.DataDir != "" {
		o.dataDir = f.Serve.DataDir
	}
	if !changed("host") {
		o.host = f.Serve.Host
	}
	if !changed("port") {
		o.port = f.Serve.Port
	}
	if !changed("raft-addr") {
		o.eval.raftAddr = f.Serve.RaftAddr
	}
	o.eval.capacity = f.Serve.WorkerCapacity
	o.api.load(f.Serve.HTTPAPI, f.Serve.Listen)
	o.ops.load(f.Serve.Listen)
	if len(o.eval.agents) == 0 {
		o.eval.agentFiles = f.Worker.Agents
	}
	return nil
}

// DefaultStoreNodeMemoryLimit is the Go runtime's soft memory limit
// (debug.SetMemoryLimit) of adk serve and adk store unless GOMEMLIMIT is
// set: a store node is sized to run in 512 MiB (store/DESIGN.md, "A
// store node in 512 MiB"). The Go heap (NATS, JetStream's buffers,
// Badger's memtables, the order index, the receiver's queues) gets this
// much; the rest of the 512 MiB is mapped Badger files and the runtime.
// Without a limit the collector lets the heap reach twice what is live.
const DefaultStoreNodeMemoryLimit = 384 << 20

// setStoreNodeMemoryLimit applies DefaultStoreNodeMemoryLimit unless the
// operator set GOMEMLIMIT (which the runtime has already applied).
func setStoreNodeMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(DefaultStoreNodeMemoryLimit)
	}
}

func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run NATS with JetStream, a trace store node, the trace query service, an eval coordinator and a worker in one process",
		Long: `serve runs, in one process with one data directory: an embedded NATS server
with JetStream (the ADK_SIGNALS stream), a trace store node that applies the
stream to Badger, and the adk.trace.v1.query service. Queries are
authenticated by the bearer tokens of --tokens (lines "<sha256-hex> <principal>").
It also runs a one-node Raft eval coordinator (the adk.coord.v1 service)
and, with --agent NAME=AGENT.json, one worker trusted with those agents, so
adk eval run --nats nats://HOST:PORT --agent NAME runs jobs on it.

--config FILE reads the settings file (adk config defaults prints every
key): job admission and timeouts ("coordinator"), the trace store's limits
and content policy ("store"), the ADK_SIGNALS stream ("signals"), the
embedded worker's agents ("worker.agents"), "serve" and "log". Flags win
over the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.resolve(cmd.Flags().Changed); err != nil {
				return err
			}
			if o.dataDir == "" {
				return usageError{errors.New("--data-dir is required")}
			}
			if o.otlpAddr != "" && o.tokensFile == "" {
				return usageError{errors.New("--otlp-addr needs --tokens")}
			}
			stopProfile, err := startCPUProfile(envServeCPUProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			setStoreNodeMemoryLimit()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runServe(ctx, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.dataDir, "data-dir", "", "directory for NATS and trace store data (required)")
	cmd.Flags().StringVar(&o.host, "host", "127.0.0.1", "NATS client listen address")
	cmd.Flags().IntVar(&o.port, "port", 4222, "NATS client port (-1 picks a free one)")
	cmd.Flags().StringVar(&o.tokensFile, "tokens", "", "bearer tokens file for the query service (without it no queries are served)")
	o.eval.register(cmd.Flags())
	o.set = settings.Bind(cmd.Flags(), serveSettingsKeys...)
	o.api.register(cmd.Flags(), "", "developer HTTP API and web UI listen address, e.g. 127.0.0.1:8080 (off by default; needs --tokens; a non-loopback address needs --tls-cert/--tls-key or --insecure-listen)")
	o.ops.register(cmd.Flags())
	o.api.link(o.set, serveHTTPAPI, serveListen)
	o.ops.link(o.set, serveListen)
	cmd.Flags().StringVar(&o.otlpAddr, "otlp-addr", "", "OTLP/HTTP listen address for POST /v1/traces and GET /metrics, e.g. 127.0.0.1:4318 (off by default; needs --tokens)")
	return cmd
}

// envServeCPUProfile names the file `adk serve` writes a CPU profile of
// its whole run to, for the benchmark driver (go run ./bench/otlpbench
// -cpuprofile FILE); envCoordinatorCPUProfile and envWorkerCPUProfile do
// the same for `adk coordinator` and `adk worker` (go run ./bench/fleetbench
// -profile DIR). They are for developers and are not in the help.
const (
	envServeCPUProfile       = "ADK_SERVE_CPUPROFILE"
	envCoordinatorCPUProfile = "ADK_COORDINATOR_CPUPROFILE"
	envWorkerCPUProfile      = "ADK_WORKER_CPUPROFILE"
)

// startCPUProfile starts the CPU profile the environment variable env
// asks for and returns the function that writes and closes it.
func startCPUProfile(env string) (stop func(), err error) {
	path := os.Getenv(env)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, &cliError{Code: codeProfileFailed, Reason: env, Err: err}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, &cliError{Code: codeProfileFailed, Reason: env, Err: err}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// envCoordinatorHeapProfile and envWorkerHeapProfile name the file `adk
// coordinator` and `adk worker` write a heap profile to: the process's heap
// at its peak (rewritten whenever heap in use grows 10% past the last one
// written, checked every 250 ms) and once more at exit if that is larger,
// for the benchmark driver (go run ./bench/fleetbench -profile DIR). The
// peak, not the end: what a bounded-memory goal needs is what was live
// when the heap was largest. For developers; not in the help.
const (
	envCoordinatorHeapProfile = "ADK_COORDINATOR_HEAPPROFILE"
	envWorkerHeapProfile      = "ADK_WORKER_HEAPPROFILE"
)

// startNodeProfiles starts the CPU profile cpuEnv asks for and the
// peak-heap profile heapEnv asks for (either may be unset) and returns
// the function that stops both and writes the files: the one
// implementation `adk coordinator` and `adk worker` share.
func startNodeProfiles(cpuEnv, heapEnv string) (stop func(), err error) {
	stopCPU, err := startCPUProfile(cpuEnv)
	if err != nil {
		return nil, err
	}
	stopHeap, err := startPeakHeapProfile(heapEnv)
	if err != nil {
		stopCPU()
		return nil, err
	}
	return func() { stopHeap(); stopCPU() }, nil
}

// startPeakHeapProfile watches heap in use and writes a heap profile to
// the file env names at each new peak (10% past the last one written);
// stop ends the watcher and writes a final one if the heap then is a new
// peak. Without env it is a no-op.
func startPeakHeapProfile(env string) (stop func(), err error) {
	path := os.Getenv(env)
	if path == "" {
		return func() {}, nil
	}
	// Created now so that a bad path is refused at start, not at the peak.
	f, err := os.Create(path)
	if err != nil {
		return nil, &cliError{Code: codeProfileFailed, Reason: env, Err: err}
	}
	_ = f.Close()
	var written uint64 // heap in use at the last profile written
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	check := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		inUse := sample[0].Value.Uint64()
		if inUse < written+written/10 {
			return
		}
		written = inUse
		// Written to a temporary file and renamed, so that a reader never
		// sees half a profile; errors are dropped: a profile is a
		// developer aid, it must not stop the node.
		tmp := path + ".tmp"
		if f, err := os.Create(tmp); err == nil {
			werr := pprof.Lookup("heap").WriteTo(f, 0)
			if cerr := f.Close(); werr == nil && cerr == nil {
				_ = os.Rename(tmp, path)
			}
		}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				check()
				return
			case <-t.C:
				check()
			}
		}
	}()
	return func() { close(done); <-stopped }, nil
}

// errDataDirHeld is lockDataDir's error when another process holds dir.
var errDataDirHeld = errors.New("data dir held by another process")

// runServe runs until ctx ends, then shuts everything down in reverse
// order: query service and store node, store, connection, server.
func runServe(ctx context.Context, o serveOptions, stdout io.Writer) error {
	if o.set == nil { // called without flags (tests): the defaults
		o.file = settings.Defaults()
	}
	var (
		auth   tracenode.Authenticator
		tokens *tracenode.Tokens
	)
	if o.tokensFile != "" {
		t, err := loadTokens(o.tokensFile)
		if err != nil {
			return err
		}
		auth, tokens = t, t
	}
	if o.api.httpAddr != "" {
		if tokens == nil {
			return usageError{errors.New("--http-addr needs --tokens (the API authenticates bearer tokens)")}
		}
		if err := devapi.CheckListen(o.api.config("http-addr", o.api.httpAddr)); err != nil {
			return &cliError{Code: codeInvalidListen, Reason: "http-addr", Detail: err.Error(), Err: err}
		}
	}
	if o.ops.metricsAddr != "" {
		if err := devapi.CheckListen(o.api.config("metrics-addr", o.ops.metricsAddr)); err != nil {
			return &cliError{Code: codeInvalidListen, Reason: "metrics-addr", Detail: err.Error(), Err: err}
		}
	}
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	unlock, err := lockDataDir(o.dataDir)
	if errors.Is(err, errDataDirHeld) {
		return coordinatorStartError(&evalrecord.Error{Code: evalstore.CodeAlreadyOwned,
			Detail: o.dataDir + " is held by another adk serve; one owner per data directory"})
	}
	if err != nil {
		return err
	}
	defer unlock()
	srv, err := bus.StartServer(bus.ServerConfig{Name: "adk", StoreDir: filepath.Join(o.dataDir, "nats"), Host: o.host, Port: o.port})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	nc, err := srv.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := bus.WaitJetStreamReady(sctx, js); err != nil {
		return err
	}
	if _, err := bus.EnsureSignalStream(sctx, js, o.file.Signals.StreamConfig()); err != nil {
		return err
	}
	log := o.file.Log.Logger(os.Stderr)
	if o.otlpAddr != "" {
		otlp, err := startOTLP(nc, auth, o.otlpAddr, log, o.file.Log.SignalWarnInterval.D())
		if err != nil {
			return err
		}
		defer otlp.stop()
		fmt.Fprintf(stdout, "adk serve: otlp http://%s%s, metrics http://%s/metrics\n", otlp.addr, otlpreceiver.TracesPath, otlp.addr)
		if o.otlpListening != nil {
			o.otlpListening(otlp.addr)
		}
	}
	fmt.Fprintf(stdout, "adk serve: nats %s, data %s, queries %s\n", srv.ClientURL(), o.dataDir, map[bool]string{true: "on", false: "off (no --tokens)"}[auth != nil])
	o.eval.warnEvery = o.file.Log.SignalWarnInterval.D()
	ev, err := startServeEval(srv, o.dataDir, o.eval, o.file.Coordinator, stdout, log)
	if err != nil {
		return err
	}
	defer ev.stop()
	reg := devapi.NewRegistry()
	register(reg, coordinatorCollectors(ev.coord))
	if ev.worker != nil {
		register(reg, workerCollectors(ev.worker))
	}
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	var startErr error
	err = runStoreNode(ctx, nc, filepath.Join(o.dataDir, "traces"), "local", auth, o.file.Store.Options(), log, o.file.Log.SignalWarnInterval.D(), func(node *tracenode.Node) bool {
		register(reg, storeCollectors(node))
		ready := func(ctx context.Context) error {
			if err := ev.coord.Ready(); err != nil {
				return err
			}
			return node.Ready(ctx)
		}
		if o.api.httpAddr != "" {
			a, err := startHTTPAPI(&o.api, tokens, client.New(ev.apiConn, 0), nc, reg, ready, ev.agents, log)
			if err != nil {
				startErr = err
				return false
			}
			stops = append(stops, a.stop)
			fmt.Fprintf(stdout, "adk serve: api %s/dev/v1/ (ui %s/)\n", a.ln.URL(), a.ln.URL())
			if o.apiListening != nil {
				o.apiListening(a.ln.URL())
			}
		}
		stopOps, err := o.ops.start(&o.api.listenFlags, reg, ready, stdout, "adk serve")
		if err != nil {
			startErr = err
			return false
		}
		stops = append(stops, stopOps)
		if o.ready != nil {
			o.ready(srv.ClientURL())
		}
		return true
	})
	if startErr != nil {
		return startErr
	}
	return err
}

// runStoreNode runs a trace store node on nc until ctx ends: the store in
// dir, lifecycle receivers publishing through a per-principal publisher
// pool (lost signals logged at most once per warnEvery), the durable
// consumer and (with auth) the query service.
func runStoreNode(ctx context.Context, nc *nats.Conn, dir, name string, auth tracenode.Authenticator,
	opts tracestore.Options, log *slog.Logger, warnEvery time.Duration, ready func(*tracenode.Node) bool) error {
	pool := bus.NewPublisherPool(nc, bus.PublisherConfig{}, 0)
	defer pool.Close()
	watch := newSignalWatch(log, warnEvery, "adk store "+name+" lifecycle", pool.Stats, nc.IsConnected)
	watch.start(signalWarnCheck)
	defer watch.stop()
	st, err := tracestore.Open(tracestore.Config{Dir: dir, Options: opts, LifecycleSink: func(principal string, data []byte) error {
		return pool.PublishRecord(principal, bus.RecordWorkflowLifecycle, data)
	}})
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	node, err := tracenode.Start(sctx, tracenode.Config{Name: name, Conn: nc, Store: st, Auth: auth, Logger: log})
	if err != nil {
		return err
	}
	defer node.Stop()
	if ready != nil && !ready(node) {
		return nil
	}
	<-ctx.Done()
	return nil
}

// storeOptions configure `adk store`.
type storeOptions struct {
	nats                      natsFlags
	dataDir, name, tokensFile string
	set                       *settings.Flags
	ops                       opsFlags
	listen                    listenFlags
}

func newStoreCmd() *cobra.Command {
	var o storeOptions
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Run a trace store node (and the query service) against an external NATS cluster",
		Long: `store consumes ADK_SIGNALS with its own durable consumer into a Badger trace
store in --data-dir, and with --tokens serves adk.trace.v1.query in the
queue group every store node joins. The stream must exist when the node
starts: adk serve creates it, and on an external NATS server the
coordinator leader does, with the settings file's "signals" section.

--config FILE reads the settings file (adk config defaults prints every
key): its "store" section holds "name", "nats", "data_dir" and the trace
store's limits, retention and content policy, "log" the log level and
format. Flags win over the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := o.set.Resolve()
			if err != nil {
				return settingsError(err)
			}
			changed := cmd.Flags().Changed
			if !changed("data-dir") && f.Store.DataDir != "" {
				o.dataDir = f.Store.DataDir
			}
			if !changed("name") && f.Store.Name != "" {
				o.name = f.Store.Name
			}
			if !o.nats.changed(cmd.Flags()) && f.Store.NATS != "" {
				o.nats.url = f.Store.NATS
			}
			o.ops.load(f.Store.Listen)
			o.listen.load(f.Store.Listen)
			if o.dataDir == "" {
				return usageError{errors.New("--data-dir is required")}
			}
			if err := bus.ValidToken(o.name); err != nil {
				return usageError{fmt.Errorf("--name: %w", err)}
			}
			var auth tracenode.Authenticator
			if o.tokensFile != "" {
				t, err := tracenode.LoadTokens(o.tokensFile)
				if err != nil {
					return err
				}
				auth = t
			}
			nc, err := o.nats.connect("adk-store-" + o.name)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "adk store: node %s, data %s, queries %s\n", o.name, o.dataDir, map[bool]string{true: "on", false: "off (no --tokens)"}[auth != nil])
			setStoreNodeMemoryLimit()
			var (
				startErr error
				stopOps  = func() {}
			)
			err = runStoreNode(ctx, nc, o.dataDir, o.name, auth, f.Store.Options(), f.Log.Logger(os.Stderr), f.Log.SignalWarnInterval.D(), func(node *tracenode.Node) bool {
				reg := devapi.NewRegistry()
				register(reg, storeCollectors(node))
				stopOps, startErr = o.ops.start(&o.listen, reg, node.Ready, cmd.OutOrStdout(), "adk store "+o.name)
				return startErr == nil
			})
			if stopOps != nil {
				stopOps() // the node is stopped; a scrape now would read a closed store
			}
			if startErr != nil {
				return startErr
			}
			return err
		},
	}
	o.nats.register(cmd.Flags(), defaultNATSURL)
	cmd.Flags().StringVar(&o.dataDir, "data-dir", "", "trace store directory (required)")
	cmd.Flags().StringVar(&o.name, "name", "store-1", "node name (its durable consumer is adk-store-<name>)")
	cmd.Flags().StringVar(&o.tokensFile, "tokens", "", "bearer tokens file for the query service")
	o.set = settings.Bind(cmd.Flags(), "log.level", "log.format", "store.max_events", "store.max_bytes", "store.retention", "store.content_policy")
	o.ops.register(cmd.Flags())
	o.listen.register(cmd.Flags())
	o.ops.link(o.set, storeListen)
	o.listen.link(o.set, storeListen)
	return cmd
}
