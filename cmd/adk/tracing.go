package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/worker"
)

// defaultTraceDrain bounds how long a process waits at exit for its
// signals to reach the exporter (--trace-drain).
const defaultTraceDrain = 5 * time.Second

// codeInvalidTraceDrain rejects --trace-drain.
const codeInvalidTraceDrain = "invalid_trace_drain"

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
}

// startLocalTracing reads the export environment; a malformed variable is
// a typed error naming it (never its value).
func startLocalTracing(getenv func(string) string, service string, drain time.Duration) (*localTracing, error) {
	if drain <= 0 || drain > observability.MaxLocalBusDrain {
		return nil, &cliError{Code: codeInvalidTraceDrain, Reason: "trace_drain: a duration in 1ms..5m"}
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
		cfg.Async = lt.bus
	}
	if lt.tracer, err = observability.New(cfg); err != nil {
		lt.close()
		return nil, err
	}
	return lt, nil
}

// finish drains the bus within the drain bound, stops it, and writes one
// line to stderr when any signal was dropped. It never changes the run's
// verdict or exit code.
func (lt *localTracing) finish(stderr io.Writer) {
	if lt.bus != nil {
		ctx, cancel := context.WithTimeout(context.Background(), lt.drain)
		_ = lt.bus.Drain(ctx)
		cancel()
	}
	lt.close()
	if lt.bus == nil {
		return
	}
	if st := lt.bus.Stats(); st.Dropped() > 0 {
		fmt.Fprintf(stderr, "adk: traces: %d of %d signals dropped (queue_full %d, export_failed %d, not_drained %d within %s)\n",
			st.Dropped(), st.Accepted+st.Rejected, st.Rejected, st.ExportFailed, st.ClosedDropped, lt.drain)
	}
}

func (lt *localTracing) close() {
	if lt.bus != nil {
		lt.bus.Close()
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
}

func startFleetTracing(nc *nats.Conn, getenv func(string) string, service string, drain time.Duration) (*fleetTracing, error) {
	local, err := startLocalTracing(getenv, service, drain)
	if err != nil {
		return nil, err
	}
	return &fleetTracing{pool: bus.NewPublisherPool(nc, bus.PublisherConfig{}, 0), local: local, drain: drain}, nil
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
