package observability

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The fixed instrument catalog (CONTRACTS §2.5). Prometheus names use
// underscores where the contract's OTel names use dots; the label names
// likewise (gen_ai.operation.name is gen_ai_operation_name).
const (
	MetricOperationDuration = "gen_ai_client_operation_duration_milliseconds"
	MetricOperationCount    = "gen_ai_client_operation_count_total"
	MetricDeliveryFailures  = "adk_observability_delivery_failures_total"
	MetricBusEvents         = "adk_observability_bus_events_total"
	MetricBusQueueEvents    = "adk_observability_bus_queue_events"
)

// OverflowLabel marks the one series that absorbs label combinations beyond
// the per-instrument series limit.
const OverflowLabel = "otel_metric_overflow"

// Series limits (default, hard maximum).
const (
	DefaultMaxSeriesPerInstrument = 200
	MaxSeriesPerInstrument        = 10000
)

// BusCounter names one of the async bus's fixed counters (CONTRACTS §2.6).
type BusCounter string

// The bus counters; the bus package records them through Metrics.AddBus.
const (
	BusAccepted             BusCounter = "accepted"
	BusExported             BusCounter = "exported"
	BusFailedAttempts       BusCounter = "failed_attempts"
	BusRetried              BusCounter = "retried"
	BusExportFailed         BusCounter = "export_failed"
	BusPermanentFailures    BusCounter = "permanent_failures"
	BusRetryDropped         BusCounter = "retry_dropped"
	BusRejected             BusCounter = "rejected"
	BusDroppedRejected      BusCounter = "dropped_rejected"
	BusDroppedNewest        BusCounter = "dropped_newest"
	BusDroppedOldest        BusCounter = "dropped_oldest"
	BusWorkerDown           BusCounter = "worker_down"
	BusWorkerTimeouts       BusCounter = "worker_timeouts"
	BusInvalidWorkerResults BusCounter = "invalid_worker_results"
)

var busCounters = []BusCounter{
	BusAccepted, BusExported, BusFailedAttempts, BusRetried, BusExportFailed,
	BusPermanentFailures, BusRetryDropped, BusRejected, BusDroppedRejected,
	BusDroppedNewest, BusDroppedOldest, BusWorkerDown, BusWorkerTimeouts,
	BusInvalidWorkerResults,
}

// OperationLabels are the allowlisted labels of the operation instruments.
// Stream is "true" or "false".
type OperationLabels struct {
	Operation string
	Provider  string
	Model     string
	Tool      string
	ErrorType string
	Status    string
	Stream    string
}

// MetricsConfig configures a Metrics registry.
type MetricsConfig struct {
	// MaxSeriesPerInstrument bounds the label series of each instrument
	// (default 200, at most 10000); further combinations fold into one
	// overflow series.
	MaxSeriesPerInstrument int
}

// Metrics is the bounded instrument catalog on a private Prometheus
// registry. It is safe for concurrent use.
type Metrics struct {
	reg       *prometheus.Registry
	maxSeries int

	duration *prometheus.HistogramVec
	count    *prometheus.CounterVec
	delivery *prometheus.CounterVec
	bus      *prometheus.CounterVec
	busQueue prometheus.Gauge

	mu       sync.RWMutex
	ops      map[OperationLabels]opSeries // guarded by mu
	opsOver  opSeries
	failures map[string]prometheus.Counter // guarded by mu
	failOver prometheus.Counter

	overflowRecords atomic.Int64
	rejectedRecords atomic.Int64

	// recentOps are series RecordOperation found lately, by a slot its
	// labels' lengths pick: a hit compares the labels instead of hashing
	// seven strings for the map under mu (a traced eval sample records
	// four operations, and the lookups were ~1.3% of a run's CPU).
	recentOps [16]atomic.Pointer[recentOp]
}

type opSeries struct {
	duration prometheus.Observer
	count    prometheus.Counter
}

// recentOp is one slot of Metrics.recentOps.
type recentOp struct {
	l OperationLabels
	s opSeries
}

// recentSlot picks l's slot in Metrics.recentOps. Equal labels always
// pick the same slot; different ones may share it.
func recentSlot(l *OperationLabels) int {
	n := len(l.Operation) + 3*len(l.Provider) + 5*len(l.Model) + 7*len(l.Tool) + 11*len(l.ErrorType) + 13*len(l.Status)
	if l.Stream == "true" {
		n++
	}
	return n & 15
}

var opLabelNames = []string{
	"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model",
	"gen_ai_tool_name", "error_type", "status", "stream", OverflowLabel,
}

// NewMetrics builds the catalog on a fresh private registry.
func NewMetrics(cfg MetricsConfig) (*Metrics, error) {
	switch {
	case cfg.MaxSeriesPerInstrument == 0:
		cfg.MaxSeriesPerInstrument = DefaultMaxSeriesPerInstrument
	case cfg.MaxSeriesPerInstrument < 1 || cfg.MaxSeriesPerInstrument > MaxSeriesPerInstrument:
		return nil, fmt.Errorf("observability: max series per instrument %d outside 1..%d",
			cfg.MaxSeriesPerInstrument, MaxSeriesPerInstrument)
	}
	m := &Metrics{
		reg:       prometheus.NewRegistry(),
		maxSeries: cfg.MaxSeriesPerInstrument,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricOperationDuration,
			Help:    "Duration of gen-ai operations (gen_ai.client.operation.duration) in milliseconds.",
			Buckets: []float64{1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000},
		}, opLabelNames),
		count: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricOperationCount,
			Help: "Finished gen-ai operations (gen_ai.client.operation.count).",
		}, opLabelNames),
		delivery: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDeliveryFailures,
			Help: "Signal deliveries that failed after or around an operation; never an operation error.",
		}, []string{"status", "error_type", OverflowLabel}),
		bus: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBusEvents,
			Help: "Observability bus accounting by counter.",
		}, []string{"counter"}),
		busQueue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricBusQueueEvents,
			Help: "Events queued in the observability bus.",
		}),
		ops:      make(map[OperationLabels]opSeries),
		failures: make(map[string]prometheus.Counter),
	}
	m.reg.MustRegister(m.duration, m.count, m.delivery, m.bus, m.busQueue)
	over := []string{"", "", "", "", "", "", "", "true"}
	m.opsOver = opSeries{m.duration.WithLabelValues(over...), m.count.WithLabelValues(over...)}
	m.failOver = m.delivery.WithLabelValues("", "", "true")
	for _, c := range busCounters {
		m.bus.WithLabelValues(string(c)) // pre-create: the catalog is fixed
	}
	return m, nil
}

// Handler serves the registry in the Prometheus text exposition format; the
// HTTP API mounts it at /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Gatherer exposes the private registry for tests and embedding.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// RecordOperation records one finished operation in the duration histogram
// and the count counter. It reports whether the record landed in the
// overflow series.
func (m *Metrics) RecordOperation(l OperationLabels, d time.Duration) (overflow bool) {
	slot := &m.recentOps[recentSlot(&l)]
	var s opSeries
	if r := slot.Load(); r != nil && r.l == l {
		s = r.s
	} else {
		var ok bool
		m.mu.RLock()
		s, ok = m.ops[l]
		m.mu.RUnlock()
		if !ok {
			s, overflow = m.opSeriesSlow(l)
		}
		if !overflow { // the overflow series counts each record it takes
			slot.Store(&recentOp{l: l, s: s})
		}
	}
	s.duration.Observe(float64(d) / float64(time.Millisecond))
	s.count.Inc()
	return overflow
}

func (m *Metrics) opSeriesSlow(l OperationLabels) (opSeries, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.ops[l]; ok {
		return s, false
	}
	if len(m.ops) >= m.maxSeries {
		m.overflowRecords.Add(1)
		return m.opsOver, true
	}
	vals := []string{l.Operation, l.Provider, l.Model, l.Tool, l.ErrorType, l.Status, l.Stream, ""}
	s := opSeries{m.duration.WithLabelValues(vals...), m.count.WithLabelValues(vals...)}
	m.ops[l] = s
	return s, false
}

// RecordDeliveryFailure counts one delivery failure with its structural
// reason (error.type).
func (m *Metrics) RecordDeliveryFailure(reason string) {
	m.mu.RLock()
	c, ok := m.failures[reason]
	m.mu.RUnlock()
	if !ok {
		m.mu.Lock()
		if c, ok = m.failures[reason]; !ok {
			if len(m.failures) >= m.maxSeries {
				m.overflowRecords.Add(1)
				c = m.failOver
			} else {
				c = m.delivery.WithLabelValues(StatusError, reason, "")
				m.failures[reason] = c
			}
		}
		m.mu.Unlock()
	}
	c.Inc()
}

// AddBus adds n to one of the fixed bus counters. Unknown counters are
// rejected and counted in RejectedRecords.
func (m *Metrics) AddBus(c BusCounter, n uint64) error {
	for _, k := range busCounters {
		if k == c {
			m.bus.WithLabelValues(string(c)).Add(float64(n))
			return nil
		}
	}
	m.rejectedRecords.Add(1)
	return fmt.Errorf("observability: unknown bus counter %q", string(c))
}

// SetBusQueue sets the bus queue depth gauge.
func (m *Metrics) SetBusQueue(events int) { m.busQueue.Set(float64(events)) }

// AddBusQueue moves the bus queue depth gauge by delta: publishers that
// share one Metrics report their queues' sum.
func (m *Metrics) AddBusQueue(delta int) { m.busQueue.Add(float64(delta)) }

// MetricsSnapshot is the bounded operational view of the registry.
type MetricsSnapshot struct {
	InstrumentCount        int            `json:"instrument_count"`
	Series                 map[string]int `json:"series"`
	MaxSeriesPerInstrument int            `json:"max_series_per_instrument"`
	OverflowRecords        int64          `json:"overflow_records"`
	RejectedRecords        int64          `json:"rejected_records"`
}

// Snapshot returns series counts and overflow/rejection accounting.
func (m *Metrics) Snapshot() MetricsSnapshot {
	m.mu.RLock()
	ops, fails := len(m.ops), len(m.failures)
	m.mu.RUnlock()
	return MetricsSnapshot{
		InstrumentCount: 5,
		Series: map[string]int{
			MetricOperationDuration: ops, MetricOperationCount: ops,
			MetricDeliveryFailures: fails, MetricBusEvents: len(busCounters), MetricBusQueueEvents: 1,
		},
		MaxSeriesPerInstrument: m.maxSeries,
		OverflowRecords:        m.overflowRecords.Load(),
		RejectedRecords:        m.rejectedRecords.Load(),
	}
}
