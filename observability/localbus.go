package observability

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// LocalBus defaults and maxima: the JetStream publisher's (bus package)
// queue bounds, so a local run and a worker drop at the same load.
const (
	DefaultLocalBusEvents   = 4096
	DefaultLocalBusBytes    = 16 << 20
	DefaultLocalBusAttempts = 3
	DefaultLocalBusDrain    = 5 * time.Second
	MaxLocalBusDrain        = 5 * time.Minute
	localBusRetryBase       = 100 * time.Millisecond
	localBusRetryMax        = 2 * time.Second
)

// ErrLocalBusFull is the admission failure of a full LocalBus (counted as
// rejected); ErrLocalBusClosed of a closed one.
var (
	ErrLocalBusFull   = errors.New("observability: local bus queue full")
	ErrLocalBusClosed = errors.New("observability: local bus closed")
)

// LocalBusConfig configures a LocalBus. Zero fields take the defaults.
type LocalBusConfig struct {
	// Exporters receive every signal, in order, from the bus's one
	// delivery goroutine (never from the traced operation).
	Exporters []ExporterDescriptor
	// MaxQueueEvents and MaxQueueBytes bound the signals queued or being
	// exported. Bytes are an estimate of the encoded signal (fixed part
	// plus attributes), not an encoding: the bound is what matters.
	MaxQueueEvents int
	MaxQueueBytes  int64
	// MaxAttempts bounds the export attempts of one signal to one
	// exporter; only retryable failures are retried, with backoff and the
	// exporter's Retry-After (capped).
	MaxAttempts int
}

// LocalBusStats counts every accepted signal into exactly one of Exported,
// ExportFailed or ClosedDropped (or still queued); Rejected signals were
// never accepted. The names are the JetStream publisher's.
type LocalBusStats struct {
	Accepted      uint64 `json:"accepted"`
	Exported      uint64 `json:"exported"`
	Retried       uint64 `json:"retried"`
	ExportFailed  uint64 `json:"export_failed"`
	Rejected      uint64 `json:"rejected"`
	ClosedDropped uint64 `json:"closed_dropped"`
	QueueEvents   int    `json:"queue_events"`
}

// Dropped is every signal that will never reach an exporter.
func (s LocalBusStats) Dropped() uint64 { return s.ExportFailed + s.Rejected + s.ClosedDropped }

// LocalBus is the in-process bounded signal bus of a process without NATS
// (a local adk eval run): the Tracer's AsyncSink, with the JetStream
// publisher's contract (bounded by items and bytes, never blocking the
// traced operation, every drop counted by reason), drained before exit.
// With no exporter it accepts nothing and counts nothing: there is no one
// to deliver to.
type LocalBus struct {
	cfg LocalBusConfig

	mu       sync.Mutex
	queue    []queued
	bytes    int64
	inflight int
	closed   bool
	idle     chan struct{} // closed when nothing is queued or in flight
	wake     chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	accepted, exported, retried, failed, rejected, closedDropped atomic.Uint64
}

type queued struct {
	s    Signal
	size int64
}

var _ AsyncSink = (*LocalBus)(nil)

// NewLocalBus validates cfg and starts the delivery goroutine; Close stops
// it.
func NewLocalBus(cfg LocalBusConfig) (*LocalBus, error) {
	if err := ValidateExporters(cfg.Exporters); err != nil {
		return nil, err
	}
	if cfg.MaxQueueEvents == 0 {
		cfg.MaxQueueEvents = DefaultLocalBusEvents
	}
	if cfg.MaxQueueBytes == 0 {
		cfg.MaxQueueBytes = DefaultLocalBusBytes
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultLocalBusAttempts
	}
	if cfg.MaxQueueEvents < 1 || cfg.MaxQueueEvents > 1<<20 || cfg.MaxQueueBytes < 1 || cfg.MaxQueueBytes > 1<<30 || cfg.MaxAttempts < 1 || cfg.MaxAttempts > 100 {
		return nil, &DescriptorError{Index: -1, Reason: "invalid_local_bus_bounds"}
	}
	b := &LocalBus{cfg: cfg, wake: make(chan struct{}, 1), idle: closedChan()}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if len(cfg.Exporters) > 0 {
		b.wg.Add(1)
		go b.loop()
	}
	return b, nil
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// estimateSize is a signal's approximate encoded size: the bound needs a
// number, and encoding each signal twice (here and in the exporter) would
// be most of the tracing cost.
func estimateSize(s Signal) int64 {
	switch x := s.(type) {
	case *SpanSignal:
		return 320 + 64*int64(len(x.Attributes))
	case *Envelope:
		return 384 + 64*int64(len(x.Metadata.Attributes))
	}
	return 512
}

// Enqueue implements AsyncSink: it admits s or fails fast.
func (b *LocalBus) Enqueue(s Signal) error {
	if len(b.cfg.Exporters) == 0 {
		return nil
	}
	n := estimateSize(s)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.rejected.Add(1)
		return ErrLocalBusClosed
	}
	if len(b.queue)+b.inflight+1 > b.cfg.MaxQueueEvents || b.bytes+n > b.cfg.MaxQueueBytes {
		b.mu.Unlock()
		b.rejected.Add(1)
		return ErrLocalBusFull
	}
	if len(b.queue) == 0 && b.inflight == 0 {
		b.idle = make(chan struct{})
	}
	b.queue = append(b.queue, queued{s, n})
	b.bytes += n
	b.mu.Unlock()
	b.accepted.Add(1)
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return nil
}

func (b *LocalBus) loop() {
	defer b.wg.Done()
	var batch []queued
	for {
		b.mu.Lock()
		batch = append(batch[:0], b.queue...)
		clear(b.queue)
		b.queue = b.queue[:0]
		b.inflight = len(batch)
		b.mu.Unlock()
		for i, q := range batch {
			if b.ctx.Err() != nil {
				b.closedDropped.Add(uint64(len(batch) - i))
				break
			}
			if b.export(q.s) {
				b.exported.Add(1)
			} else if b.ctx.Err() != nil {
				b.closedDropped.Add(1)
			} else {
				b.failed.Add(1)
			}
			b.mu.Lock()
			b.inflight--
			b.bytes -= q.size
			b.mu.Unlock()
		}
		clear(batch)
		b.mu.Lock()
		b.inflight = 0
		if len(b.queue) == 0 {
			select {
			case <-b.idle:
			default:
				close(b.idle)
			}
		}
		b.mu.Unlock()
		select {
		case <-b.ctx.Done():
			return
		case <-b.wake:
		}
	}
}

// export sends s to every exporter; it reports whether all took it.
func (b *LocalBus) export(s Signal) bool {
	ok := true
	for i := range b.cfg.Exporters {
		ex := &b.cfg.Exporters[i]
		done := false
		for attempt := 1; attempt <= b.cfg.MaxAttempts && !done; attempt++ {
			ctx, cancel := context.WithTimeout(b.ctx, ex.timeout())
			err := ex.Exporter.Export(ctx, s)
			cancel()
			if err == nil {
				done = true
				break
			}
			var r retryabler
			if !errors.As(err, &r) || !r.Retryable() || attempt == b.cfg.MaxAttempts {
				break
			}
			delay := min(localBusRetryMax, localBusRetryBase<<(attempt-1))
			var ee *ExportError
			if errors.As(err, &ee) && ee.RetryAfter > 0 {
				delay = min(localBusRetryMax, ee.RetryAfter)
			}
			b.retried.Add(1)
			t := time.NewTimer(delay)
			select {
			case <-b.ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
		}
		ok = ok && done
	}
	return ok
}

// Drain waits until every accepted signal was delivered or counted, or ctx
// ends (its error).
func (b *LocalBus) Drain(ctx context.Context) error {
	b.mu.Lock()
	idle := b.idle
	b.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the bus: an export in progress is cancelled and every signal
// not yet delivered is counted as closed_dropped. Call Drain first.
func (b *LocalBus) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
	b.mu.Lock()
	n := len(b.queue)
	b.queue, b.bytes, b.inflight = nil, 0, 0
	b.mu.Unlock()
	b.closedDropped.Add(uint64(n))
}

// Stats returns the counters.
func (b *LocalBus) Stats() LocalBusStats {
	b.mu.Lock()
	q := len(b.queue) + b.inflight
	b.mu.Unlock()
	return LocalBusStats{
		Accepted: b.accepted.Load(), Exported: b.exported.Load(), Retried: b.retried.Load(),
		ExportFailed: b.failed.Load(), Rejected: b.rejected.Load(), ClosedDropped: b.closedDropped.Load(),
		QueueEvents: q,
	}
}
