package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/observability"
	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// DropPolicy decides what Enqueue does when the queue is full.
type DropPolicy string

// The contract's drop policies.
const (
	DropReject DropPolicy = "reject"      // refuse the new signal: ErrQueueFull
	DropNewest DropPolicy = "drop_newest" // drop the new signal: ErrSignalDropped
	DropOldest DropPolicy = "drop_oldest" // drop the oldest unsent signal, admit the new one
)

// JSErrCodeStreamStoreFailed is the JetStream error code of a publish the
// stream refused because a limit was reached under DiscardNew (10077);
// nats.go exports no constant for it.
const JSErrCodeStreamStoreFailed jetstream.ErrorCode = 10077

// DeliveryGuarantee is what the publisher promises: bounded best effort.
// Every signal it accepts is exported or counted under a reason.
const DeliveryGuarantee = "bounded_best_effort"

// PublisherConfig configures a signal Publisher. Zero fields take the
// contract's defaults (CONTRACTS §2.6); values above the contract's maxima
// are rejected.
type PublisherConfig struct {
	// Principal is bound into every batch as the subject token
	// adk.signal.<principal>. With NATS permissions the server enforces
	// that a user publishes only under its own principal.
	Principal string
	// MaxQueueEvents (4096, ≤1M) and MaxQueueBytes (16 MiB, ≤1 GiB) bound
	// queued plus in-flight plus retrying signals.
	MaxQueueEvents int
	MaxQueueBytes  int64
	// MaxEventBytes bounds one encoded signal (256 KiB, ≤16 MiB).
	MaxEventBytes int
	// BatchSize (32, ≤10000) and MaxBatchBytes (512 KiB) bound one
	// JetStream message; MaxBatchBytes must stay under the stream's
	// MaxMsgSize.
	BatchSize     int
	MaxBatchBytes int
	// MaxInflightBatches bounds unacknowledged batches (2, ≤128).
	MaxInflightBatches int
	// MaxAttempts bounds publish attempts of one batch (3, ≤100).
	MaxAttempts int
	// BatchTimeout bounds the wait for one publish ack (5 s, ≤300 s).
	BatchTimeout time.Duration
	// Retry delay = min(RetryMaxDelay, RetryBaseDelay·2^(attempt-1)),
	// defaults 100 ms and 5 s.
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	// MaxDrainWaiters bounds concurrent Drain calls (128).
	MaxDrainWaiters int
	// DropPolicy defaults to DropReject.
	DropPolicy DropPolicy
	// Metrics, when set, mirrors the counters as bus counters.
	Metrics *observability.Metrics
	// PoolMaxQueueBytes bounds the queued bytes of all the publishers of
	// one PublisherPool together (256 MiB, ≤4 GiB), so many principals
	// cannot each fill MaxQueueBytes. A lone Publisher ignores it.
	PoolMaxQueueBytes int64

	// shared is the pool's byte budget (nil for a lone Publisher).
	shared *queueBudget
}

// queueBudget is bytes shared by a pool's publishers.
type queueBudget struct {
	max  int64
	used atomic.Int64
}

func (b *queueBudget) take(n int64) bool {
	if b == nil {
		return true
	}
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *queueBudget) give(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

func (c PublisherConfig) resolve() (PublisherConfig, error) {
	bad := func(f, r string) (PublisherConfig, error) {
		return c, &ConfigError{Field: f, Reason: r}
	}
	if err := ValidToken(c.Principal); err != nil {
		return bad("Principal", err.Error())
	}
	def := func(v *int, d, hi int, name string) error {
		if *v == 0 {
			*v = d
		}
		if *v < 0 || *v > hi {
			return &ConfigError{Field: name, Reason: "out of range 1.." + strconv.Itoa(hi)}
		}
		return nil
	}
	defD := func(v *time.Duration, d, hi time.Duration, name string) error {
		if *v == 0 {
			*v = d
		}
		if *v < 0 || *v > hi {
			return &ConfigError{Field: name, Reason: "out of range"}
		}
		return nil
	}
	if c.MaxQueueBytes == 0 {
		c.MaxQueueBytes = 16 << 20
	}
	if c.MaxQueueBytes < 0 || c.MaxQueueBytes > 1<<30 {
		return bad("MaxQueueBytes", "out of range 1..1GiB")
	}
	if c.PoolMaxQueueBytes == 0 {
		c.PoolMaxQueueBytes = 256 << 20
	}
	if c.PoolMaxQueueBytes < 0 || c.PoolMaxQueueBytes > 4<<30 {
		return bad("PoolMaxQueueBytes", "out of range 1..4GiB")
	}
	if err := errors.Join(
		def(&c.MaxQueueEvents, 4096, 1_000_000, "MaxQueueEvents"),
		def(&c.MaxEventBytes, 256<<10, 16<<20, "MaxEventBytes"),
		def(&c.BatchSize, 32, 10_000, "BatchSize"),
		def(&c.MaxBatchBytes, 512<<10, 64<<20, "MaxBatchBytes"),
		def(&c.MaxInflightBatches, 2, 128, "MaxInflightBatches"),
		def(&c.MaxAttempts, 3, 100, "MaxAttempts"),
		def(&c.MaxDrainWaiters, 128, 4096, "MaxDrainWaiters"),
		defD(&c.BatchTimeout, 5*time.Second, 300*time.Second, "BatchTimeout"),
		defD(&c.RetryBaseDelay, 100*time.Millisecond, 60*time.Second, "RetryBaseDelay"),
		defD(&c.RetryMaxDelay, 5*time.Second, 300*time.Second, "RetryMaxDelay"),
	); err != nil {
		return c, err
	}
	if int64(c.MaxEventBytes) > c.MaxQueueBytes {
		return bad("MaxEventBytes", "must not exceed MaxQueueBytes")
	}
	if c.MaxEventBytes > c.MaxBatchBytes {
		return bad("MaxEventBytes", "must not exceed MaxBatchBytes")
	}
	switch c.DropPolicy {
	case "":
		c.DropPolicy = DropReject
	case DropReject, DropNewest, DropOldest:
	default:
		return bad("DropPolicy", "must be reject, drop_newest or drop_oldest")
	}
	return c, nil
}

// PublisherStats is a snapshot of the publisher's counters (CONTRACTS §2.6
// names) and queue state. Every accepted signal ends in exactly one of
// Exported, ExportFailed, PermanentFailures (which includes StreamRejected),
// DroppedOldest or ClosedDropped; the queue holds the rest.
type PublisherStats struct {
	Accepted          uint64 `json:"accepted"`
	Exported          uint64 `json:"exported"`
	FailedAttempts    uint64 `json:"failed_attempts"`
	Retried           uint64 `json:"retried"`
	ExportFailed      uint64 `json:"export_failed"`
	PermanentFailures uint64 `json:"permanent_failures"`
	StreamRejected    uint64 `json:"stream_rejected"`
	RetryDropped      uint64 `json:"retry_dropped"`
	Rejected          uint64 `json:"rejected"`
	DroppedNewest     uint64 `json:"dropped_newest"`
	DroppedOldest     uint64 `json:"dropped_oldest"`
	TooLarge          uint64 `json:"too_large"`
	ClosedDropped     uint64 `json:"closed_dropped"`
	QueueEvents       int    `json:"queue_events"`
	QueueBytes        int64  `json:"queue_bytes"`
	DrainWaiters      int    `json:"drain_waiters"`
	DeliveryGuarantee string `json:"delivery_guarantee"`
}

// pubItem is a queued signal: already the record a batch carries, and
// the tracer's Record it came as (EnqueueSignalRecord), released once the
// record is encoded into its batch or dropped.
type pubItem struct {
	kind string
	observability.Record
}

func (it *pubItem) kindData() (string, []byte) { return it.kind, it.Data }

// batchBufs holds encoded batch messages for reuse once they are settled
// (the connection copies a message when it is published).
var batchBufs = sync.Pool{New: func() any { return new([]byte) }}

type pubBatch struct {
	buf       *[]byte // msg's buffer, from batchBufs
	id        string
	items     []pubItem // until send encodes them into msg
	n         int       // signals in the batch
	bytes     int64
	attempt   int
	notBefore time.Time
	msg       []byte
	enc       string // msg's SignalEncodingHeader ("": plain)
}

type inflight struct {
	b   *pubBatch
	fut jetstream.PubAckFuture
}

type pubCounters struct {
	accepted, exported, failedAttempts, retried, exportFailed, permanent,
	streamRejected, retryDropped, rejected, droppedNewest, droppedOldest,
	tooLarge, closedDropped atomic.Uint64
}

// Publisher is the bounded asynchronous signal bus on top of JetStream. It
// implements observability.AsyncSink: Enqueue never blocks on the network.
// Signals are batched (several per JetStream message), at most
// MaxInflightBatches are unacknowledged, transient failures are retried
// with exponential backoff under the same Nats-Msg-Id (so JetStream
// deduplicates a retry of a batch that did land), and every outcome is
// counted. Delivery is bounded best effort.
//
// Lock order: mu only; it is never held across a publish or a wait.
type Publisher struct {
	cfg      PublisherConfig
	js       jetstream.JetStream
	subject  string
	idPrefix string

	mu           sync.Mutex
	pending      signalQueue // not yet in a batch, oldest first
	retries      []*pubBatch
	total        int   // pending + in flight + retrying
	totalBytes   int64 // their bytes
	idle         chan struct{}
	drainWaiters int
	closed       bool
	seq          uint64

	// batchItems is the dispatch loop's buffer for a batch's items:
	// they are released and cleared as soon as the batch is encoded.
	batchItems []pubItem

	wake  chan struct{}
	slots chan struct{}
	acks  chan inflight
	stop  chan struct{}
	wg    sync.WaitGroup
	c     pubCounters
}

var (
	_ observability.AsyncSink          = (*Publisher)(nil)
	_ observability.RecycledRecordSink = (*Publisher)(nil)
)

// NewPublisher starts a publisher on nc. The caller owns nc and must Close
// the publisher before closing it.
func NewPublisher(nc *nats.Conn, cfg PublisherConfig) (*Publisher, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncTimeout(cfg.BatchTimeout),
		jetstream.WithPublishAsyncMaxPending(cfg.MaxInflightBatches+1))
	if err != nil {
		return nil, fmt.Errorf("bus: publisher: %w", err)
	}
	subj, err := SignalBatchSubject(cfg.Principal)
	if err != nil {
		return nil, err
	}
	p := &Publisher{
		cfg:      cfg,
		js:       js,
		subject:  subj,
		idPrefix: nuid.Next() + "-",
		wake:     make(chan struct{}, 1),
		slots:    make(chan struct{}, cfg.MaxInflightBatches),
		acks:     make(chan inflight, cfg.MaxInflightBatches),
		stop:     make(chan struct{}),
	}
	p.wg.Add(2)
	go p.dispatchLoop()
	go p.ackLoop()
	return p, nil
}

// Principal is the principal the publisher's batches are bound to.
func (p *Publisher) Principal() string { return p.cfg.Principal }

// Enqueue implements observability.AsyncSink for v1 envelopes and v2 spans.
func (p *Publisher) Enqueue(s observability.Signal) error {
	data, err := encodeSignal(s)
	if err != nil {
		return fmt.Errorf("bus: encode signal: %w", err)
	}
	return p.EnqueueRecord(RecordObservability, data)
}

// EnqueueSignalJSON implements observability.RecordSink: a tracer's
// record of one signal (the publisher's principal already names the
// job's owner, so the job id is not used).
func (p *Publisher) EnqueueSignalJSON(_ string, data []byte) error {
	return p.EnqueueRecord(RecordObservability, data)
}

// EnqueueSignalRecord implements observability.RecycledRecordSink: the
// record is released once its batch is encoded (the batch message is a
// copy), or when it is dropped. A refused record stays the caller's.
func (p *Publisher) EnqueueSignalRecord(_ string, r observability.Record) error {
	return p.enqueue(pubItem{kind: RecordObservability, Record: r})
}

// EnqueueRecord admits one JSON signal of the given record kind
// (RecordObservability or RecordWorkflowLifecycle). It is the entry point
// for receivers that already hold encoded signals (an OTLP receiver
// publishing spans for its authenticated principal). The data must not be
// modified afterwards.
func (p *Publisher) EnqueueRecord(kind string, data []byte) error {
	return p.enqueue(pubItem{kind: kind, Record: observability.Record{Data: data}})
}

func (p *Publisher) enqueue(it pubItem) error {
	if len(it.Data) > p.cfg.MaxEventBytes {
		p.count(&p.c.tooLarge, observability.BusRejected, 1)
		return ErrSignalTooLarge
	}
	n := int64(len(it.Data))
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrPublisherClosed
	}
	for p.total+1 > p.cfg.MaxQueueEvents || p.totalBytes+n > p.cfg.MaxQueueBytes || !p.cfg.shared.take(n) {
		switch {
		case p.cfg.DropPolicy == DropOldest && p.pending.len() > 0:
			var one [1]pubItem
			p.pending.popInto(one[:])
			old := one[0]
			old.Release()
			p.removeLocked(1, int64(len(old.Data)))
			p.count(&p.c.droppedOldest, observability.BusDroppedOldest, 1)
			continue
		case p.cfg.DropPolicy == DropNewest:
			p.mu.Unlock()
			p.count(&p.c.droppedNewest, observability.BusDroppedNewest, 1)
			return ErrSignalDropped
		}
		p.mu.Unlock()
		p.count(&p.c.rejected, observability.BusRejected, 1)
		return ErrQueueFull
	}
	p.pending.push(it)
	if p.total == 0 {
		p.idle = make(chan struct{})
	}
	p.total++
	p.totalBytes += n
	if p.cfg.Metrics != nil {
		p.cfg.Metrics.AddBusQueue(1)
	}
	p.mu.Unlock()
	p.count(&p.c.accepted, observability.BusAccepted, 1)
	p.signal()
	return nil
}

// Drain waits until every accepted signal is exported or accounted for, or
// ctx ends (ErrDrainTimeout). At most MaxDrainWaiters may wait at once
// (ErrDrainWaiterLimit).
func (p *Publisher) Drain(ctx context.Context) error {
	p.mu.Lock()
	if p.total == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.drainWaiters >= p.cfg.MaxDrainWaiters {
		p.mu.Unlock()
		return ErrDrainWaiterLimit
	}
	p.drainWaiters++
	idle := p.idle
	p.mu.Unlock()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ErrDrainTimeout
	}
	p.mu.Lock()
	p.drainWaiters--
	p.mu.Unlock()
	return err
}

// Close stops the publisher. Signals not yet exported are counted as
// closed_dropped; call Drain first to deliver them.
func (p *Publisher) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
	p.mu.Lock()
	n := p.total
	p.pending.reset()
	p.retries = nil
	p.removeLocked(n, p.totalBytes)
	p.mu.Unlock()
	if n > 0 {
		p.count(&p.c.closedDropped, observability.BusExportFailed, uint64(n))
	}
	// No js.CleanupPublisher here: in nats.go v1.55 it can strand the
	// library's reconnect watcher on a nil channel. That goroutine ends
	// when the caller closes the connection.
}

// Stats returns a snapshot of the counters and queue state.
func (p *Publisher) Stats() PublisherStats {
	p.mu.Lock()
	q, qb, w := p.total, p.totalBytes, p.drainWaiters
	p.mu.Unlock()
	return PublisherStats{
		Accepted: p.c.accepted.Load(), Exported: p.c.exported.Load(),
		FailedAttempts: p.c.failedAttempts.Load(), Retried: p.c.retried.Load(),
		ExportFailed: p.c.exportFailed.Load(), PermanentFailures: p.c.permanent.Load(),
		StreamRejected: p.c.streamRejected.Load(), RetryDropped: p.c.retryDropped.Load(),
		Rejected: p.c.rejected.Load(), DroppedNewest: p.c.droppedNewest.Load(),
		DroppedOldest: p.c.droppedOldest.Load(), TooLarge: p.c.tooLarge.Load(),
		ClosedDropped: p.c.closedDropped.Load(),
		QueueEvents:   q, QueueBytes: qb, DrainWaiters: w,
		DeliveryGuarantee: DeliveryGuarantee,
	}
}

func (p *Publisher) count(c *atomic.Uint64, bc observability.BusCounter, n uint64) {
	c.Add(n)
	if p.cfg.Metrics != nil {
		_ = p.cfg.Metrics.AddBus(bc, n)
	}
}

func (p *Publisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// removeLocked takes n finished signals out of the queue accounting and
// wakes drain waiters when it becomes empty.
func (p *Publisher) removeLocked(n int, bytes int64) {
	p.total -= n
	p.totalBytes -= bytes
	p.cfg.shared.give(bytes)
	if p.cfg.Metrics != nil && n != 0 {
		p.cfg.Metrics.AddBusQueue(-n)
	}
	if p.total == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
}

// takeBatch returns the next batch to send: a due retry first, else up to
// BatchSize pending signals. Without one it returns how long until a retry
// is due (0: wait for a wake-up).
func (p *Publisher) takeBatch(now time.Time) (*pubBatch, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var wait time.Duration
	for i, b := range p.retries {
		if !b.notBefore.After(now) {
			p.retries = append(p.retries[:i], p.retries[i+1:]...)
			return b, 0
		}
		if d := b.notBefore.Sub(now); wait == 0 || d < wait {
			wait = d
		}
	}
	if p.pending.len() == 0 {
		return nil, wait
	}
	n, bytes := 0, int64(0)
	for n < p.pending.len() && n < p.cfg.BatchSize {
		sz := int64(len(p.pending.at(n).Data))
		if n > 0 && bytes+sz > int64(p.cfg.MaxBatchBytes) {
			break
		}
		bytes += sz
		n++
	}
	if cap(p.batchItems) < n {
		p.batchItems = make([]pubItem, n)
	}
	items := p.batchItems[:n]
	p.pending.popInto(items)
	p.seq++
	return &pubBatch{id: p.idPrefix + strconv.FormatUint(p.seq, 10), items: items, n: n, bytes: bytes}, 0
}

func (p *Publisher) dispatchLoop() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case p.slots <- struct{}{}:
		case <-p.stop:
			return
		}
		var b *pubBatch
		for b == nil {
			var wait time.Duration
			b, wait = p.takeBatch(time.Now())
			if b != nil {
				break
			}
			var tc <-chan time.Time
			if wait > 0 {
				timer.Reset(wait)
				tc = timer.C
			}
			select {
			case <-p.wake:
			case <-tc:
			case <-p.stop:
				return
			}
			timer.Stop()
		}
		p.send(b)
	}
}

func (p *Publisher) send(b *pubBatch) {
	if b.msg == nil {
		// The plain envelope goes into a pooled scratch buffer and is
		// compressed once into the batch's own, which a retry resends as
		// it is (same bytes, same Nats-Msg-Id). Both come from the shared
		// pool, so an idle publisher of a PublisherPool holds neither.
		// Each buffer is sized for the compressed form, so any pooled one
		// serves either role.
		scratch := batchBufs.Get().(*[]byte)
		growBatchBuf(scratch, signalBatchSize(b.items))
		raw := appendSignalBatch((*scratch)[:0], b.items)
		// The records are in raw now: give their memory back (a retry
		// resends msg) and keep no reference to it.
		for i := range b.items {
			b.items[i].Release()
			b.items[i] = pubItem{}
		}
		b.items = nil
		b.buf = batchBufs.Get().(*[]byte)
		growBatchBuf(b.buf, len(raw))
		b.msg, b.enc = compressSignalBatch((*b.buf)[:0], raw)
		if cap(raw) <= 8<<20 {
			*scratch = raw[:0]
			batchBufs.Put(scratch)
		}
	}
	b.attempt++
	msg := nats.NewMsg(p.subject)
	msg.Data = b.msg
	msg.Header.Set(jetstream.MsgIDHeader, b.id)
	if b.enc != "" {
		msg.Header.Set(SignalEncodingHeader, b.enc)
	}
	fut, err := p.js.PublishMsgAsync(msg)
	if err != nil {
		p.finish(b, err, true)
		return
	}
	p.acks <- inflight{b: b, fut: fut} // never blocks: bounded by slots
}

func (p *Publisher) ackLoop() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var f inflight
		select {
		case f = <-p.acks:
		case <-p.stop:
			return
		}
		timer.Reset(p.cfg.BatchTimeout + time.Second) // backstop behind the library's own timeout
		select {
		case <-f.fut.Ok():
			p.finish(f.b, nil, false)
		case err := <-f.fut.Err():
			p.finish(f.b, err, true)
		case <-timer.C:
			p.finish(f.b, jetstream.ErrAsyncPublishTimeout, true)
		case <-p.stop:
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// growBatchBuf makes *buf hold the compressed form of n plain bytes (plus
// a quarter, so a pooled buffer fits the next batches too).
func growBatchBuf(buf *[]byte, n int) {
	if m := s2.MaxEncodedLen(n); m > n {
		n = m
	}
	if cap(*buf) < n {
		*buf = make([]byte, 0, n+n/4)
	}
}

// release returns a settled batch's message buffer to the pool.
func (b *pubBatch) release() {
	if b.buf != nil && cap(b.msg) <= 8<<20 {
		*b.buf = b.msg[:0]
		batchBufs.Put(b.buf)
	}
	b.buf, b.msg = nil, nil
}

// finish settles one attempt of a batch and frees its in-flight slot. The
// outcome is counted before the batch leaves the queue accounting, so a
// Drain that sees the queue empty sees every counter final.
func (p *Publisher) finish(b *pubBatch, err error, sent bool) {
	defer func() { <-p.slots }()
	n := uint64(b.n)
	if err == nil {
		b.release()
		p.count(&p.c.exported, observability.BusExported, n)
		p.mu.Lock()
		p.removeLocked(b.n, b.bytes)
		p.mu.Unlock()
		return
	}
	p.count(&p.c.failedAttempts, observability.BusFailedAttempts, 1)
	if sent && transientPublishError(err) && b.attempt < p.cfg.MaxAttempts {
		delay := p.cfg.RetryBaseDelay << (b.attempt - 1)
		if delay <= 0 || delay > p.cfg.RetryMaxDelay {
			delay = p.cfg.RetryMaxDelay
		}
		b.notBefore = time.Now().Add(delay)
		p.mu.Lock()
		p.retries = append(p.retries, b)
		p.mu.Unlock()
		p.count(&p.c.retried, observability.BusRetried, n)
		p.signal()
		return
	}
	b.release()
	switch {
	case IsStreamRejection(err):
		p.c.streamRejected.Add(n)
		p.count(&p.c.permanent, observability.BusPermanentFailures, n)
	case sent && transientPublishError(err):
		p.count(&p.c.exportFailed, observability.BusExportFailed, n)
	default:
		p.count(&p.c.permanent, observability.BusPermanentFailures, n)
	}
	p.mu.Lock()
	p.removeLocked(b.n, b.bytes)
	p.mu.Unlock()
}

// IsStreamRejection reports whether err is JetStream refusing a publish
// because a stream limit was reached under DiscardNew.
func IsStreamRejection(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr != nil && apiErr.ErrorCode == JSErrCodeStreamStoreFailed
}

// transientPublishError: the server did not answer (timeout, no
// responders, connection trouble), so the batch may or may not have landed
// and a retry under the same Nats-Msg-Id is safe. A server answer with an
// error code (limits, size, permissions) is permanent.
func transientPublishError(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr != nil && apiErr.ErrorCode != 0 {
		return false
	}
	return true
}
