package testcluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/testcluster"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	streamName = "ORDERS"
	perPhase   = 100
)

// publishAcked publishes message k with Nats-Msg-Id "m-k", retrying
// transient failures (no stream leader during an election, timeouts) until
// deadline. The msg id makes retries safe: a retry of a message that was
// stored but whose ack was lost is deduplicated by the stream.
func publishAcked(t *testing.T, js jetstream.JetStream, k int, deadline time.Time) *jetstream.PubAck {
	t.Helper()
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ack, err := js.Publish(ctx, "orders.new", []byte(fmt.Sprintf("payload-%d", k)), jetstream.WithMsgID(fmt.Sprintf("m-%d", k)))
		cancel()
		if err == nil {
			return ack
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond) // back off between attempts, not synchronisation
	}
	t.Fatalf("publish %d: no ack before deadline: %v", k, lastErr)
	return nil
}

func streamInfo(t *testing.T, js jetstream.JetStream) (*jetstream.StreamInfo, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := js.Stream(ctx, streamName)
	if err != nil {
		return nil, err
	}
	return st.Info(ctx)
}

func TestClusterReplicatedStreamSurvivesNodeRestart(t *testing.T) {
	start := time.Now()
	c := testcluster.StartNATS(t, 3)
	t.Logf("cluster ready in %v", time.Since(start))

	admin, err := jetstream.New(c.ConnectAll(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.CreateStream(ctx, jetstream.StreamConfig{
		Name: streamName, Subjects: []string{"orders.>"}, Storage: jetstream.FileStorage,
		Replicas: 3, Duplicates: 2 * time.Minute,
	}); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}

	var leader int
	testutil.WaitFor(t, 10*time.Second, "a stream leader", func() bool {
		si, err := streamInfo(t, admin)
		if err != nil || si.Cluster == nil || si.Cluster.Leader == "" {
			return false
		}
		leader = c.Index(si.Cluster.Leader)
		return leader >= 0
	})
	// Publish through a node that stays up, so the client never reconnects.
	pubNode := (leader + 1) % c.Size()
	js, err := jetstream.New(c.Connect(t, pubNode))
	if err != nil {
		t.Fatal(err)
	}

	acked := map[int]uint64{} // message k -> acknowledged stream sequence
	record := func(k int, ack *jetstream.PubAck) {
		if ack.Stream != streamName {
			t.Fatalf("ack from stream %q", ack.Stream)
		}
		acked[k] = ack.Sequence
	}
	deadline := time.Now().Add(10 * time.Second)
	for k := range perPhase {
		record(k, publishAcked(t, js, k, deadline))
	}

	t.Logf("killing stream leader %s", c.Name(leader))
	c.Kill(leader)
	killedAt := time.Now()
	deadline = time.Now().Add(15 * time.Second)
	for k := perPhase; k < 2*perPhase; k++ {
		record(k, publishAcked(t, js, k, deadline))
	}
	t.Logf("published %d more with a node down in %v", perPhase, time.Since(killedAt))

	si, err := streamInfo(t, admin)
	if err != nil {
		t.Fatal(err)
	}
	if c.Index(si.Cluster.Leader) == leader {
		t.Fatalf("stream leader did not move off the killed node")
	}

	c.Restart(leader)
	restarted := c.Name(leader)
	srv := c.Server(leader).NATS()
	testutil.WaitFor(t, 15*time.Second, restarted+" caught up on the stream", func() bool {
		if !srv.JetStreamIsStreamCurrent("$G", streamName) {
			return false
		}
		si, err := streamInfo(t, admin)
		if err != nil || si.Cluster == nil {
			return false
		}
		for _, r := range si.Cluster.Replicas {
			if r.Name == restarted {
				return r.Current && r.Lag == 0
			}
		}
		return si.Cluster.Leader == restarted
	})

	// Make the restarted node the stream leader, so reading via it serves
	// from its own recovered store rather than a peer's.
	nc := c.Connect(t, leader)
	req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": restarted}})
	testutil.WaitFor(t, 15*time.Second, restarted+" to become stream leader", func() bool {
		si, err := streamInfo(t, admin)
		if err == nil && si.Cluster != nil && si.Cluster.Leader == restarted {
			return true
		}
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+streamName, req, time.Second)
		return false
	})

	// read drains the stream through an ordered consumer on nc. Consumer
	// creation and fetches can fail transiently right after a leader
	// change (no responders while the consumer moves); the caller retries.
	read := func(nc *nats.Conn) (map[string]uint64, uint64, error) {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, 0, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cons, err := js.OrderedConsumer(ctx, streamName, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return nil, 0, fmt.Errorf("ordered consumer: %w", err)
		}
		seen := map[string]uint64{}
		var lastSeq uint64
		for len(seen) < 2*perPhase {
			batch, err := cons.Fetch(50, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				return nil, 0, fmt.Errorf("fetch: %w", err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				md, err := m.Metadata()
				if err != nil {
					return nil, 0, err
				}
				p := string(m.Data())
				if prev, dup := seen[p]; dup {
					// Not transient: the stream holds a duplicate.
					t.Fatalf("%q at seq %d and %d", p, prev, md.Sequence.Stream)
				}
				seen[p] = md.Sequence.Stream
				lastSeq = md.Sequence.Stream
			}
			if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
				return nil, 0, fmt.Errorf("fetch: %w", err)
			}
			if n == 0 {
				break
			}
		}
		return seen, lastSeq, nil
	}
	readAll := func(nc *nats.Conn, via string) {
		t.Helper()
		var (
			seen    map[string]uint64
			lastSeq uint64
			err     error
		)
		testutil.WaitFor(t, 15*time.Second, "a complete read via "+via, func() bool {
			seen, lastSeq, err = read(nc)
			if err != nil {
				t.Logf("read via %s: %v (retrying)", via, err)
			}
			return err == nil
		})
		if len(seen) != 2*perPhase {
			t.Fatalf("via %s: read %d distinct messages, want %d", via, len(seen), 2*perPhase)
		}
		if lastSeq != uint64(2*perPhase) {
			t.Fatalf("via %s: last sequence %d, want %d (gaps or extra messages)", via, lastSeq, 2*perPhase)
		}
		for k, seq := range acked {
			p := fmt.Sprintf("payload-%d", k)
			if got, ok := seen[p]; !ok || got != seq {
				t.Fatalf("via %s: acked %q at seq %d, read at %d (present %v)", via, p, seq, got, ok)
			}
		}
	}
	readAll(nc, restarted)
	readAll(c.Connect(t, pubNode), c.Name(pubNode))
	t.Logf("total %v", time.Since(start))
}
