package bus

import (
	"strconv"
	"testing"
	"time"

	"github.com/fadcedab/adk/observability"
)

// TestPublisherQueue_StaysFIFOAcrossReuse drives the queue without a
// connection: batches are taken while signals keep arriving, across many
// chunk boundaries, and with drop_oldest the oldest are dropped from the
// head. Every signal comes out once, in order.
func TestPublisherQueue_StaysFIFOAcrossReuse(t *testing.T) {
	for _, policy := range []DropPolicy{DropReject, DropOldest} {
		t.Run(string(policy), func(t *testing.T) {
			cfg, err := PublisherConfig{Principal: "alice", MaxQueueEvents: 100, BatchSize: 7, DropPolicy: policy}.resolve()
			if err != nil {
				t.Fatal(err)
			}
			p := &Publisher{cfg: cfg, wake: make(chan struct{}, 1)}
			next, want := 0, 0
			for round := 0; round < 1000; round++ {
				for range 13 {
					err := p.EnqueueRecord(RecordObservability, []byte(strconv.Itoa(next)))
					if err == nil {
						next++
					} else if err != ErrQueueFull {
						t.Fatal(err)
					}
				}
				b, _ := p.takeBatch(time.Now())
				if b == nil {
					continue
				}
				for _, it := range b.items {
					got, _ := strconv.Atoi(string(it.Data))
					if policy == DropOldest && got > want {
						want = got // the ones between were dropped, oldest first
					}
					if got != want {
						t.Fatalf("round %d: got signal %d, want %d", round, got, want)
					}
					want++
				}
				p.mu.Lock()
				p.removeLocked(len(b.items), b.bytes)
				p.mu.Unlock()
			}
			if st := p.Stats(); policy == DropOldest && st.DroppedOldest == 0 || policy == DropReject && st.Rejected == 0 {
				t.Fatalf("the queue never filled: %+v", st)
			}
		})
	}
}

func TestSignalQueue_DrainsAndRefills(t *testing.T) {
	var q signalQueue
	next, want := 0, 0
	for _, step := range []struct{ push, pop int }{{1, 1}, {queueChunk, queueChunk}, {3 * queueChunk, 2*queueChunk + 5}, {7, queueChunk + 2}, {queueChunk + 1, 0}, {0, queueChunk + 1}} {
		for range step.push {
			q.push(pubItem{Record: observability.Record{Data: []byte(strconv.Itoa(next))}})
			next++
		}
		for i := range q.len() {
			if got, _ := strconv.Atoi(string(q.at(i).Data)); got != want+i {
				t.Fatalf("at(%d) = %d, want %d", i, got, want+i)
			}
		}
		out := make([]pubItem, step.pop)
		q.popInto(out)
		for _, it := range out {
			if got, _ := strconv.Atoi(string(it.Data)); got != want {
				t.Fatalf("popped %d, want %d", got, want)
			}
			want++
		}
		if q.len() != next-want {
			t.Fatalf("len %d, want %d", q.len(), next-want)
		}
	}
	if q.len() != 0 || len(q.chunks) != 0 {
		t.Fatalf("not empty: %d items, %d chunks", q.len(), len(q.chunks))
	}
}
