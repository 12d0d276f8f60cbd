package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/worker"
)

// defaultTraceDrain bounds how long a process waits at exit for its
// signals to reach the exporter (--trace-drain).
const defaultTraceDrain = 5 * time.Second

// envTracing turns tracing off (ADK_TRACING=off): no spans, no trace or
// run ids in results. The A/B switch of the benchmark, and an escape hatch.
const envTracing = "ADK_TRACING"

// Error codes of the tracing flags.
const (
	codeInvalidTraceDrain  = "invalid_trace_drain"
	codeInvalidTraceTarget = "invalid_trace_target"
)

// localTracing is the signal path of a process without NATS: a Tracer
// publishing into the in-process bounded bus, whose exporter is the OTLP
// endpoint the environment names (observability.ExporterFromEnv). With no
// endpoint the tracer still gives every sample its trace and run ids (the
// result links to them) but builds no signal: there is no one to send
// them to.
type localTracing struct {
	tracer *observability.Tracer
	bus    *observability.LocalBus
	otlp   *observability.OTLPExporter
	drain  time.Duration
	// --trace-to: the cluster's publisher (nil when it was unreachable,
	// then every signal counts in unreachable).
	toCluster   bool
	nc          *nats.Conn
	pub         *bus.Publisher
	unreachable atomic.Uint64
	watch       *signalWatch // warns while --trace-to loses signals
}

// traceTarget is --trace-to: a cluster's NATS URL and the principal the
// signals are published under (--scope); while its signals are lost, a
// warning goes to log at most once per warnEvery (the settings file's
// log.signal_warn_interval), as `adk worker` does.
type traceTarget struct {
	url, principal string
	log            *slog.Logger
	warnEvery      time.Duration
}

// Enqueue is the tracer's sink: the local bus (OTLP) and the cluster.
func (lt *localTracing) Enqueue(s observability.Signal) error {
	var err error
	if lt.bus != nil {
		err = lt.bus.Enqueue(s)
	}
	if lt.toCluster {
		if lt.pub == nil {
			lt.unreachable.Add(1)
		} else if perr := lt.pub.Enqueue(s); err == nil {
			err = perr
		}
	}
	return err
}

// EnqueueSignalJSON is the tracer's record sink when the cluster is the
// only destination (--trace-to without an OTLP endpoint).
func (lt *localTracing) EnqueueSignalJSON(_ string, data []byte) error {
	if lt.pub == nil {
		lt.unreachable.Add(1)
		return nil
	}
	return lt.pub.EnqueueRecord(bus.RecordObservability, data)
}

var _ observability.RecycledRecordSink = (*localTracing)(nil)

// EnqueueSignalRecord is EnqueueSignalJSON for the tracer's recycled
// records: the publisher releases each once its batch is encoded, so the
// tracer writes later records into the same chunks (a worker's path).
func (lt *localTracing) EnqueueSignalRecord(jobID string, r observability.Record) error {
	if lt.pub == nil {
		lt.unreachable.Add(1)
		r.Release()
		return nil
	}
	return lt.pub.EnqueueSignalRecord(jobID, r)
}

// startLocalTracing reads the export environment; a malformed variable is
// a typed error naming it (never its value).
func startLocalTracing(getenv func(string) string, service string, drain time.Duration, to traceTarget) (*localTracing, error) {
	if drain <= 0 || drain > observability.MaxLocalBusDrain {
		return nil, &cliError{Code: codeInvalidTraceDrain, Reason: "trace_drain: a duration in 1ms..5m"}
	}
	switch getenv(envTracing) {
	case "", "on":
	case "off":
		return &localTracing{drain: drain}, nil
	default:
		return nil, &observability.EnvError{Var: envTracing, Reason: "want_on_or_off"}
	}
	desc, err := observability.ExporterFromEnv(getenv, service)
	if err != nil {
		return nil, err
	}
	lt := &localTracing{drain: drain}
	cfg := observability.Config{}
	if desc != nil {
		lt.otlp = desc.Exporter.(*observability.OTLPExporter)
		if lt.bus, err = observability.NewLocalBus(observability.LocalBusConfig{Exporters: []observability.ExporterDescriptor{*desc}}); err != nil {
			_ = lt.otlp.Close()
			return nil, err
		}
		cfg.Async = lt
	}
	if to.url != "" {
		if err := bus.ValidToken(to.principal); err != nil {
			lt.close()
			return nil, &cliError{Code: codeInvalidTraceTarget, Reason: "scope: the principal of --trace-to must be a subject token"}
		}
		lt.toCluster = true
		if lt.bus == nil { // the cluster only: the tracer writes records
			cfg.Records = lt
		} else {
			cfg.Async = lt
		}
		// Unreachable is not an error: the eval runs, its signals count as
		// dropped (one stderr line at the end).
		if nc, err := bus.Connect(to.url, bus.WithName("adk-eval-trace"), bus.WithConnectTimeout(2*time.Second), bus.WithMaxReconnects(3)); err == nil {
			// A local eval at high concurrency is a stream, not a trickle.
			pc := bus.HighRatePublisherConfig(nil)
			pc.Principal = to.principal
			if pub, err := bus.NewPublisher(nc, pc); err == nil {
				lt.nc, lt.pub = nc, pub
			} else {
				nc.Close()
			}
		}
	}
	if lt.tracer, err = observability.New(cfg); err != nil {
		lt.close()
		return nil, err
	}
	if lt.toCluster && to.log != nil {
		lt.watch = newSignalWatch(to.log, to.warnEvery, "adk eval run --trace-to", lt.clusterStats,
			func() bool { return lt.nc != nil && lt.nc.IsConnected() })
		lt.watch.start(signalWarnCheck)
	}
	return lt, nil
}

// clusterStats are --trace-to's publisher counters for the watch: signals
// lost to a cluster unreachable at start count as not acknowledged (the
// watch's hint then says NATS is disconnected).
func (lt *localTracing) clusterStats() map[string]bus.PublisherStats {
	var st bus.PublisherStats
	if lt.pub != nil {
		st = lt.pub.Stats()
	}
	st.ExportFailed += lt.unreachable.Load()
	return map[string]bus.PublisherStats{"trace-to": st}
}

// observer is the tracer as an Observer, nil (untraced) when tracing is
// off: a nil *Tracer in an interface would not be nil.
func (lt *localTracing) observer() observability.Observer {
	if lt.tracer == nil {
		return nil
	}
	return lt.tracer
}

// finish drains the bus within the drain bound, stops it, and writes one
// line to stderr when any signal was dropped. It never changes the run's
// verdict or exit code.
func (lt *localTracing) finish(stderr io.Writer) {
	lt.watch.stop() // the exit line below counts what is lost from here
	ctx, cancel := context.WithTimeout(context.Background(), lt.drain)
	if lt.bus != nil {
		_ = lt.bus.Drain(ctx)
	}
	if lt.pub != nil {
		_ = lt.pub.Drain(ctx)
	}
	cancel()
	lt.close()
	if lt.toCluster {
		var dropped, total uint64 = lt.unreachable.Load(), lt.unreachable.Load()
		if lt.pub != nil {
			st := lt.pub.Stats()
			total += st.Accepted + st.Rejected + st.DroppedNewest + st.TooLarge
			dropped += st.ExportFailed + st.PermanentFailures + st.Rejected + st.DroppedNewest + st.DroppedOldest + st.TooLarge + st.ClosedDropped
		}
		if dropped > 0 {
			fmt.Fprintf(stderr, "adk: traces: %d of %d signals not published to --trace-to\n", dropped, total)
		}
	}
	if lt.bus == nil {
		return
	}
	if st := lt.bus.Stats(); st.Dropped() > 0 {
		fmt.Fprintf(stderr, "adk: traces: %d of %d signals dropped (queue_full %d, export_failed %d, not_drained %d within %s)\n",
			st.Dropped(), st.Accepted+st.Rejected, st.Rejected, st.ExportFailed, st.ClosedDropped, lt.drain)
	}
}

func (lt *localTracing) close() {
	lt.watch.stop()
	if lt.bus != nil {
		lt.bus.Close()
	}
	if lt.pub != nil {
		lt.pub.Close()
	}
	if lt.nc != nil {
		lt.nc.Close()
	}
	if lt.tracer != nil {
		_ = lt.tracer.Close(context.Background())
	}
	if lt.otlp != nil {
		_ = lt.otlp.Close()
	}
}

// fleetTracing is the signal path of a worker (`adk worker`, `adk serve`'s
// embedded one): a publisher per job principal into ADK_SIGNALS over the
// worker's connection, and, when the environment names an OTLP endpoint,
// the same signals to it through a local bus.
type fleetTracing struct {
	pool  *bus.PublisherPool
	local *localTracing // its tracer is unused: only the bus exports
	drain time.Duration
	watch *signalWatch // warns on log while signals are lost
}

// startFleetTracing starts the publishers on nc and the watch that logs
// on log, at most once per warnEvery and each line starting with prefix
// (the process), while their signals are not delivered.
func startFleetTracing(nc *nats.Conn, getenv func(string) string, service string, drain time.Duration, log *slog.Logger, warnEvery time.Duration, prefix string) (*fleetTracing, error) {
	local, err := startLocalTracing(getenv, service, drain, traceTarget{})
	if err != nil {
		return nil, err
	}
	ft := &fleetTracing{pool: bus.NewPublisherPool(nc, bus.HighRatePublisherConfig(nil), 0), local: local, drain: drain}
	ft.watch = newSignalWatch(log, warnEvery, prefix, ft.pool.Stats, nc.IsConnected)
	ft.watch.start(signalWarnCheck)
	return ft, nil
}

// workerConfig fills the worker's signal fields.
func (ft *fleetTracing) workerConfig(c *worker.Config) {
	c.Signals = ft.pool
	if ft.local.bus != nil {
		c.Export = ft.local.bus
	}
}

// finish drains the publishers (within the drain bound) and the local
// bus, and writes one stderr line when signals were dropped.
func (ft *fleetTracing) finish(stderr io.Writer) {
	ft.watch.stop() // the exit line below counts what is lost from here
	ctx, cancel := context.WithTimeout(context.Background(), ft.drain)
	_ = ft.pool.Drain(ctx)
	cancel()
	ft.pool.Close()
	var dropped, total uint64
	for _, st := range ft.pool.Stats() {
		total += st.Accepted + st.Rejected + st.DroppedNewest + st.TooLarge
		dropped += st.ExportFailed + st.PermanentFailures + st.Rejected + st.DroppedNewest + st.DroppedOldest + st.TooLarge + st.ClosedDropped
	}
	if dropped > 0 {
		fmt.Fprintf(stderr, "adk: traces: %d of %d signals not published to %s\n", dropped, total, bus.SignalStreamName)
	}
	ft.local.finish(stderr)
}
