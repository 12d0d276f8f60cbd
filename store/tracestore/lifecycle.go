package tracestore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// MaxLifecycleInputBytes bounds one delivered lifecycle event.
const MaxLifecycleInputBytes = 64 << 10

// LifecycleSink takes an admitted workflow-lifecycle event for a principal
// into the ingest path: the node's publisher for that principal (so every
// store node applies it), or a local Append.
type LifecycleSink func(principal string, data []byte) error

// receivers are node-local: capabilities are minted by this store process
// and never replicated, so they may use the node's clock.
type receivers struct {
	ttl     time.Duration
	max     int
	now     func() time.Time
	sink    LifecycleSink
	mu      sync.Mutex
	byCap   map[[32]byte]*receiver // sha256(capability) → receiver
	byPrinc map[[32]byte]*receiver // principal digest → its one receiver
	pending int
	queue   chan delivery
	stop    chan struct{}
	done    chan struct{}
}

type receiver struct {
	capHash   [32]byte
	digest    [32]byte
	principal string
	expiresAt time.Time // renewed while the owner is alive
	ownerDone <-chan struct{}
}

type delivery struct {
	principal string
	data      []byte
}

func newReceivers(o Options, now func() time.Time, sink LifecycleSink) *receivers {
	r := &receivers{ttl: o.LifecycleReceiverTTL, max: o.MaxLifecyclePending, now: now, sink: sink,
		byCap: map[[32]byte]*receiver{}, byPrinc: map[[32]byte]*receiver{},
		queue: make(chan delivery, o.MaxLifecyclePending), stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

// run is the delivery worker: it hands admitted events to the sink one at
// a time, so delivery never blocks the caller.
func (r *receivers) run() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case d := <-r.queue:
			if r.sink != nil {
				_ = r.sink(d.principal, d.data) // the sink counts its own failures
			}
			r.mu.Lock()
			r.pending--
			r.mu.Unlock()
		}
	}
}

func (r *receivers) close() {
	close(r.stop)
	<-r.done
}

// NewLifecycleReceiver mints (or renews and returns) the principal's one
// lifecycle receiver capability: an opaque random token. It stays valid
// while owner is not done, and for the receiver TTL after the owner's
// last renewal. Only its hash is kept.
func (s *Store) NewLifecycleReceiver(owner context.Context, principal string) (string, error) {
	if s.closed.Load() {
		return "", ErrClosed
	}
	if !validPrincipal(principal) {
		return "", errCode(CodeInvalidPrincipal, "principal must be 1..256 bytes of UTF-8")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", errCode(CodeUnavailable, "no randomness")
	}
	capability := "lcr_" + hex.EncodeToString(raw[:])
	rv := &receiver{capHash: sha256.Sum256([]byte(capability)), digest: Digest(principal), principal: principal,
		ownerDone: owner.Done()}
	r := s.recv
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.byPrinc[rv.digest]; old != nil { // one per principal: the new capability replaces it
		delete(r.byCap, old.capHash)
	}
	rv.expiresAt = r.now().Add(r.ttl)
	r.byCap[rv.capHash] = rv
	r.byPrinc[rv.digest] = rv
	return capability, nil
}

// validLocked reports whether rv is live at now, renewing it while its
// owner is alive and pruning it once expired.
func (r *receivers) validLocked(rv *receiver, now time.Time, pruned func()) bool {
	select {
	case <-rv.ownerDone:
	default:
		rv.expiresAt = now.Add(r.ttl)
		return true
	}
	if now.Before(rv.expiresAt) {
		return true
	}
	delete(r.byCap, rv.capHash)
	if r.byPrinc[rv.digest] == rv {
		delete(r.byPrinc, rv.digest)
	}
	pruned()
	return false
}

// DeliverLifecycle admits one workflow-lifecycle event through a
// capability without blocking. A forged or expired capability is rejected
// and counted (lifecycle_capability_rejected) and takes no admission slot;
// an input over 64 KiB, or one beyond max_lifecycle_pending admitted but
// undelivered events, is dropped and counted (lifecycle_delivery_dropped).
// The returned error says which; the event itself is never echoed.
func (s *Store) DeliverLifecycle(capability string, data []byte) error {
	if s.closed.Load() {
		return ErrClosed
	}
	r := s.recv
	h := sha256.Sum256([]byte(capability))
	r.mu.Lock()
	rv := r.byCap[h]
	if rv == nil || !r.validLocked(rv, r.now(), func() { s.local.receiversPruned.Add(1) }) {
		r.mu.Unlock()
		s.local.capRejected.Add(1)
		return errCode(CodeLifecycleCapabilityRejected, "unknown or expired capability")
	}
	if len(data) > MaxLifecycleInputBytes || r.pending >= r.max {
		r.mu.Unlock()
		s.local.deliveryDropped.Add(1)
		return errCode(CodeLifecycleDeliveryDropped, "input too large or admission full")
	}
	r.pending++
	r.mu.Unlock()
	r.queue <- delivery{principal: rv.principal, data: data} // never blocks: capacity is max
	return nil
}

// PruneLifecycleReceivers removes expired receivers and returns how many.
func (s *Store) PruneLifecycleReceivers() int {
	r := s.recv
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	now := r.now()
	for _, rv := range r.byCap {
		r.validLocked(rv, now, func() { n++ })
	}
	s.local.receiversPruned.Add(uint64(n))
	return n
}

func (r *receivers) stats() (receivers, activeOwners, pending int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rv := range r.byCap {
		select {
		case <-rv.ownerDone:
		default:
			activeOwners++
		}
	}
	return len(r.byCap), activeOwners, r.pending
}
