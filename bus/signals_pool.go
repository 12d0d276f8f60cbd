package bus

import (
	"context"
	"errors"
	"sync"

	"github.com/fadcedab/adk/observability"
	"github.com/nats-io/nats.go"
)

// ErrTooManyPrincipals reports a PublisherPool at its principal bound.
var ErrTooManyPrincipals = errors.New("publisher_pool_full")

// PublisherPool holds one Publisher per principal over one connection,
// created on first use from a template configuration. It is the API a
// receiver (the OTLP/HTTP receiver, a lifecycle sink) calls to publish
// signals for the principal it authenticated: the principal selects the
// subject, so it must be one the connection's NATS user may publish for.
type PublisherPool struct {
	nc   *nats.Conn
	tmpl PublisherConfig
	max  int

	mu     sync.Mutex
	pubs   map[string]*Publisher
	closed bool
}

// The high-rate publisher template (HighRatePublisherConfig).
const (
	// HighRateBatchSize is the most signals in one ADK_SIGNALS message.
	// Batches grow with load (a batch leaves as soon as an in-flight slot
	// is free), so a trickle still goes out at once; under load, fewer
	// and larger messages cut the per-message cost of replicated
	// JetStream and of the store nodes. 512 signals of ~500 bytes fit the
	// publisher's 512 KiB MaxBatchBytes and the stream's 1 MiB MaxMsgSize.
	HighRateBatchSize = 512
	// HighRateMaxQueueEvents and HighRateMaxQueueBytes bound a principal's
	// queue: a few seconds of a busy worker's signals, or 64 OTLP
	// requests of 512 spans, before enqueues are refused (counted).
	HighRateMaxQueueEvents = 32 << 10
	HighRateMaxQueueBytes  = 32 << 20
	// HighRateMaxInflight is the unacknowledged batches per principal.
	HighRateMaxInflight = 4
)

// HighRatePublisherConfig is the template for a principal that emits a
// stream rather than a trickle: a fleet worker tracing every task it runs
// (about 5 signals a task, hundreds of tasks a second), the OTLP receiver
// (hundreds of spans a request), a local eval sending its runs into a
// cluster. The contract's defaults (32 signals a batch, 4096 queued, 2 in
// flight) suit one agent process; under a worker's load they send ten
// times as many messages, and the queue overflows while each small batch
// waits for its replicated ack (measured: a third of a 10k-task job's
// signals refused). metrics may be nil.
func HighRatePublisherConfig(metrics *observability.Metrics) PublisherConfig {
	return PublisherConfig{
		MaxQueueEvents:     HighRateMaxQueueEvents,
		MaxQueueBytes:      HighRateMaxQueueBytes,
		BatchSize:          HighRateBatchSize,
		MaxInflightBatches: HighRateMaxInflight,
		Metrics:            metrics,
	}
}

// NewPublisherPool makes a pool; tmpl.Principal is ignored. At most
// maxPrincipals publishers exist at once (0 means 1024), and together they
// queue at most tmpl.PoolMaxQueueBytes (default 256 MiB); past that an
// enqueue is refused (or dropped) by the publisher's DropPolicy.
func NewPublisherPool(nc *nats.Conn, tmpl PublisherConfig, maxPrincipals int) *PublisherPool {
	if maxPrincipals <= 0 {
		maxPrincipals = 1024
	}
	max := tmpl.PoolMaxQueueBytes
	if max == 0 {
		max = 256 << 20
	}
	tmpl.shared = &queueBudget{max: max}
	return &PublisherPool{nc: nc, tmpl: tmpl, max: maxPrincipals, pubs: map[string]*Publisher{}}
}

// Publisher returns the principal's publisher, starting it if needed.
func (pp *PublisherPool) Publisher(principal string) (*Publisher, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.closed {
		return nil, ErrPublisherClosed
	}
	if p := pp.pubs[principal]; p != nil {
		return p, nil
	}
	if err := ValidToken(principal); err != nil {
		return nil, &ConfigError{Field: "Principal", Reason: err.Error()}
	}
	if len(pp.pubs) >= pp.max {
		return nil, ErrTooManyPrincipals
	}
	cfg := pp.tmpl
	cfg.Principal = principal
	p, err := NewPublisher(pp.nc, cfg) // starts goroutines only; no I/O
	if err != nil {
		return nil, err
	}
	pp.pubs[principal] = p
	return p, nil
}

// PublishSpans enqueues spans for principal in order and returns how many
// were accepted; it stops at the first refusal (queue full, too large) and
// returns that error. Accepted spans are delivered asynchronously.
func (pp *PublisherPool) PublishSpans(principal string, spans []*observability.SpanSignal) (int, error) {
	p, err := pp.Publisher(principal)
	if err != nil {
		return 0, err
	}
	for i, s := range spans {
		if err := p.Enqueue(s); err != nil {
			return i, err
		}
	}
	return len(spans), nil
}

// PublishRecord enqueues one encoded record (RecordObservability or
// RecordWorkflowLifecycle JSON) for principal.
func (pp *PublisherPool) PublishRecord(principal, kind string, data []byte) error {
	p, err := pp.Publisher(principal)
	if err != nil {
		return err
	}
	return p.EnqueueRecord(kind, data)
}

func (pp *PublisherPool) all() []*Publisher {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	out := make([]*Publisher, 0, len(pp.pubs))
	for _, p := range pp.pubs {
		out = append(out, p)
	}
	return out
}

// Drain drains every publisher, within ctx.
func (pp *PublisherPool) Drain(ctx context.Context) error {
	var errs []error
	for _, p := range pp.all() {
		errs = append(errs, p.Drain(ctx))
	}
	return errors.Join(errs...)
}

// Stats returns each principal's publisher counters. The caller decides
// whether principals may be shown.
func (pp *PublisherPool) Stats() map[string]PublisherStats {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	out := make(map[string]PublisherStats, len(pp.pubs))
	for k, p := range pp.pubs {
		out[k] = p.Stats()
	}
	return out
}

// Close closes every publisher; the pool refuses new ones afterwards.
func (pp *PublisherPool) Close() {
	pp.mu.Lock()
	pp.closed = true
	pubs := pp.pubs
	pp.pubs = map[string]*Publisher{}
	pp.mu.Unlock()
	for _, p := range pubs {
		p.Close()
	}
}
