package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/devapi/ui"
	"github.com/fadcedab/adk/settings"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/worker"
)

// Error codes of the HTTP listeners.
const (
	codeInvalidListen = "invalid_listen_address"
	codeInvalidTokens = "invalid_tokens_file"
)

// listenFlags are the TLS and exposure flags every HTTP listener of a
// process shares (--http-addr, --metrics-addr).
type listenFlags struct {
	tlsCert, tlsKey string
	insecureListen  bool
}

func (f *listenFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM) of the HTTP listeners; with --tls-key")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS private key (PEM) of the HTTP listeners; with --tls-cert")
	fl.BoolVar(&f.insecureListen, "insecure-listen", false, "allow a plain-HTTP listener on a non-loopback address")
}

func (f *listenFlags) config(flag, addr string) devapi.ListenConfig {
	return devapi.ListenConfig{Flag: flag, Addr: addr, TLSCert: f.tlsCert, TLSKey: f.tlsKey, InsecureListen: f.insecureListen}
}

// listen starts an HTTP listener; its errors are one-line CLI errors
// naming the flag.
func (f *listenFlags) listen(flag, addr string, h http.Handler) (*devapi.Listener, error) {
	l, err := devapi.Listen(f.config(flag, addr), h)
	if err != nil {
		return nil, &cliError{Code: codeInvalidListen, Reason: flag, Detail: err.Error(), Err: err}
	}
	return l, nil
}

// opsFlags is --metrics-addr: /healthz, /readyz and /metrics.
type opsFlags struct {
	metricsAddr string
}

func (f *opsFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve /healthz, /readyz and /metrics (Prometheus) here, e.g. 127.0.0.1:9090 (off by default)")
}

// start serves the ops endpoints when --metrics-addr is set; the
// returned stop is never nil.
func (f *opsFlags) start(lf *listenFlags, reg *prometheus.Registry, ready func(context.Context) error, stdout io.Writer, name string) (func(), error) {
	if f.metricsAddr == "" {
		return func() {}, nil
	}
	l, err := lf.listen("metrics-addr", f.metricsAddr, devapi.OpsHandler(devapi.OpsOptions{Ready: ready, Gatherer: reg}))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "%s: metrics %s/metrics, health %s/healthz, ready %s/readyz\n", name, l.URL(), l.URL(), l.URL())
	return func() { _ = l.Shutdown() }, nil
}

// apiFlags configure the developer HTTP API of `adk serve` and `adk api`.
type apiFlags struct {
	listenFlags
	httpAddr       string
	maxReportBytes int
	allowedOrigins []string
	noUI           bool
	spoolBytes     int64
}

func (f *apiFlags) register(fl *pflag.FlagSet, defaultAddr, help string) {
	f.listenFlags.register(fl)
	fl.StringVar(&f.httpAddr, "http-addr", defaultAddr, help)
	fl.IntVar(&f.maxReportBytes, "max-report-bytes", devapi.MaxReportBytes, "largest report the API sends, 1..16777216 (lowers the 16 MiB ceiling)")
	fl.StringSliceVar(&f.allowedOrigins, "allowed-origin", nil, "origins besides the API's own from which browsers may write (scheme://host[:port])")
	fl.BoolVar(&f.noUI, "no-ui", false, "do not serve the web UI at /")
	fl.Int64Var(&f.spoolBytes, "report-spool-bytes", devapi.DefaultReportSpoolBytes,
		"temporary disk the reports rendered from result streams may hold together (1 GiB by default); past it a report is 429, retry later")
}

// httpAPI is a running developer API.
type httpAPI struct {
	srv *devapi.Server
	ln  *devapi.Listener
}

func (a *httpAPI) stop() {
	a.srv.Close() // ends event streams first, so Shutdown does not wait on them
	_ = a.ln.Shutdown()
}

// startHTTPAPI builds the API over coord and nc and listens on
// --http-addr; log receives its request lines.
func startHTTPAPI(f *apiFlags, tokens *tracenode.Tokens, coord *client.Client, nc *nats.Conn, reg prometheus.Registerer, ready func(context.Context) error, agents []string, log *slog.Logger) (*httpAPI, error) {
	if err := devapi.CheckListen(f.config("http-addr", f.httpAddr)); err != nil {
		return nil, &cliError{Code: codeInvalidListen, Reason: "http-addr", Detail: err.Error(), Err: err}
	}
	if f.maxReportBytes < 1 || f.maxReportBytes > devapi.MaxReportBytes {
		return nil, &cliError{Code: codeInvalidPositiveInt, Reason: "max_report_bytes", Detail: "1..16777216"}
	}
	o := devapi.Options{Tokens: tokens, Coord: coord, NATS: nc, MaxReportBytes: f.maxReportBytes, ReportSpoolBytes: f.spoolBytes, Ready: ready,
		Registerer: reg, AllowedOrigins: f.allowedOrigins, Agents: agents, Logger: log}
	if !f.noUI {
		o.UI = ui.Handler()
	}
	srv, err := devapi.New(o)
	if err != nil {
		return nil, &cliError{Code: codeInvalidListen, Reason: "allowed-origin", Detail: err.Error(), Err: err}
	}
	ln, err := f.listen("http-addr", f.httpAddr, srv.Handler())
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &httpAPI{srv: srv, ln: ln}, nil
}

func loadTokens(path string) (*tracenode.Tokens, error) {
	t, err := tracenode.LoadTokens(path)
	if err != nil {
		return nil, &cliError{Code: codeInvalidTokens, Reason: "tokens", Detail: err.Error(), Err: err}
	}
	return t, nil
}

// apiOptions configure `adk api`.
type apiOptions struct {
	nats       natsFlags
	api        apiFlags
	ops        opsFlags
	tokensFile string
	set        *settings.Flags
	log        *slog.Logger
	timeout    time.Duration
	agents     []string
	// listening, when set, receives the API's URL (tests).
	listening func(url string)
}

func newAPICmd() *cobra.Command {
	var o apiOptions
	cmd := &cobra.Command{
		Use:   "api --nats URL --tokens FILE [--http-addr ADDR]",
		Short: "Run a stateless developer HTTP API gateway in front of a cluster",
		Long: `api serves the developer HTTP API (/dev/v1/...) and the web UI, translating
each request into the cluster's NATS services: eval writes reach the
coordinator leader, reads any coordinator, trace pages any store node. It
keeps no state: kill it and start another anywhere. Tokens are the same
file the store nodes read ("<sha256-hex> <principal> [scopes=a,b]").

--config FILE reads the settings file (adk config defaults prints every
key): its "api" section holds http_addr, max_report_bytes,
report_spool_bytes, allowed_origins, no_ui, metrics_addr, tls_cert, tls_key and
insecure_listen, and its "log" section the log level and format
(--log-level, --log-format): at debug a line per request, at warn the
5xx answers, to stderr. Flags win over the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := o.set.Resolve()
			if err != nil {
				return settingsError(err)
			}
			o.api.load(f.API.HTTPAPI, f.API.Listen)
			o.ops.load(f.API.Listen)
			o.log = f.Log.Logger(cmd.ErrOrStderr())
			if o.tokensFile == "" {
				return &cliError{Code: codeMissingRequired, Reason: "tokens"}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runAPI(ctx, o, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	o.nats.register(fl, defaultNATSURL)
	o.api.register(fl, "127.0.0.1:8080", "HTTP listen address of the API")
	o.ops.register(fl)
	o.set = settings.Bind(fl, "log.level", "log.format")
	o.api.link(o.set, apiHTTPAPI, apiListen)
	o.ops.link(o.set, apiListen)
	fl.StringVar(&o.tokensFile, "tokens", "", "bearer tokens file (required)")
	fl.DurationVar(&o.timeout, "request-timeout", 30*time.Second, "timeout of one coordinator call")
	fl.StringSliceVar(&o.agents, "agents", nil, "agent names submissions may use (the workers' agents; empty: any, the coordinator decides)")
	return cmd
}

func runAPI(ctx context.Context, o apiOptions, stdout io.Writer) error {
	tokens, err := loadTokens(o.tokensFile)
	if err != nil {
		return err
	}
	nc, err := o.nats.connect("adk-api")
	if err != nil {
		return err
	}
	defer nc.Close()
	reg := devapi.NewRegistry()
	ready := func(context.Context) error {
		if !nc.IsConnected() {
			return errors.New("not connected to NATS")
		}
		return nil
	}
	a, err := startHTTPAPI(&o.api, tokens, client.New(nc, o.timeout), nc, reg, ready, o.agents, o.log)
	if err != nil {
		return err
	}
	defer a.stop()
	stopOps, err := o.ops.start(&o.api.listenFlags, reg, ready, stdout, "adk api")
	if err != nil {
		return err
	}
	defer stopOps()
	fmt.Fprintf(stdout, "adk api: %s/dev/v1/ (ui %s/)\n", a.ln.URL(), a.ln.URL())
	if o.listening != nil {
		o.listening(a.ln.URL())
	}
	<-ctx.Done()
	return nil
}

// coordinatorCollectors are a coordinator node's series.
func coordinatorCollectors(n *coordinator.Node) []prometheus.Collector {
	return []prometheus.Collector{
		fleetLimitCollector{n: n},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adk_coordinator_raft_commit_index", Help: "Raft commit index this node knows."},
			func() float64 { c, _ := n.RaftIndexes(); return float64(c) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adk_coordinator_raft_applied_index", Help: "Raft index this node has applied."},
			func() float64 { _, a := n.RaftIndexes(); return float64(a) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adk_coordinator_leader", Help: "1 while this node is the Raft leader."},
			func() float64 {
				if n.IsLeader() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adk_coordinator_rejected_results_total", Help: "Sample results refused (sender not allowlisted, undecodable, fenced)."},
			func() float64 { return float64(n.RejectedResults()) }),
	}
}

// workerCollectors are a worker's series.
func workerCollectors(w *worker.Worker) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adk_worker_running_tasks", Help: "Tasks the worker runs now."},
			func() float64 { return float64(w.Running()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adk_worker_executed_tasks_total", Help: "Tasks the worker has run."},
			func() float64 { return float64(w.Executed()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adk_worker_fenced", Help: "1 while the worker is fenced (lost the leader)."},
			func() float64 {
				if w.Fenced() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adk_worker_owner_waiting_tasks", Help: "Held tasks waiting because their job's owner was not heard lately."},
			func() float64 { return float64(w.OwnerWaits()) }),
		limiterCollector{stats: w.Limits},
	}
}

// storeCollectors are a store node's series.
func storeCollectors(n *tracenode.Node) []prometheus.Collector {
	counter := func(name, help string, f func(tracenode.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(n.Stats())) })
	}
	return []prometheus.Collector{
		counter("adk_store_applied_messages_total", "Stream messages applied to the trace store.", func(s tracenode.Stats) uint64 { return s.Applied }),
		counter("adk_store_redelivered_messages_total", "Redelivered stream messages ignored (already applied).", func(s tracenode.Stats) uint64 { return s.Redelivered }),
		counter("adk_store_malformed_batches_total", "Stream messages that could not be decoded.", func(s tracenode.Stats) uint64 { return s.MalformedBatches }),
		counter("adk_store_stream_gap_messages_total", "Stream messages the stream discarded before this node applied them.", func(s tracenode.Stats) uint64 { return s.StreamGapMessages }),
		counter("adk_store_delivery_gaps_total", "Deliveries this node's client lost, each pulled again from the stream.", func(s tracenode.Stats) uint64 { return s.DeliveryGaps }),
		counter("adk_store_idle_checks_total", "Consumer-info requests an idle node made to find a lost last delivery.", func(s tracenode.Stats) uint64 { return s.IdleChecks }),
		counter("adk_store_queries_total", "Trace queries answered.", func(s tracenode.Stats) uint64 { return s.Queries }),
		counter("adk_store_auth_rejected_total", "Trace queries refused for their token.", func(s tracenode.Stats) uint64 { return s.AuthRejected }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adk_store_lag_messages", Help: "Stream messages not yet applied by this node (asks JetStream on each scrape)."},
			func() float64 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				lag, err := n.Lag(ctx)
				if err != nil {
					return -1
				}
				return float64(lag)
			}),
	}
}

// register adds collectors to reg, ignoring duplicates of an earlier
// registration (a restarted component in one process).
func register(reg prometheus.Registerer, cs []prometheus.Collector) {
	for _, c := range cs {
		_ = reg.Register(c)
	}
}

// link ties the TLS and exposure flags to a settings section's keys
// (section.tls_cert, .tls_key, .insecure_listen): a flag given wins over
// the file, and Resolve validates the result.
func (f *listenFlags) link(b *settings.Flags, sec func(*settings.File) *settings.Listen) {
	b.Link("tls-cert", func(file *settings.File) { sec(file).TLSCert = f.tlsCert })
	b.Link("tls-key", func(file *settings.File) { sec(file).TLSKey = f.tlsKey })
	b.Link("insecure-listen", func(file *settings.File) { sec(file).InsecureListen = f.insecureListen })
}

// load takes the resolved section's values (flag > file > default).
func (f *listenFlags) load(l settings.Listen) {
	f.tlsCert, f.tlsKey, f.insecureListen = l.TLSCert, l.TLSKey, l.InsecureListen
}

// link ties --metrics-addr to section.metrics_addr.
func (f *opsFlags) link(b *settings.Flags, sec func(*settings.File) *settings.Listen) {
	b.Link("metrics-addr", func(file *settings.File) { sec(file).MetricsAddr = f.metricsAddr })
}

func (f *opsFlags) load(l settings.Listen) { f.metricsAddr = l.MetricsAddr }

// link ties the API's flags to section.http_addr, .max_report_bytes,
// .report_spool_bytes, .allowed_origins and .no_ui, and its listener
// flags to lsec.
func (f *apiFlags) link(b *settings.Flags, sec func(*settings.File) *settings.HTTPAPI, lsec func(*settings.File) *settings.Listen) {
	f.listenFlags.link(b, lsec)
	b.Link("http-addr", func(file *settings.File) { sec(file).HTTPAddr = f.httpAddr })
	b.Link("max-report-bytes", func(file *settings.File) { sec(file).MaxReportBytes = f.maxReportBytes })
	b.Link("allowed-origin", func(file *settings.File) { sec(file).AllowedOrigins = f.allowedOrigins })
	b.Link("no-ui", func(file *settings.File) { sec(file).NoUI = f.noUI })
	b.Link("report-spool-bytes", func(file *settings.File) { sec(file).ReportSpoolBytes = f.spoolBytes })
}

func (f *apiFlags) load(a settings.HTTPAPI, l settings.Listen) {
	f.listenFlags.load(l)
	f.httpAddr, f.maxReportBytes, f.allowedOrigins, f.noUI, f.spoolBytes = a.HTTPAddr, a.MaxReportBytes, a.AllowedOrigins, a.NoUI, a.ReportSpoolBytes
}

// Settings sections of each role's listeners.
func coordinatorListen(f *settings.File) *settings.Listen { return &f.Coordinator.Listen }
func workerListen(f *settings.File) *settings.Listen      { return &f.Worker.Listen }
func storeListen(f *settings.File) *settings.Listen       { return &f.Store.Listen }
func serveListen(f *settings.File) *settings.Listen       { return &f.Serve.Listen }
func serveHTTPAPI(f *settings.File) *settings.HTTPAPI     { return &f.Serve.HTTPAPI }
func apiListen(f *settings.File) *settings.Listen         { return &f.API.Listen }
func apiHTTPAPI(f *settings.File) *settings.HTTPAPI       { return &f.API.HTTPAPI }
