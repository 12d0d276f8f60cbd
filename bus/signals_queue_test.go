package bus

import (
	"strconv"
	"testing"
	"time"
)

// TestPublisherQueue_StaysFIFOAcrossReuse drives the queue without a
// connection: batches are taken while signals keep arriving, so the taken
// front is reused (compacted) many times, and with drop_oldest the oldest
// are dropped from the head. Every signal comes out once, in order.
func TestPublisherQueue_StaysFIFOAcrossReuse(t *testing.T) {
	for _, policy := range []DropPolicy{DropReject, DropOldest} {
		t.Run(string(policy), func(t *testing.T) {
			cfg, err := PublisherConfig{Principal: "alice", MaxQueueEvents: 100, BatchSize: 7, DropPolicy: policy}.resolve()
			if err != nil {
				t.Fatal(err)
			}
			p := &Publisher{cfg: cfg, wake: make(chan struct{}, 1)}
			next, want := 0, 0
			for round := 0; round < 200; round++ {
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
					got, _ := strconv.Atoi(string(it.data))
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
