package tracenode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func span(trace, run string, i int) *observability.SpanSignal {
	return &observability.SpanSignal{
		Schema: 2, Signal: "span", Phase: "start", Name: "gen_ai.chat", Kind: "client",
		TraceID: trace, SpanID: fmt.Sprintf("%016x", i+1), TraceFlags: 1, StartTimeUnixNano: int64(i+1) * 1e6,
		Attributes: observability.Attributes{"gen_ai.operation.name": "chat", "run_id": run},
	}
}

func TestNode_IngestsAndAnswersAuthenticatedQueries(t *testing.T) {
	srv := bustest.Start(t, bus.ServerConfig{})
	st := srv.SignalStream(t, bus.SignalStreamConfig{})
	nc := srv.NC
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := tracestore.Open(tracestore.Config{Dir: t.TempDir(), Small: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	node, err := tracenode.Start(ctx, tracenode.Config{Name: "a", Conn: nc, Store: store,
		Auth: tracenode.NewTokens(map[string]string{"tok-alice": "alice", "tok-bob": "bob"}), MaxQueryWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)

	pub, err := bus.NewPublisher(nc, bus.PublisherConfig{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	for i := range 10 {
		if err := pub.Enqueue(span("0af7651916cd43dd8448eb211c80319c", "run-1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(ctx)
	// The query's min_sequence wait is 200 ms here (for the timeout case
	// below), which a loaded CI machine can exceed: wait for the apply
	// first, so the query checks what it answers, not how fast.
	testutil.WaitFor(t, 10*time.Second, "node applied the batch", func() bool { return store.AppliedSeq() >= info.State.LastSeq })
	reply, err := tracenode.Query(ctx, nc, tracenode.QueryRequest{Token: "tok-alice", Selector: map[string]string{"run_id": "run-1"}, MinSequence: info.State.LastSeq})
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.Page.Events) != 10 || reply.AppliedSequence < info.State.LastSeq {
		t.Fatalf("page %+v", reply.Page)
	}
	// Another principal sees nothing; no token and a bad token are refused and counted.
	reply, err = tracenode.Query(ctx, nc, tracenode.QueryRequest{Token: "tok-bob", Selector: map[string]string{"run_id": "run-1"}})
	if err != nil || len(reply.Page.Events) != 0 {
		t.Fatalf("bob: %v %v", reply, err)
	}
	for _, tok := range []string{"", "tok-mallory"} {
		_, err = tracenode.Query(ctx, nc, tracenode.QueryRequest{Token: tok})
		if tracestore.ErrorCode(err) != tracenode.CodeUnauthenticated {
			t.Fatalf("token %q: %v", tok, err)
		}
	}
	if s := node.Stats(); s.AuthRejected != 2 {
		t.Fatalf("stats %+v", s)
	}
	// Coded store errors travel with their gap.
	after := uint64(1) << 60
	_, err = tracenode.Query(ctx, nc, tracenode.QueryRequest{Token: "tok-alice", AfterCursor: &after})
	var se *tracestore.Error
	if !errors.As(err, &se) || se.Code != tracestore.CodeCursorAhead || se.Fields.Gap == nil {
		t.Fatalf("cursor ahead: %v", err)
	}
	// min_sequence beyond the stream times out, bounded.
	_, err = tracenode.Query(ctx, nc, tracenode.QueryRequest{Token: "tok-alice", MinSequence: 1 << 40})
	if tracestore.ErrorCode(err) != tracenode.CodeMinSequenceTimeout {
		t.Fatalf("min_sequence: %v", err)
	}
}

// TestNode_ReadsCompressedAndPlainBatches: a stream written by an older
// adk (S2 file blocks, plain batch envelopes) keeps its messages when it
// is switched to the current configuration, and the node stores the old
// plain batches and the publisher's S2-compressed ones alike. A body that
// would decode past the message bound is counted as malformed and skipped
// without stopping the node.
func TestNode_ReadsCompressedAndPlainBatches(t *testing.T) {
	srv := bustest.Start(t, bus.ServerConfig{})
	srv.SignalStream(t, bus.SignalStreamConfig{Compression: bus.SignalCompressionS2})
	nc, js := srv.NC, srv.JS
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const trace = "0af7651916cd43dd8448eb211c80319c"

	// The older adk's messages: plain envelopes, no encoding header.
	for i := range 3 {
		if _, err := js.Publish(ctx, "adk.signal.alice", spanBatch(t, trace, i)); err != nil {
			t.Fatal(err)
		}
	}
	// A restart with this adk switches the stream to its configuration.
	st, err := bus.EnsureSignalStream(ctx, js, bus.SignalStreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.Config.Compression != jetstream.NoCompression || info.State.Msgs != 3 {
		t.Fatalf("stream after the update: %v %+v", err, info)
	}
	// A bomb: an S2 body that decodes to 2 MiB, over the 1 MiB bound.
	bomb := nats.NewMsg("adk.signal.alice")
	bomb.Header.Set(bus.SignalEncodingHeader, bus.SignalEncodingS2)
	raw, _ := bus.EncodeSignalBatch(bus.SignalBatch{Records: []bus.SignalRecord{{Kind: bus.RecordObservability, Data: make([]byte, 2<<20)}}})
	bomb.Data = s2.Encode(nil, raw)
	if _, err := js.PublishMsg(ctx, bomb); err != nil {
		t.Fatal(err)
	}
	// This adk's publisher: one compressed batch of many spans.
	pub, err := bus.NewPublisher(nc, bus.PublisherConfig{Principal: "alice", BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	for i := 3; i < 60; i++ {
		if err := pub.Enqueue(span(trace, "run-1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	compressed := 0
	for seq := uint64(5); seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(bus.SignalEncodingHeader) == bus.SignalEncodingS2 {
			compressed++
		}
	}
	if compressed == 0 {
		t.Fatal("the publisher sent no compressed batch")
	}

	store, err := tracestore.Open(tracestore.Config{Dir: t.TempDir(), Small: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	node, err := tracenode.Start(ctx, tracenode.Config{Name: "a", Conn: nc, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	if err := store.WaitApplied(ctx, info.State.LastSeq); err != nil {
		t.Fatal(err)
	}
	p, err := store.Query("alice", tracestore.Selector{"trace_id": trace}, tracestore.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 60 {
		t.Fatalf("%d events stored, want 60", len(p.Events))
	}
	for i, e := range p.Events {
		var got struct{ Event observability.SpanSignal }
		if err := json.Unmarshal(e, &got); err != nil || got.Event.SpanID != fmt.Sprintf("%016x", i+1) {
			t.Fatalf("event %d: %s (%v)", i, e, err)
		}
	}
	var s tracenode.Stats // the counters may lag the store's apply a moment
	testutil.WaitFor(t, 10*time.Second, "the node's counters", func() bool {
		s = node.Stats()
		return s.Applied >= info.State.LastSeq
	})
	if s.MalformedBatches != 1 || s.Applied != info.State.LastSeq {
		t.Fatalf("stats %+v", s)
	}
}

func TestLoadTokens(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens")
	content := "# comment\n" + tracenode.HashToken("secret-1") + " alice\n\n"
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := tracenode.LoadTokens(p)
	if err != nil {
		t.Fatal(err)
	}
	if pr, ok := tok.Principal("secret-1"); !ok || pr != "alice" {
		t.Fatal("known token")
	}
	if _, ok := tok.Principal("secret-2"); ok {
		t.Fatal("unknown token accepted")
	}
	_ = os.WriteFile(p, []byte("nothex alice\n"), 0o600)
	if _, err := tracenode.LoadTokens(p); err == nil {
		t.Fatal("bad file accepted")
	}
}

// TestNode_CatchesUpFromACopyOfAPeersStoreOnceTheStreamHasRolled: the
// stream holds only its last messages (MaxMsgs), so a node started on an
// empty store gets only those and counts the rest as lost to it; a node
// started on a copy of a stopped peer's store directory resumes at the
// peer's applied sequence and then holds exactly what the peer holds
// (store/DESIGN.md, "Catching up").
func TestNode_CatchesUpFromACopyOfAPeersStoreOnceTheStreamHasRolled(t *testing.T) {
	srv := bustest.Start(t, bus.ServerConfig{})
	srv.SignalStream(t, bus.SignalStreamConfig{MaxMsgs: 4})
	nc, js := srv.NC, srv.JS
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const trace = "0af7651916cd43dd8448eb211c80319c"
	publish := func(i int) uint64 {
		t.Helper()
		ack, err := js.Publish(ctx, "adk.signal.alice", spanBatch(t, trace, i))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	type running struct {
		dir   string
		store *tracestore.Store
		node  *tracenode.Node
	}
	start := func(name, dir string) *running {
		t.Helper()
		st, err := tracestore.Open(tracestore.Config{Dir: dir, Small: true})
		if err != nil {
			t.Fatal(err)
		}
		n, err := tracenode.Start(ctx, tracenode.Config{Name: name, Conn: nc, Store: st})
		if err != nil {
			_ = st.Close()
			t.Fatal(err)
		}
		r := &running{dir: dir, store: st, node: n}
		t.Cleanup(func() { r.node.Stop(); _ = r.store.Close() })
		return r
	}
	events := func(r *running, seq uint64) []string {
		t.Helper()
		if err := r.store.WaitApplied(ctx, seq); err != nil {
			t.Fatal(err)
		}
		p, err := r.store.Query("alice", tracestore.Selector{"trace_id": trace}, tracestore.QueryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(p.Events))
		for i, e := range p.Events {
			out[i] = string(e)
		}
		return out
	}

	a := start("a", t.TempDir())
	var last uint64
	for i := range 10 {
		last = publish(i)
		// The stream keeps 4 messages: the peer must apply each one before
		// the next can push it out, or it sees a gap of its own.
		if err := a.store.WaitApplied(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(events(a, last)); got != 10 {
		t.Fatalf("peer holds %d events, want 10", got)
	}

	// A new node on an empty store: the stream starts at sequence 7.
	b := start("b", t.TempDir())
	if got := len(events(b, last)); got != 4 {
		t.Fatalf("new node holds %d events, want the stream's 4", got)
	}
	// The node counts a group as applied after the store's apply returns,
	// and the store wakes WaitApplied inside it: the counters may lag the
	// events by a moment.
	var s tracenode.Stats
	testutil.WaitFor(t, 10*time.Second, "the new node's counters", func() bool {
		s = b.node.Stats()
		return s.Applied >= 4
	})
	if s.StreamGapMessages != 6 || s.Applied != 4 {
		t.Fatalf("new node: %+v, want 6 sequences lost and 4 applied", s)
	}

	// Catching up: stop the peer, copy its directory, start both.
	a.node.Stop()
	if err := a.store.Close(); err != nil {
		t.Fatal(err)
	}
	c := &running{dir: t.TempDir()}
	if err := os.CopyFS(c.dir, os.DirFS(a.dir)); err != nil {
		t.Fatal(err)
	}
	a = start("a", a.dir)
	c = start("c", c.dir)
	for i := 10; i < 13; i++ {
		last = publish(i)
	}
	want := events(a, last)
	if got := events(c, last); len(want) != 13 || !slices.Equal(got, want) {
		t.Fatalf("the copy holds %d events, the peer %d; want the same 13", len(got), len(want))
	}
	testutil.WaitFor(t, 10*time.Second, "the copy's counters", func() bool {
		s = c.node.Stats()
		return s.Applied >= 3
	})
	if s.StreamGapMessages != 0 || s.Applied != 3 {
		t.Fatalf("copy: %+v, want no loss and 3 applied", s)
	}
}

// retryLog closes retried at the first "retrying" record a node logs.
type retryLog struct {
	slog.Handler
	once    *sync.Once
	retried chan struct{}
}

func (retryLog) Enabled(context.Context, slog.Level) bool { return true }

func (h retryLog) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "retrying") {
		h.once.Do(func() { close(h.retried) })
	}
	return nil
}

// TestNode_StartWaitsForTheStream: a node started before ADK_SIGNALS
// exists (or while NATS restarts and its JetStream API does not answer)
// retries its set-up within Start's context instead of failing on the
// first unanswered request, and then consumes what is published.
func TestNode_StartWaitsForTheStream(t *testing.T) {
	srv := bustest.Start(t, bus.ServerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := tracestore.Open(tracestore.Config{Dir: t.TempDir(), Small: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h := retryLog{Handler: slog.DiscardHandler, once: new(sync.Once), retried: make(chan struct{})}
	type started struct {
		node *tracenode.Node
		err  error
	}
	done := make(chan started, 1)
	go func() {
		n, err := tracenode.Start(ctx, tracenode.Config{Name: "late", Conn: srv.NC, Store: store, Logger: slog.New(h)})
		done <- started{n, err}
	}()
	select {
	case <-h.retried: // the first attempt found no stream
	case s := <-done:
		if s.node != nil {
			s.node.Stop()
		}
		t.Fatalf("Start returned before the stream existed: %v", s.err)
	}
	srv.SignalStream(t, bus.SignalStreamConfig{})
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(s.node.Stop)
	pub, err := bus.NewPublisher(srv.NC, bus.PublisherConfig{Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	for i := range 3 {
		if err := pub.Enqueue(span("0af7651916cd43dd8448eb211c80319c", "run-late", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for store.AppliedSeq() < 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("nothing applied: %v", ctx.Err())
		case <-time.After(10 * time.Millisecond): // polling with a deadline
		}
	}
}

// TestNode_PullsExpireWithinPullExpiry: a pull that reaches no consumer
// leader (the first pull on a consumer whose first leader is still being
// elected: NATS answers no responders, which the client drops) is
// replaced only once its heartbeats are missed. The node's pulls must ask
// for PullExpiry and heartbeats at least twice within it, not the client's
// default 30 s expiry, in which such a node ingested nothing
// (TestClusterStoreNodeKilledMidIngestCatchesUpWithoutLossOrDuplicates
// under load).
func TestNode_PullsExpireWithinPullExpiry(t *testing.T) {
	srv := bustest.Start(t, bus.ServerConfig{})
	srv.SignalStream(t, bus.SignalStreamConfig{})
	pulls, err := srv.NC.SubscribeSync("$JS.API.CONSUMER.MSG.NEXT." + bus.SignalStreamName + "." + tracenode.ConsumerName("p"))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	store, err := tracestore.Open(tracestore.Config{Dir: t.TempDir(), Small: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	node, err := tracenode.Start(ctx, tracenode.Config{Name: "p", Conn: srv.NC, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	msg, err := pulls.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no pull request: %v", err)
	}
	var req struct {
		Expires   time.Duration `json:"expires"`
		Heartbeat time.Duration `json:"idle_heartbeat"`
	}
	if err := json.Unmarshal(msg.Data, &req); err != nil {
		t.Fatal(err)
	}
	if req.Expires != tracenode.PullExpiry || req.Heartbeat <= 0 || 2*req.Heartbeat > tracenode.PullExpiry {
		t.Fatalf("pull request %s: want expires %v with heartbeats at least twice within it", msg.Data, tracenode.PullExpiry)
	}
}

// TestNode_RepullsADeliveryItsClientNeverSaw: a message JetStream
// delivered to the node's consumer that never reached the node (nats.go
// drops a delivery its iterator has no room for: store/DESIGN.md,
// "Delivery gaps") shows as a jump in the consumer's delivery sequence.
// The node must pull it again from the stream, not apply on past it:
// before the check it applied the next message, counted the lost one as
// a stream gap and never held it (the redelivery after AckWait is below
// its applied sequence, so ignored). A second pull on the node's
// consumer takes one delivery here, which makes the loss deterministic.
func TestNode_RepullsADeliveryItsClientNeverSaw(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rig := newDeliveryRig(t, ctx)
	nc, store, publish := rig.srv.NC, rig.store, rig.publish
	// Small pulls: the server serves them and the test's in turn.
	node, err := tracenode.Start(ctx, tracenode.Config{Name: "g", Conn: nc, Store: store, FetchBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)

	_, next := publishUntilStolen(t, ctx, nc, store, "g", publish)
	last := publish(next)
	if err := store.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	rig.holdsAll(t, last)
	var s tracenode.Stats // the counters may lag the store's apply a moment
	testutil.WaitFor(t, 10*time.Second, "the node's counters", func() bool {
		s = node.Stats()
		return s.Applied >= last
	})
	if s.DeliveryGaps != 1 || s.StreamGapMessages != 0 {
		t.Fatalf("stats %+v, want one delivery gap and no stream gap", s)
	}
}

// TestNode_DeliveriesDroppedAfterAReconnectArePulledAgain: after its
// connection reconnects, a node's iterator sends a fresh pull while the
// server still holds the one from before, and the two deliver more than
// the iterator buffers (FetchBatch): nats.go drops the excess as a slow
// consumer, and reports it only to the connection's error handler. The
// node applied on past the dropped messages and never held them (a hole
// in 10 of 10 runs before it checked the delivery sequence); now it
// pulls them again, before or after its reconnect watcher's resync.
func TestNode_DeliveriesDroppedAfterAReconnectArePulledAgain(t *testing.T) {
	srv := bustest.Start(t, bus.ServerConfig{Port: -1})
	srv.SignalStream(t, bus.SignalStreamConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dropped := make(chan struct{}, 1)
	nc, err := srv.Connect(nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			select {
			case dropped <- struct{}{}:
			default:
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	store, err := tracestore.Open(tracestore.Config{Dir: t.TempDir(), Small: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	node, err := tracenode.Start(ctx, tracenode.Config{Name: "r", Conn: nc, Store: store, FetchBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	cons, err := srv.JS.Consumer(ctx, bus.SignalStreamName, tracenode.ConsumerName("r"))
	if err != nil {
		t.Fatal(err)
	}
	const trace = "0af7651916cd43dd8448eb211c80319c"
	var last uint64
	publish := func(n int) {
		t.Helper()
		var acks []jetstream.PubAckFuture
		for range n {
			ack, err := srv.JS.PublishAsync("adk.signal.alice", spanBatch(t, trace, int(last)))
			if err != nil {
				t.Fatal(err)
			}
			acks = append(acks, ack)
			last++
		}
		for _, ack := range acks {
			select {
			case <-ack.Ok():
			case err := <-ack.Err():
				t.Fatalf("publish: %v", err)
			case <-ctx.Done():
				t.Fatalf("publish: no ack: %v", ctx.Err())
			}
		}
		if err := store.WaitApplied(ctx, last); err != nil {
			t.Fatalf("apply %d: %v", last, err)
		}
	}
	// twoPulls waits a while for the pull from before the reconnect and
	// the iterator's new one to be both waiting on the server.
	twoPulls := func() bool {
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if ci, err := cons.Info(ctx); err == nil && ci.NumWaiting >= 2 {
				return true
			}
		}
		return false
	}
	publish(1)
	// The server may drop the old pull with the old connection, and the
	// node's reconnect watcher (once a second) replaces both with a fresh
	// consumer: then nothing overflows, and the test tries again once
	// that consumer is there.
	for attempt := 1; len(dropped) == 0; attempt++ {
		if attempt > 8 {
			t.Fatal("the client dropped nothing: the test no longer exercises the loss")
		}
		reconnects, at := nc.Stats().Reconnects, time.Now()
		if err := nc.ForceReconnect(); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 10*time.Second, "the reconnect", func() bool { return nc.Stats().Reconnects > reconnects && nc.IsConnected() })
		if twoPulls() {
			publish(60)
			continue
		}
		testutil.WaitFor(t, 10*time.Second, "the consumer the watcher restarts", func() bool {
			ci, err := cons.Info(ctx)
			return err == nil && ci.Created.After(at) && ci.NumWaiting >= 1
		})
	}
	p, err := store.Query("alice", tracestore.Selector{"trace_id": trace}, tracestore.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := node.Stats(); uint64(len(p.Events)) != last || s.StreamGapMessages != 0 {
		t.Fatalf("the store holds %d events, the stream %d; stats %+v", len(p.Events), last, s)
	}
}

// publishUntilStolen sends a second pull to the named node's consumer,
// which takes one delivery the node then never sees (as when nats.go
// drops it), and publishes one message at a time, publish(0),
// publish(1), …, until that pull has taken one: the last one published.
// It returns that message's stream sequence and the next i to publish.
func publishUntilStolen(t *testing.T, ctx context.Context, nc *nats.Conn, store *tracestore.Store, node string, publish func(i int) uint64) (stolen uint64, next int) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, bus.SignalStreamName, tracenode.ConsumerName(node))
	if err != nil {
		t.Fatal(err)
	}
	waiting := func(n int) func() bool {
		return func() bool {
			ci, err := cons.Info(ctx)
			return err == nil && ci.NumWaiting >= n
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the node's pull", waiting(1))
	taken, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taken.Unsubscribe() })
	pull := fmt.Appendf(nil, `{"batch":1,"expires":%d}`, int64(time.Minute))
	if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+bus.SignalStreamName+"."+tracenode.ConsumerName(node), taken.Subject, pull); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the second pull", waiting(2))
	for i := range 20 {
		last := publish(i)
		var n int
		testutil.WaitFor(t, 10*time.Second, "the message applied or taken", func() bool {
			n, _, _ = taken.Pending()
			return n > 0 || store.AppliedSeq() >= last
		})
		if n > 0 {
			return last, i + 1
		}
	}
	t.Fatal("the second pull took no message")
	return 0, 0
}

// TestNode_PullsALostLastDeliveryAgainOnceIdle: a lost delivery with no
// later one to reveal the jump (the last before the stream goes quiet)
// was applied only at its redelivery after AckWait (5 min): a
// min_sequence query waited in vain and a trace looked incomplete
// meanwhile. Once the node has applied nothing for a second, it asks its
// consumer for the last delivery sent, sees one it never got, and pulls
// it again: within seconds, with nothing published after it. A second
// pull on the node's consumer takes the last delivery here. The node's
// later idle checks find nothing more, and ask at most once a second.
func TestNode_PullsALostLastDeliveryAgainOnceIdle(t *testing.T) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rig := newDeliveryRig(t, ctx)
	nc, st, store, publish := rig.srv.NC, rig.stream, rig.store, rig.publish
	var logs testutil.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node log:\n%s", logs.String())
		}
	})
	node, err := tracenode.Start(ctx, tracenode.Config{Name: "l", Conn: nc, Store: store, FetchBatch: 2,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)

	last, _ := publishUntilStolen(t, ctx, nc, store, "l", publish)
	taken := time.Now()
	// The old node applied it only after AckWait (5 min).
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := store.WaitApplied(wctx, last); err != nil {
		t.Fatalf("the lost last message (sequence %d) was not applied within 30 s: %v (applied %d; stats %+v)", last, err, store.AppliedSeq(), node.Stats())
	}
	t.Logf("the lost last message (sequence %d) applied %v after it was taken", last, time.Since(taken).Round(time.Millisecond))
	if info, err := st.Info(ctx); err != nil || info.State.LastSeq != last {
		t.Fatalf("stream: %v %+v, want nothing published after sequence %d", err, info, last)
	}
	rig.holdsAll(t, last)
	// Two more idle checks: the first is asked after the last apply, and
	// a gap it found would be counted before the second is asked (one
	// loop does both). The node, now whole, must find none.
	var s tracenode.Stats
	testutil.WaitFor(t, 10*time.Second, "the node's counters", func() bool {
		s = node.Stats()
		return s.Applied >= last && s.DeliveryGaps >= 1
	})
	checks := s.IdleChecks
	testutil.WaitFor(t, 60*time.Second, "two idle checks after the last apply", func() bool {
		s = node.Stats()
		return s.IdleChecks >= checks+2
	})
	if s.DeliveryGaps != 1 || s.StreamGapMessages != 0 || s.Applied != last || store.AppliedSeq() != last {
		t.Fatalf("stats %+v (applied %d), want one delivery gap, no stream gap, %d applied", s, store.AppliedSeq(), last)
	}
	if limit := uint64(time.Since(began)/time.Second) + 1; s.IdleChecks > limit {
		t.Fatalf("%d idle checks in %v: more than one a second", s.IdleChecks, time.Since(began))
	}
}

// deliveryRig is the delivery tests' set-up: a JetStream server with the
// signal stream, a store, and publish, which sends span i of one trace
// and returns its stream sequence.
type deliveryRig struct {
	srv     *bustest.Server
	stream  jetstream.Stream
	store   *tracestore.Store
	publish func(i int) uint64
}

const rigTrace = "0af7651916cd43dd8448eb211c80319c"

func newDeliveryRig(t *testing.T, ctx context.Context) *deliveryRig {
	t.Helper()
	r := &deliveryRig{srv: bustest.Start(t, bus.ServerConfig{})}
	r.stream = r.srv.SignalStream(t, bus.SignalStreamConfig{})
	store, err := tracestore.Open(tracestore.Config{Dir: t.TempDir(), Small: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	r.store = store
	r.publish = func(i int) uint64 {
		t.Helper()
		ack, err := r.srv.JS.Publish(ctx, "adk.signal.alice", spanBatch(t, rigTrace, i))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	return r
}

// holdsAll fails unless the store holds the trace's every event up to
// stream sequence last: no hole.
func (r *deliveryRig) holdsAll(t *testing.T, last uint64) {
	t.Helper()
	p, err := r.store.Query("alice", tracestore.Selector{"trace_id": rigTrace}, tracestore.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(p.Events)) != last {
		t.Fatalf("the store holds %d events, the stream %d: a hole", len(p.Events), last)
	}
}

// spanBatch is the signal message of one span (span(trace, "run-1", i)),
// as a publisher sends it.
func spanBatch(t *testing.T, trace string, i int) []byte {
	t.Helper()
	data, err := json.Marshal(span(trace, "run-1", i))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := bus.EncodeSignalBatch(bus.SignalBatch{Records: []bus.SignalRecord{{Kind: bus.RecordObservability, Data: data}}})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}
