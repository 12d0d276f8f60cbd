package tracenode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Defaults.
const (
	DefaultFetchBatch = 256
	// DefaultFetchBytes bounds the bytes of stream messages the client
	// buffers ahead of the prepare loop. Saturated batches are ~200 KB
	// (512 spans), so 256 messages were ~50 MB of a 512 MiB node's heap;
	// 8 MiB is ~40 of them, more than two apply groups
	// (tracestore.MaxApplyGroup) in flight.
	DefaultFetchBytes = 8 << 20
	// DefaultPrepareWorkers is the number of prepare workers.
	DefaultPrepareWorkers = 2
	// MaxPrepareWorkers bounds PrepareWorkers.
	MaxPrepareWorkers   = 16
	DefaultMaxQueryWait = 2 * time.Second
	// MaxQueryWaitLimit bounds how long a min_sequence query may wait.
	MaxQueryWaitLimit = 10 * time.Second
)

// Config configures a store node.
type Config struct {
	// Name identifies the node; its durable consumer is "adk-store-<Name>"
	// (a valid subject token).
	Name string
	// Conn is the node's NATS connection; the caller owns it.
	Conn *nats.Conn
	// Store is the node's trace store; the caller owns it and closes it
	// after Stop.
	Store *tracestore.Store
	// Auth maps bearer tokens to principals for the query service. Nil
	// serves no queries (ingest only).
	Auth Authenticator
	// MaxMsgBytes bounds one decoded stream message (default 1 MiB, the
	// stream's MaxMsgSize).
	MaxMsgBytes int
	// FetchBatch bounds messages buffered from the consumer (256).
	FetchBatch int
	// FetchBytes bounds their bytes (DefaultFetchBytes; at least
	// MaxMsgBytes, so that any message can be delivered).
	FetchBytes int
	// PrepareWorkers decode and project messages in parallel (2, ≤16);
	// they are applied in stream order all the same.
	PrepareWorkers int
	// MaxQueryWait bounds a min_sequence wait (2 s, ≤10 s).
	MaxQueryWait time.Duration
	Logger       *slog.Logger
}

// Stats are the node's local counters.
type Stats struct {
	Applied          uint64 `json:"applied_messages"`
	Redelivered      uint64 `json:"redelivered_ignored"`
	MalformedBatches uint64 `json:"malformed_batches"`
	ApplyFailures    uint64 `json:"apply_failures"`
	// StreamGapMessages counts stream sequences the node never received:
	// the stream discarded them (its limits) before the node applied
	// them (a message its client lost is pulled again: DeliveryGaps). A
	// new node on a stream that no longer starts at sequence 1 counts the
	// history it will never hold (store/DESIGN.md, "Catching up").
	StreamGapMessages uint64 `json:"stream_gap_messages"`
	// DeliveryGaps counts deliveries the node's client lost: jumps in the
	// consumer's delivery sequence (one per delivery, redeliveries
	// included), such as a message nats.go dropped because the
	// iterator's buffer was full. The stream still holds what was lost:
	// each gap restarts consumption at applied+1, so no message is
	// skipped (store/DESIGN.md, "Delivery gaps"). A lost last delivery,
	// with nothing after it to reveal the jump, is found by an idle check.
	DeliveryGaps uint64 `json:"delivery_gaps"`
	// IdleChecks counts the consumer-info requests that look for such a
	// lost last delivery: one once the node has applied nothing for a
	// second, then one per PullExpiry while it stays idle; none while it
	// applies.
	IdleChecks   uint64 `json:"idle_checks"`
	Queries      uint64 `json:"queries"`
	AuthRejected uint64 `json:"auth_rejected"`
	BadRequests  uint64 `json:"bad_requests"`
	// PrepareTime and ApplyTime are the wall time spent decoding and
	// projecting (summed over the prepare workers), and applying to
	// Badger.
	PrepareTime time.Duration `json:"prepare_ns"`
	ApplyTime   time.Duration `json:"apply_ns"`
}

// Node consumes ADK_SIGNALS into its store and serves adk.trace.v1.query
// in the queue group every node joins.
type Node struct {
	cfg   Config
	log   *slog.Logger
	js    jetstream.JetStream
	cons  jetstream.Consumer
	mu    sync.Mutex // guards iter and wakeIdle
	iter  jetstream.MessagesContext
	items chan *item // prepareLoop → applyLoop in stream order, bounded
	work  chan *item // prepareLoop → prepare workers, bounded
	svc   micro.Service
	wg    sync.WaitGroup

	// wakeIdle ends the context prepareLoop's Next waits with: watch's
	// request for an idle check.
	wakeIdle context.CancelFunc

	stopOnce sync.Once
	stopping chan struct{}
	life     context.Context // ends at Stop
	endLife  context.CancelFunc

	applied, redelivered, malformed, applyFailures atomic.Uint64
	streamGap, deliveryGaps, idleChecks            atomic.Uint64
	queries, authRejected, badRequests             atomic.Uint64
	prepareNS, applyNS                             atomic.Int64
}

// ConsumerName is the durable consumer name of a node.
func ConsumerName(node string) string { return "adk-store-" + node }

// Start creates or reconciles the node's durable consumer, starts the
// apply loop and registers the query service. ADK_SIGNALS must exist
// before ctx ends: Start retries its set-up until then.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := bus.ValidToken(cfg.Name); err != nil {
		return nil, fmt.Errorf("tracenode: name: %w", err)
	}
	if cfg.Conn == nil || cfg.Store == nil {
		return nil, errors.New("tracenode: Conn and Store are required")
	}
	if cfg.MaxMsgBytes <= 0 {
		cfg.MaxMsgBytes = int(bus.DefaultSignalMaxMsgSize)
	}
	if cfg.FetchBatch <= 0 {
		cfg.FetchBatch = DefaultFetchBatch
	}
	if cfg.FetchBytes <= 0 {
		cfg.FetchBytes = DefaultFetchBytes
	}
	cfg.FetchBytes = max(cfg.FetchBytes, cfg.MaxMsgBytes)
	if cfg.PrepareWorkers <= 0 {
		cfg.PrepareWorkers = DefaultPrepareWorkers
	}
	cfg.PrepareWorkers = min(cfg.PrepareWorkers, MaxPrepareWorkers)
	if cfg.MaxQueryWait <= 0 {
		cfg.MaxQueryWait = DefaultMaxQueryWait
	}
	cfg.MaxQueryWait = min(cfg.MaxQueryWait, MaxQueryWaitLimit)
	n := &Node{cfg: cfg, log: cfg.Logger, stopping: make(chan struct{})}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, err
	}
	n.js = js
	if n.cons, err = n.startConsumer(ctx, js); err != nil {
		return nil, err
	}
	if n.iter, err = n.cons.Messages(n.pullOpts()...); err != nil {
		return nil, fmt.Errorf("tracenode: consume: %w", err)
	}
	if cfg.Auth != nil {
		if err := n.serve(); err != nil {
			n.iter.Stop()
			return nil, err
		}
	}
	n.life, n.endLife = context.WithCancel(context.Background())
	n.items = make(chan *item, 4+2*cfg.PrepareWorkers)
	n.work = make(chan *item, 2*cfg.PrepareWorkers)
	n.wg.Add(3 + cfg.PrepareWorkers)
	go n.prepareLoop()
	go n.applyLoop()
	go n.watch()
	for range cfg.PrepareWorkers {
		go n.prepareWorker()
	}
	return n, nil
}

// startAttempt bounds one attempt of Start's consumer set-up, and
// startRetryPause is the pause between attempts.
const (
	startAttempt    = 5 * time.Second
	startRetryPause = time.Second
)

// startConsumer sets up the consumer for Start, retrying until ctx ends.
// A node may start while NATS restarts or before ADK_SIGNALS exists: a
// JetStream API request sent while the server was away, or before its
// JetStream was back, can go unanswered, and waiting on that one request
// for the whole of ctx made `adk store` exit (seen in a chaos run, a
// store restarted just before a NATS kill). Each attempt is bounded, and
// the last attempt's error is returned.
func (n *Node) startConsumer(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, startAttempt)
		c, err := n.consumer(actx, js)
		cancel()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		n.log.Warn("trace node: consumer set-up failed, retrying", "attempt", attempt, "err", err)
		t := time.NewTimer(startRetryPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// consumer (re)creates the node's durable consumer to deliver from the
// store's applied sequence + 1. The store, not the consumer's ack floor, is
// the truth: Badger writes are not fsynced, so after a crash the store may
// be behind what was acked, and messages a dead subscription held unacked
// would otherwise be redelivered after newer ones (and then skipped as
// already applied). Starting fresh from applied+1 keeps delivery in
// stream order.
func (n *Node) consumer(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	st, err := js.Stream(ctx, bus.SignalStreamName)
	if err != nil {
		return nil, fmt.Errorf("tracenode: stream %s: %w", bus.SignalStreamName, err)
	}
	name := ConsumerName(n.cfg.Name)
	if err := st.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("tracenode: reset consumer: %w", err)
	}
	applied := n.cfg.Store.AppliedSeq()
	cc := jetstream.ConsumerConfig{
		Durable:       name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       5 * time.Minute, // apply takes milliseconds; a redelivery means a hung node
		MaxAckPending: 4 * n.cfg.FetchBatch,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if applied > 0 {
		cc.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cc.OptStartSeq = applied + 1
	}
	c, err := st.CreateOrUpdateConsumer(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("tracenode: create consumer: %w", err)
	}
	return c, nil
}

// item is one message on its way from the prepare loop to the apply loop,
// or a resync marker. A worker sets prep and closes ready.
type item struct {
	msg    jetstream.Msg
	seq    uint64
	timeMS int64 // the message's stream timestamp
	prep   *tracestore.Prepared
	ready  chan struct{}
	marker chan struct{}
}

// prepareLoop pulls messages and hands each to the prepare workers, which
// decode and project it (the CPU-heavy, state-free half of an apply) ahead
// of applyLoop, and, in stream order, to applyLoop, which waits until its
// message is prepared. It owns the iterator and the resync.
//
// It checks every delivery's consumer sequence: JetStream numbers a
// consumer's deliveries 1, 2, 3, …, so a jump is a delivery this node's
// client never handed over, a message the stream still holds. Applying
// on would leave a hole that nothing fills (the lost message is
// redelivered only after AckWait, when it is below the applied sequence
// and ignored), so the node restarts the consumer at applied+1 instead.
//
// A lost last delivery has no later one to reveal it. When the node has
// applied nothing for a while, watch ends the context Next waits with,
// and the loop asks the consumer for the last delivery it sent: one this
// loop has not seen must arrive within deliveryWait, or it was lost, and
// the consumer restarts as after a jump.
func (n *Node) prepareLoop() {
	defer n.wg.Done()
	defer close(n.items)
	defer close(n.work)
	nextDelivery := uint64(1) // every iterator reads a freshly created consumer
	// sent is the last delivery the consumer had sent at an idle check;
	// while this loop has not seen it, Next waits at most deliveryWait.
	var sent uint64
	idle := n.armIdleWake()
	awaitSent := []jetstream.NextOpt{jetstream.NextMaxWait(deliveryWait)}
	for {
		opts := idle // built once per idle check: nothing per message
		if sent >= nextDelivery {
			opts = awaitSent
		}
		msg, err := n.iterator().Next(opts...)
		if err != nil {
			select {
			case <-n.stopping:
				return
			default:
			}
			switch {
			case errors.Is(err, context.Canceled): // watch: the node is idle
				idle = n.armIdleWake()
				sent = n.lastSentDelivery()
				continue
			case errors.Is(err, nats.ErrTimeout) && sent >= nextDelivery:
				n.deliveryGaps.Add(1)
				n.log.Warn("trace node: a delivery sent before the node went idle never reached it: restarting the consumer at the applied sequence",
					"first_missing_delivery", nextDelivery, "last_sent_delivery", sent)
				sent = 0
				n.iterator().Stop() // Next now returns ErrMsgIteratorClosed
				continue
			case !errors.Is(err, jetstream.ErrMsgIteratorClosed):
				continue // transient (heartbeats missed, reconnecting): the iterator recovers
			}
			// The iterator was stopped (a failed apply, a reconnect, a
			// delivery gap): restart the consumer at applied+1.
			if !n.restartConsumer() {
				return
			}
			nextDelivery, sent = 1, 0
			continue
		}
		md, err := msg.Metadata()
		if err != nil {
			_ = msg.Term()
			continue
		}
		if d := md.Sequence.Consumer; d > nextDelivery {
			n.deliveryGaps.Add(1)
			n.log.Warn("trace node: deliveries lost before they reached the node: restarting the consumer at the applied sequence",
				"first_missing_delivery", nextDelivery, "delivery", d, "stream_seq", md.Sequence.Stream)
			n.iterator().Stop() // Next now returns ErrMsgIteratorClosed
			continue
		}
		// A sequence below the expected one is a consumer whose new leader
		// numbers from its replicated state: its redeliveries are already
		// applied and ignored as such.
		nextDelivery = md.Sequence.Consumer + 1
		it := &item{msg: msg, seq: md.Sequence.Stream, timeMS: md.Timestamp.UnixMilli(), ready: make(chan struct{})}
		for _, ch := range [...]chan *item{n.work, n.items} {
			select {
			case ch <- it:
			case <-n.stopping:
				return
			}
		}
	}
}

// prepareWorker prepares the messages of n.work until prepareLoop closes
// it.
func (n *Node) prepareWorker() {
	defer n.wg.Done()
	for it := range n.work {
		t0 := time.Now()
		it.prep = n.prepare(it)
		n.prepareNS.Add(int64(time.Since(t0)))
		close(it.ready)
	}
}

func (n *Node) prepare(it *item) *tracestore.Prepared {
	msg := it.msg
	b := tracestore.Batch{Seq: it.seq, TimeMS: it.timeMS}
	principal, perr := bus.PrincipalFromSubject(msg.Subject())
	batch, derr := bus.DecodeSignalMessage(msg.Headers(), msg.Data(), n.cfg.MaxMsgBytes)
	if perr != nil || derr != nil {
		// Still applied (as an empty batch) so the sequence advances
		// identically on every node.
		n.malformed.Add(1)
	} else {
		b.Principal = principal
		b.Records = make([]tracestore.Record, len(batch.Records))
		for i, r := range batch.Records {
			b.Records[i] = tracestore.Record{Kind: r.Kind, Data: r.Data}
		}
	}
	return n.cfg.Store.Prepare(b)
}

// applyLoop applies prepared messages in stream order and acks each after
// its Badger write. The messages already queued behind the next one (at
// most tracestore.MaxApplyGroup) are applied with it in one write, so a
// loop that falls behind catches up with fewer, larger writes. After a
// failed apply it discards everything up to the prepare loop's resync
// marker: those messages are redelivered from applied+1.
func (n *Node) applyLoop() {
	defer n.wg.Done()
	failed := false
	var next *item // taken while gathering a group, handled first next round
	group := make([]*item, 0, tracestore.MaxApplyGroup)
	preps := make([]*tracestore.Prepared, 0, tracestore.MaxApplyGroup)
	for {
		it := next
		next = nil
		if it == nil {
			var ok bool
			if it, ok = <-n.items; !ok {
				return
			}
		}
		switch {
		case it.marker != nil:
			failed = false
			close(it.marker)
			continue
		case failed:
			continue
		case it.seq <= n.cfg.Store.AppliedSeq():
			n.redelivered.Add(1)
			_ = it.msg.Ack()
			continue
		}
		group = append(group[:0], it)
	gather:
		for len(group) < tracestore.MaxApplyGroup {
			select {
			case more, ok := <-n.items:
				if !ok {
					break gather
				}
				if more.marker != nil || more.seq <= n.cfg.Store.AppliedSeq() {
					next = more
					break gather
				}
				group = append(group, more)
			default:
				break gather
			}
		}
		prev := n.cfg.Store.AppliedSeq()
		for _, g := range group {
			if g.seq > prev+1 {
				n.streamGap.Add(g.seq - prev - 1)
				n.log.Error("the stream no longer holds messages this store has not applied: they are lost to this node",
					"first_missing", prev+1, "last_missing", g.seq-1)
			}
			prev = g.seq
		}
		preps = preps[:0]
		for _, g := range group {
			<-g.ready // a worker always finishes what it was given
			preps = append(preps, g.prep)
		}
		t0 := time.Now()
		_, err := n.cfg.Store.ApplyPreparedGroup(preps)
		n.applyNS.Add(int64(time.Since(t0)))
		if err != nil {
			n.applyFailures.Add(1)
			n.log.Error("apply signal batches", "first_seq", group[0].seq, "last_seq", group[len(group)-1].seq, "err", err)
			failed = true
			n.iterator().Stop()
			continue
		}
		n.applied.Add(uint64(len(group)))
		for _, g := range group {
			_ = g.msg.Ack()
		}
	}
}

// PullExpiry bounds each pull request of a node's iterator, and so how
// long a lost one goes unnoticed: the client pulls again once it has
// missed two heartbeats, sent every half expiry. A pull is lost when it
// reaches no consumer leader, as the first pull on a consumer whose first
// leader is still being elected can: NATS answers no responders, which
// the iterator drops, and nothing else tells it. With the client's
// default expiry (30 s) such a node ingested nothing for 30 s (seen under
// load in TestClusterStoreNodeKilledMidIngest…). Not shorter: a pull
// taken for lost while it was not (a process stalled longer than the
// expiry) is sent again beside the live one, and the two together can
// deliver more than the client buffers. An idle node sends one pull
// request per expiry.
const PullExpiry = 10 * time.Second

// pullOpts bound what the consumer's client buffers, in messages and
// bytes, and each pull request's life.
func (n *Node) pullOpts() []jetstream.PullMessagesOpt {
	return []jetstream.PullMessagesOpt{
		jetstream.PullMaxMessagesWithBytesLimit(n.cfg.FetchBatch, n.cfg.FetchBytes),
		jetstream.PullExpiry(PullExpiry),
	}
}

func (n *Node) iterator() jetstream.MessagesContext {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.iter
}

// The idle check (store/DESIGN.md, "Delivery gaps"). watch ticks every
// watchTick; a node that applied nothing between two ticks has been idle
// for at least one (an apply takes milliseconds), and watch asks
// prepareLoop for a check: one consumer-info request. While the node
// stays idle it asks again every idleRecheck: a lone message lost after
// the first check changes nothing the node can see, only the server
// knows. idleRecheck is PullExpiry, the period at which an idle iterator
// already sends a pull request. A node that applies something every tick
// asks nothing.
const (
	watchTick   = time.Second
	idleRecheck = PullExpiry
	// deliveryWait bounds how long a delivery the consumer reported sent
	// may take to reach the node before it counts as lost. JetStream
	// answers the info request and sends deliveries from different
	// goroutines (in a cluster over a route too), so a delivery may trail
	// the answer, by milliseconds; the bound allows for a loaded machine.
	deliveryWait = 2 * time.Second
)

// watch runs the node's timers on one ticker: it restarts consumption
// after a NATS reconnect, and it asks for idle checks.
//
// After a reconnect it restarts consumption at applied+1, through the
// same path as a failed apply (stopping the iterator makes prepareLoop
// resync). Acks in flight when the connection dropped are lost, and a
// server killed -9 forgets the acks it had not flushed: it then holds
// those messages as pending for the consumer's AckWait (5 min), so Lag
// and readiness stayed non-zero for five minutes after a NATS crash
// although the node had applied everything, and the redelivery would
// come after newer messages. A fresh consumer at applied+1 has no such
// pending messages.
func (n *Node) watch() {
	defer n.wg.Done()
	last := n.cfg.Conn.Stats().Reconnects
	applied, idleTicks := n.cfg.Store.AppliedSeq(), 0
	tick := time.NewTicker(watchTick)
	defer tick.Stop()
	for {
		select {
		case <-n.stopping:
			return
		case <-tick.C:
		}
		if r := n.cfg.Conn.Stats().Reconnects; r != last && n.cfg.Conn.IsConnected() {
			last = r
			n.log.Info("nats reconnected: restarting the store consumer at the applied sequence", "node", n.cfg.Name)
			n.iterator().Stop()
		}
		if a := n.cfg.Store.AppliedSeq(); a != applied {
			applied, idleTicks = a, 0
			continue
		}
		idleTicks++
		if idleTicks == 1 || idleTicks%int(idleRecheck/watchTick) == 0 {
			n.mu.Lock()
			if n.wakeIdle != nil {
				n.wakeIdle()
			}
			n.mu.Unlock()
		}
	}
}

// armIdleWake returns Next's options for prepareLoop: a fresh context,
// which watch ends to ask for an idle check.
func (n *Node) armIdleWake() []jetstream.NextOpt {
	ctx, cancel := context.WithCancel(n.life)
	n.mu.Lock()
	n.wakeIdle = cancel
	n.mu.Unlock()
	return []jetstream.NextOpt{jetstream.NextContext(ctx)}
}

// lastSentDelivery asks the node's consumer (by name: the one prepareLoop
// last created) for the last delivery it sent, 0 if it did not answer;
// the next idle check asks again.
func (n *Node) lastSentDelivery() uint64 {
	n.idleChecks.Add(1)
	ctx, cancel := context.WithTimeout(n.life, deliveryWait)
	defer cancel()
	ci, err := n.cons.Info(ctx)
	if err != nil {
		n.log.Debug("trace node: idle check: consumer info", "err", err)
		return 0
	}
	return ci.Delivered.Consumer
}

// restartConsumer waits until applyLoop has handled everything in flight
// (applied it, or discarded it after a failed apply), then restarts the
// consumer at applied+1. It returns false if the node is stopping.
func (n *Node) restartConsumer() bool {
	marker := make(chan struct{})
	select {
	case n.items <- &item{marker: marker}:
	case <-n.stopping:
		return false
	}
	select {
	case <-marker:
	case <-n.stopping:
		return false
	}
	return n.resync()
}

// resync restarts consumption at the store's applied sequence + 1. It
// returns false if the node is stopping.
func (n *Node) resync() bool {
	if n.cfg.Store.Failed() {
		// Its memory is ahead of its disk: consuming on would skip or
		// double-count. Fail stop; a restarted node rebuilds from disk
		// and resumes at its durable applied sequence.
		n.log.Error("trace store failed a write: this node stops consuming until it is restarted")
		return false
	}
	for {
		t := time.NewTimer(time.Second)
		select {
		case <-n.stopping:
			t.Stop()
			return false
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cons, err := n.consumer(ctx, n.js)
		cancel()
		if err == nil {
			var it jetstream.MessagesContext
			if it, err = cons.Messages(n.pullOpts()...); err == nil {
				n.mu.Lock()
				n.iter = it
				n.mu.Unlock()
				select {
				case <-n.stopping: // Stop may have stopped the old iterator only
					it.Stop()
					return false
				default:
				}
				return true
			}
		}
		n.log.Error("resync store consumer", "err", err)
	}
}

// Stop stops the query service and the apply loop and waits for them. The
// caller then closes the store and the connection.
func (n *Node) Stop() {
	n.stopOnce.Do(func() {
		close(n.stopping)
		n.endLife()
		if n.svc != nil {
			_ = n.svc.Stop()
		}
		n.iterator().Stop()
		n.wg.Wait()
	})
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{
		Applied: n.applied.Load(), Redelivered: n.redelivered.Load(), MalformedBatches: n.malformed.Load(),
		ApplyFailures: n.applyFailures.Load(), StreamGapMessages: n.streamGap.Load(), DeliveryGaps: n.deliveryGaps.Load(), IdleChecks: n.idleChecks.Load(), Queries: n.queries.Load(), AuthRejected: n.authRejected.Load(),
		BadRequests: n.badRequests.Load(), PrepareTime: time.Duration(n.prepareNS.Load()), ApplyTime: time.Duration(n.applyNS.Load()),
	}
}

// Store returns the node's store.
func (n *Node) Store() *tracestore.Store { return n.cfg.Store }
