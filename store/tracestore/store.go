package tracestore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"
	"github.com/vmihailenco/msgpack/v5"
)

// Record is one signal of a batch: its kind and JSON document.
type Record struct {
	Kind string
	Data []byte
}

// Batch is one ADK_SIGNALS message as the store applies it.
type Batch struct {
	// Seq is the JetStream stream sequence: > 0 and increasing. A batch
	// at or below the applied sequence is ignored (redelivery).
	Seq uint64
	// TimeMS is the message's stream timestamp; retention is measured
	// against it, never against the node's clock.
	TimeMS int64
	// Principal is the authenticated principal (the subject token).
	Principal string
	Records   []Record
}

// Result is the outcome of one record: its cursor, or a store *Error.
type Result struct {
	Cursor uint64
	Err    error
}

// Config configures Open.
type Config struct {
	// Dir is the Badger directory; empty with InMemory for tests.
	Dir      string
	InMemory bool
	// Small sizes Badger for tests (8 MiB memtables and caches); the
	// default sizing is for a 2-core, 24 GiB node.
	Small bool
	// Badger overrides the sizing field by field (zero keeps the default).
	Badger  BadgerTuning
	Options Options
	// LifecycleSink receives events admitted through lifecycle receivers.
	// Nil appends them locally (single-node use); a store node sets the
	// principal's publisher so every node applies them.
	LifecycleSink LifecycleSink
	// Clock drives lifecycle receiver TTLs only (node-local state); nil is
	// time.Now. Apply never reads it.
	Clock func() time.Time
}

// Counters are the store's cumulative counters (CONTRACTS §4 names). They
// are part of the replicated state: the same stream gives the same values.
type Counters struct {
	Accepted           uint64 `json:"accepted" msgpack:"accepted"`
	Rejected           uint64 `json:"rejected" msgpack:"rejected"`
	ContentRejected    uint64 `json:"content_rejected" msgpack:"content_rejected"`
	OversizedRejected  uint64 `json:"oversized_rejected" msgpack:"oversized_rejected"`
	CapacityEvictions  uint64 `json:"capacity_evictions" msgpack:"capacity_evictions"`
	RetentionEvictions uint64 `json:"retention_evictions" msgpack:"retention_evictions"`
	TombstonesPruned   uint64 `json:"tombstones_pruned" msgpack:"tombstones_pruned"`
	// Node-local lifecycle receiver counters.
	LifecycleCapabilityRejected uint64 `json:"lifecycle_capability_rejected" msgpack:"-"`
	LifecycleReceiversPruned    uint64 `json:"lifecycle_receivers_pruned" msgpack:"-"`
	LifecycleDeliveryDropped    uint64 `json:"lifecycle_delivery_dropped" msgpack:"-"`
}

// storeLayout is the layout (store/DESIGN.md) this build writes: layout
// 3 is layout 2's keys with message values in record format 2 or 3
// (records.go). Open refuses a data directory of another layout, except
// layout 2, whose format 1 values this build still reads: it is upgraded
// in place (the meta key says 3 from the first apply on), so a build that
// reads only layout 2 refuses the directory instead of skipping the
// values it cannot read.
const storeLayout = 3

// upgradableLayout is the older layout Open reads and upgrades.
const upgradableLayout = 2

type meta struct {
	Layout         int      `msgpack:"layout"`
	Applied        uint64   `msgpack:"applied"`
	NextPID        uint32   `msgpack:"next_pid"`
	EvictedThrough uint64   `msgpack:"evicted_through"`
	Latest         uint64   `msgpack:"latest"`
	Counters       Counters `msgpack:"counters"`
}

type principalRec struct {
	Digest         []byte `msgpack:"digest"`
	EvictedThrough uint64 `msgpack:"evicted_through"`
	Latest         uint64 `msgpack:"latest"`
	// Tombstone: the principal's events are all evicted and its watermark
	// expires at TombstoneMS + retention (stream time).
	Tombstone   bool  `msgpack:"tombstone,omitempty"`
	TombstoneMS int64 `msgpack:"tombstone_ms,omitempty"`
}

type liveRef struct {
	cursor uint64
	size   uint32
}

type liveEvent struct {
	cursor uint64
	ts     int64
	pid    uint32
}

// pview is what queries read of a principal: replaced, never mutated.
type pview struct {
	evictedThrough, latest, oldest uint64
	events                         int
	bytes                          int64
}

type principal struct {
	pid    uint32
	digest [32]byte
	// apply-owned
	evictedThrough, latest uint64
	q                      []liveRef
	qh                     int
	bytes                  int64
	// tomb is set while the principal has no live events and still keeps
	// its watermark (evictedThrough, latest): the contract's expiring
	// tombstone, created at stream time tombMS.
	tomb   bool
	tombMS int64
	// shared
	view atomic.Pointer[pview]
}

func (p *principal) live() int { return len(p.q) - p.qh }

func (p *principal) publish() {
	v := &pview{evictedThrough: p.evictedThrough, latest: p.latest, events: p.live(), bytes: p.bytes}
	if p.live() > 0 {
		v.oldest = p.q[p.qh].cursor
	}
	p.view.Store(v)
}

// Store is the principal-scoped trace store on Badger. Apply is called by
// one owner (the store node) in stream order; Query and Status may run
// concurrently with it and never take the apply lock.
//
// Lock order: applyMu, then mu. mu is never held across Badger I/O.
type Store struct {
	opts Options
	db   *badger.DB

	applyMu sync.Mutex // the single writer
	m       meta
	byPID   []*principal
	global  []liveEvent
	gh      int
	tombs   tombHeap
	events  int
	bytes   int64

	mu       sync.RWMutex
	byDigest map[[32]byte]*principal
	appliedC chan struct{} // closed and replaced after every apply

	applied atomic.Uint64
	status  atomic.Pointer[Status]
	closed  atomic.Bool
	failed  atomic.Bool // a write failed: see ErrFailed
	// writeFault, set by tests only, fails a group's write before it
	// reaches Badger (a disk error; closing Badger under a write hangs it).
	writeFault func() error
	local      localCounters

	recv   *receivers
	gcStop chan struct{}
	gcDone chan struct{}
}

type localCounters struct {
	capRejected, receiversPruned, deliveryDropped atomic.Uint64
}

// Open opens (or creates) a store and rebuilds its in-memory order index
// from the stored events.
func Open(cfg Config) (*Store, error) {
	o, err := cfg.Options.resolve()
	if err != nil {
		return nil, err
	}
	bo, tuning, err := badgerOptions(cfg)
	if err != nil {
		return nil, err
	}
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("tracestore: open badger: %w", err)
	}
	s := &Store{opts: o, db: db, byDigest: map[[32]byte]*principal{}, appliedC: make(chan struct{}),
		gcStop: make(chan struct{}), gcDone: make(chan struct{})}
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, err
	}
	now := cfg.Clock
	if now == nil {
		now = time.Now
	}
	sink := cfg.LifecycleSink
	if sink == nil {
		sink = func(principal string, data []byte) error {
			_, err := s.Append(principal, KindWorkflowLifecycle, data, now().UnixMilli())
			return err
		}
	}
	s.recv = newReceivers(o, now, sink)
	pageOut := time.Duration(0)
	if !cfg.InMemory {
		pageOut = tuning.PageOutInterval
	}
	go s.gcLoop(cfg.InMemory, bo.Dir, pageOut)
	return s, nil
}

// valueLogGCInterval is how often the value log's garbage is reclaimed. A
// saturated node writes a 32 MiB value-log file every ~20 s (format 3,
// ~85 B per span): with the 5 minutes this was, up to 20 dead files
// waited on disk, several times the live data. A round that finds no file
// worth rewriting reads only Badger's discard statistics.
const valueLogGCInterval = 30 * time.Second

// gcLoop reclaims value-log garbage every valueLogGCInterval and, every
// pageOut (> 0), hands the value log's mapped pages back to the kernel.
func (s *Store) gcLoop(inMemory bool, dir string, pageOut time.Duration) {
	defer close(s.gcDone)
	t := time.NewTicker(valueLogGCInterval)
	defer t.Stop()
	var po <-chan time.Time
	if pageOut > 0 {
		// /proc/self/maps names files by their absolute, resolved path.
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				dir = real
			}
			pt := time.NewTicker(pageOut)
			defer pt.Stop()
			po = pt.C
		}
	}
	for {
		select {
		case <-s.gcStop:
			return
		case <-t.C:
			if !inMemory {
				for s.db.RunValueLogGC(0.5) == nil {
				}
			}
		case <-po:
			pageOutMapped(dir, ".vlog", ".sst")
		}
	}
}

// Close stops the store; later calls fail with trace_store_unavailable.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.gcStop)
	<-s.gcDone
	s.recv.close()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.db.Close()
}

func (s *Store) load() error {
	err := s.db.View(func(txn *badger.Txn) error {
		if it, err := txn.Get(metaKey); err == nil {
			if err := it.Value(func(v []byte) error { return msgpack.Unmarshal(v, &s.m) }); err != nil {
				return err
			}
			if s.m.Layout == 0 {
				s.m.Layout = 1 // layout 1 did not record its layout
			}
			if s.m.Layout != storeLayout && s.m.Layout != upgradableLayout {
				return fmt.Errorf("data directory has key layout %d, this build reads layouts %d and %d", s.m.Layout, upgradableLayout, storeLayout)
			}
			s.m.Layout = storeLayout
		} else if errors.Is(err, badger.ErrKeyNotFound) {
			s.m.Layout = storeLayout
		} else {
			return err
		}
		s.byPID = make([]*principal, s.m.NextPID)
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 100, Prefix: []byte{prefixPrincipal}})
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			var r principalRec
			if err := it.Item().Value(func(v []byte) error { return msgpack.Unmarshal(v, &r) }); err != nil {
				it.Close()
				return err
			}
			pid := binary.BigEndian.Uint32(k[1:])
			p := &principal{pid: pid, evictedThrough: r.EvictedThrough, latest: r.Latest, tomb: r.Tombstone, tombMS: r.TombstoneMS}
			copy(p.digest[:], r.Digest)
			if int(pid) >= len(s.byPID) {
				it.Close()
				return fmt.Errorf("tracestore: principal %d beyond next id", pid)
			}
			s.byPID[pid] = p
			s.byDigest[p.digest] = p
		}
		it.Close()
		// The order index comes from the manifests (small, in the LSM):
		// per principal in stream order, then merged into cursor order.
		it = txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256, Prefix: []byte{prefixManifest}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			pid, seq := binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint64(k[5:])
			var m manifest
			var ok bool
			if err := it.Item().Value(func(v []byte) error {
				m, ok = decodeManifest(v)
				return nil
			}); err != nil {
				return err
			}
			if !ok || int(pid) >= len(s.byPID) || s.byPID[pid] == nil {
				return fmt.Errorf("tracestore: corrupt manifest of message %d", seq)
			}
			p := s.byPID[pid]
			for _, r := range m.recs {
				c := Cursor(seq, int(r.idx))
				if c <= p.evictedThrough {
					continue // evicted, its message not yet wholly
				}
				p.q = append(p.q, liveRef{cursor: c, size: r.size})
				p.bytes += int64(r.size)
				s.global = append(s.global, liveEvent{cursor: c, ts: m.ts, pid: pid})
				s.events++
				s.bytes += int64(r.size)
			}
		}
		slices.SortFunc(s.global, func(x, y liveEvent) int { return cmp.Compare(x.cursor, y.cursor) })
		return nil
	})
	if err != nil {
		return fmt.Errorf("tracestore: load: %w", err)
	}
	for _, p := range s.byPID {
		if p != nil {
			if p.tomb && p.live() == 0 {
				s.tombs.push(tombEntry{ms: p.tombMS, pid: p.pid})
			}
			p.publish()
		}
	}
	s.applied.Store(s.m.Applied)
	s.publishStatus()
	return nil
}

// AppliedSeq is the last applied stream sequence.
func (s *Store) AppliedSeq() uint64 { return s.applied.Load() }

// WaitApplied waits until the store has applied seq or ctx ends.
func (s *Store) WaitApplied(ctx context.Context, seq uint64) error {
	for {
		s.mu.RLock()
		ch := s.appliedC
		s.mu.RUnlock()
		if s.applied.Load() >= seq {
			return nil
		}
		if s.closed.Load() {
			return ErrClosed
		}
		if s.failed.Load() {
			return ErrFailed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Digest returns the SHA-256 a principal is stored under.
func Digest(principal string) [32]byte { return sha256.Sum256([]byte(principal)) }

func validPrincipal(p string) bool {
	return len(p) >= 1 && len(p) <= 256 && utf8.ValidString(p)
}

// Append applies one record as its own batch at the next sequence: the
// in-process path for tests and single-node tools. timeMS stands in for
// the stream timestamp.
func (s *Store) Append(principal, kind string, data []byte, timeMS int64) (uint64, error) {
	for {
		res, err := s.Apply(Batch{Seq: s.AppliedSeq() + 1, TimeMS: timeMS, Principal: principal, Records: []Record{{Kind: kind, Data: data}}})
		if err != nil {
			return 0, err
		}
		if res != nil {
			return res[0].Cursor, res[0].Err
		}
		// A concurrent Append took this sequence: take the next one.
	}
}

// Apply applies one batch in one Badger write that also records Seq as
// applied. It is deterministic: it reads no clock and no randomness, so
// every node that applies the same stream holds the same state. The error
// is a storage failure; per-record rejections are in the results.
func (s *Store) Apply(b Batch) ([]Result, error) {
	return s.ApplyPrepared(s.Prepare(b))
}

// ApplyPrepared is Apply for a batch already prepared.
func (s *Store) ApplyPrepared(prep *Prepared) ([]Result, error) {
	res, err := s.ApplyPreparedGroup([]*Prepared{prep})
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0], nil
}

// MaxApplyGroup bounds the batches ApplyPreparedGroup writes at once.
const MaxApplyGroup = 16

// ApplyPreparedGroup applies consecutive prepared batches, in order, in
// one Badger write that also records the last one's sequence as applied
// (group commit: one write and one wait for several stream messages). The
// state is the state the batches give applied one by one; a batch at or
// below the applied sequence is skipped (nil results). At most
// MaxApplyGroup batches.
func (s *Store) ApplyPreparedGroup(preps []*Prepared) ([][]Result, error) {
	if len(preps) > MaxApplyGroup {
		return nil, fmt.Errorf("tracestore: %d batches in one apply group, at most %d", len(preps), MaxApplyGroup)
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if s.failed.Load() {
		return nil, ErrFailed
	}
	for i, prep := range preps {
		if seq := prep.b.Seq; seq >= 1<<(64-CursorIndexBits) || i > 0 && seq <= preps[i-1].b.Seq {
			return nil, fmt.Errorf("tracestore: sequence %d out of range or order", seq)
		}
	}
	results, err := s.applyGroup(preps)
	if err != nil {
		// The appliers have moved the in-memory state (order indexes,
		// quotas, watermarks, the applied sequence) past what reached the
		// disk: applying on top of it would skip or double-count the
		// redelivered messages. Fail stop; Open rebuilds from the disk.
		s.failed.Store(true)
		s.mu.Lock()
		close(s.appliedC) // wake WaitApplied: it answers ErrFailed
		s.appliedC = make(chan struct{})
		s.mu.Unlock()
		return nil, errors.Join(ErrFailed, err)
	}
	return results, nil
}

// Failed reports whether a write failed (ErrFailed): the store must be
// reopened.
func (s *Store) Failed() bool { return s.failed.Load() }

func (s *Store) applyGroup(preps []*Prepared) ([][]Result, error) {
	g := &applyGroup{wb: s.db.NewWriteBatch(), touched: map[*principal]bool{}, manifests: map[string][]byte{}}
	defer func() { g.wb.Cancel() }()
	// A group stays one Badger transaction (WriteBatch splits a larger
	// one, and the meta key must land with the data): it is committed in
	// parts once it holds half of what one transaction may.
	maxBytes, maxCount := s.db.MaxBatchSize()/2, s.db.MaxBatchCount()/2
	results := make([][]Result, len(preps))
	var last, committed uint64
	for i, prep := range preps {
		b := prep.b
		if b.Seq <= s.m.Applied {
			continue
		}
		if last > committed && (g.bytes >= maxBytes || g.count >= maxCount) {
			if err := s.commitGroup(g, last); err != nil {
				return nil, err
			}
			committed = last
		}
		a := &applier{s: s, g: g, b: b, prep: prep, groups: map[uint64]*group{}}
		results[i] = a.run()
		if a.err != nil {
			return nil, a.err
		}
		last = b.Seq
	}
	if last > committed {
		if err := s.commitGroup(g, last); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// commitGroup writes a group (whose last batch is seq) and publishes what
// it changed; g is then ready for more batches.
func (s *Store) commitGroup(g *applyGroup, seq uint64) error {
	if s.writeFault != nil {
		if err := s.writeFault(); err != nil {
			return fmt.Errorf("tracestore: write batch %d: %w", seq, err)
		}
	}
	if err := g.wb.Flush(); err != nil {
		return fmt.Errorf("tracestore: write batch %d: %w", seq, err)
	}
	for p := range g.touched {
		p.publish()
	}
	s.mu.Lock()
	for _, p := range g.created {
		s.byDigest[p.digest] = p
	}
	// The sequence before the wake-up: a waiter woken before it was stored
	// saw the old one, armed itself on the new channel and slept until the
	// next apply, which may never come.
	s.applied.Store(seq)
	close(s.appliedC)
	s.appliedC = make(chan struct{})
	s.mu.Unlock()
	s.publishStatus()
	g.wb = s.db.NewWriteBatch()
	clear(g.touched)
	clear(g.manifests)
	g.created, g.bytes, g.count = nil, 0, 0
	return nil
}

// applyGroup is what the batches of one group commit share: the write,
// the principals they touched or created, and the manifests they wrote
// (an eviction in a later batch of the group finds them here: the write
// is not in Badger yet).
type applyGroup struct {
	wb           *badger.WriteBatch
	bytes, count int64 // keys and values written to wb, an upper bound of its size
	touched      map[*principal]bool
	created      []*principal
	manifests    map[string][]byte
}

type group struct {
	check uint64
	idx   []uint16
}

type applier struct {
	recs   []msgRecord // accepted records of the message
	s      *Store
	g      *applyGroup
	b      Batch
	prep   *Prepared
	groups map[uint64]*group
	order  []uint64
	err    error
}

func (a *applier) set(k, v []byte) {
	if a.err == nil {
		a.g.bytes += int64(len(k) + len(v))
		a.g.count++
		a.err = a.g.wb.Set(k, v)
	}
}

func (a *applier) del(k []byte) {
	if a.err == nil {
		a.g.bytes += int64(len(k))
		a.g.count++
		a.err = a.g.wb.Delete(k)
	}
}

// Prepared is a batch whose records are decoded, projected and encoded:
// the pure, CPU-heavy half of Apply, which a node runs ahead of the apply
// loop (pipelined) because it needs no store state.
type Prepared struct {
	b    Batch
	recs []preparedRecord
	// value is the message value of the accepted records (records.go,
	// format 3), written when any of them is still live after the apply.
	value []byte
}

type preparedRecord struct {
	size uint32 // its JSON size
	sels []selHash
	err  error
}

// Seq is the stream sequence of the prepared batch.
func (p *Prepared) Seq() uint64 { return p.b.Seq }

// Prepare decodes and projects a batch. It reads no store state and is
// safe to call concurrently with anything.
func (s *Store) Prepare(b Batch) *Prepared {
	o := s.opts
	p := &Prepared{b: b, recs: make([]preparedRecord, len(b.Records))}
	hashes := map[string]selHash{}
	pr := projectors.Get().(*projector)
	defer projectors.Put(pr)
	// all holds the accepted records' JSON; recs, ends and group list
	// them in index order, group being each one's place in the chunk
	// order (records.go): its run's first appearance, then its identity's.
	var all []byte
	var recs []msgRecord
	var ends, group []int
	groupOf, coarseOf := map[ids]int{}, map[string]int{}
	// Records of a batch share few identities (the spans of a trace or a
	// run): records of one identity share its selector hashes, read-only.
	byID := map[ids][]selHash{}
	for i, rec := range b.Records {
		r := &p.recs[i]
		if i > MaxBatchRecords {
			r.err = errCode(CodeInvalidObservability, "batch too long")
			continue
		}
		if len(rec.Data) > 4*o.MaxEventBytes {
			r.err = errCode(CodeInputTooLarge, "input exceeds decode bounds")
			continue
		}
		pj, err := pr.project(rec.Kind, rec.Data, o)
		if err != nil {
			r.err = err
			continue
		}
		start := len(all)
		all = appendRecord(all, Cursor(b.Seq, i), rec.Kind, pj.tsMS, pj)
		if len(all)-start > o.MaxEventBytes {
			all = all[:start]
			r.err = errCode(CodeEventTooLarge, "event larger than max_event_bytes")
			continue
		}
		r.size = uint32(len(all) - start)
		key := ids{pj.identity, pj.eval}
		g, ok := groupOf[key]
		if !ok {
			// An identity's place: its run (or workflow, or invocation)
			// first, so a run's traces share chunks too; then the
			// identity itself.
			id := &pj.identity
			coarse := id[idRun] + "\x00" + id[idWorkflow] + "\x00" + id[idInvocation]
			c, ok := coarseOf[coarse]
			if !ok {
				c = len(coarseOf)
				coarseOf[coarse] = c
			}
			g = c<<CursorIndexBits | len(groupOf)
			groupOf[key] = g
		}
		recs = append(recs, msgRecord{idx: uint16(i), size: r.size})
		ends = append(ends, len(all))
		group = append(group, g)
		if sh, ok := byID[key]; ok {
			r.sels = sh
			continue
		}
		sels := append(subsets(&pj.identity), evalSelectors(&pj.eval)...)
		r.sels = make([]selHash, len(sels))
		byID[key] = r.sels
		for j, sel := range sels {
			h, ok := hashes[sel]
			if !ok { // records of a batch share most selectors
				h = selectorHash(sel)
				hashes[sel] = h
			}
			r.sels[j] = h
		}
	}
	if len(recs) > 0 {
		jsons := make([][]byte, len(recs))
		for k := range recs {
			jsons[k] = all[ends[k]-int(recs[k].size) : ends[k]]
		}
		order := make([]int, len(recs))
		for k := range order {
			order[k] = k
		}
		// Stable: within an identity, index order.
		slices.SortStableFunc(order, func(x, y int) int { return group[x] - group[y] })
		p.value = encodeGrouped(recs, jsons, order)
	}
	return p
}

// ids is a record's identity and eval identity: what its selectors are
// computed from, and what format 3 groups records by.
type ids struct {
	id   identity
	eval evalIdentity
}

func (a *applier) run() []Result {
	s, b := a.s, a.b
	o := s.opts
	res := make([]Result, len(b.Records))
	p, perr := a.principal(b.Principal)
	if perr == nil {
		// The order indexes grow by the whole batch, doubling: append's
		// 1.25x steps for long slices copied them several times as often.
		n := len(a.prep.recs)
		p.q = growDoubling(p.q, n)
		s.global = growDoubling(s.global, n)
	}
	for i := range a.prep.recs {
		pr := &a.prep.recs[i]
		err := pr.err
		if perr != nil {
			err = perr
		}
		c := Cursor(b.Seq, i)
		if err != nil {
			res[i].Err = err
			s.m.Counters.Rejected++
			switch ErrorCode(err) {
			case CodeContentRejected:
				s.m.Counters.ContentRejected++
			case CodeEventTooLarge, CodeInputTooLarge:
				s.m.Counters.OversizedRejected++
			}
			continue
		}
		res[i].Cursor = c
		s.m.Counters.Accepted++
		p.tomb = false // live again: its heap entry goes stale
		a.recs = append(a.recs, msgRecord{idx: uint16(i), size: pr.size})
		for _, sh := range pr.sels {
			h := sh.key
			g := a.groups[h]
			if g == nil {
				g = &group{check: sh.check}
				a.groups[h] = g
				a.order = append(a.order, h)
			}
			g.idx = append(g.idx, uint16(i))
		}
		sz := pr.size
		p.q = append(p.q, liveRef{cursor: c, size: sz})
		p.bytes += int64(sz)
		p.latest = c
		s.m.Latest = c
		s.global = append(s.global, liveEvent{cursor: c, ts: b.TimeMS, pid: p.pid})
		s.events++
		s.bytes += int64(sz)
		a.g.touched[p] = true
		for p.live() > o.MaxEventsPerPrincipal || p.bytes > o.MaxBytesPerPrincipal {
			a.evictOldest(p)
			s.m.Counters.CapacityEvictions++
		}
		for s.events > o.MaxEvents || s.bytes > o.MaxBytes {
			if !a.evictGlobal() {
				break
			}
			s.m.Counters.CapacityEvictions++
		}
	}
	// Retention in stream time, bounded per batch.
	cutoff := b.TimeMS - o.Retention.Milliseconds()
	for n := 0; n < o.MaxPruneBatch; n++ {
		e, ok := a.globalOldest()
		if !ok || e.ts >= cutoff {
			break
		}
		a.evictGlobal()
		s.m.Counters.RetentionEvictions++
	}
	a.expireTombstones(cutoff)
	if p != nil {
		a.writeMessage(p)
	}
	for q := range a.g.touched {
		rec, _ := msgpack.Marshal(&principalRec{Digest: q.digest[:], EvictedThrough: q.evictedThrough, Latest: q.latest,
			Tombstone: q.tomb, TombstoneMS: q.tombMS})
		a.set(principalKey(q.pid), rec)
	}
	for _, q := range a.g.created {
		a.set(digestKey(q.digest), binary.BigEndian.AppendUint32(nil, q.pid))
	}
	s.m.Applied = b.Seq
	mb, _ := msgpack.Marshal(&s.m)
	a.set(metaKey, mb)
	s.compactGlobal()
	return res
}

// growDoubling returns x with room for n more elements, growing its
// capacity geometrically when it must grow: doubling while small, by a
// quarter once large (at 1M events the order indexes are ~40 MB, and
// doubling left up to that much again unused: the 1M-event benchmark's
// RSS went past 512 MiB).
func growDoubling[T any](x []T, n int) []T {
	if cap(x)-len(x) >= n {
		return x
	}
	grow := len(x)
	if len(x) > 1<<16 {
		grow = len(x) / 4
	}
	return slices.Grow(x, max(n, grow))
}

// principal finds or creates the batch's principal. Capacity fails closed.
func (a *applier) principal(name string) (*principal, error) {
	if !validPrincipal(name) {
		return nil, errCode(CodeInvalidPrincipal, "principal must be 1..256 bytes of UTF-8")
	}
	d := Digest(name)
	a.s.mu.RLock()
	p := a.s.byDigest[d]
	a.s.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	for _, p := range a.g.created { // created earlier in this group
		if p.digest == d {
			return p, nil
		}
	}
	if int(a.s.m.NextPID) >= a.s.opts.MaxPrincipals {
		return nil, errCode(CodePrincipalCapacity, "max_principals reached")
	}
	p = &principal{pid: a.s.m.NextPID, digest: d}
	a.s.m.NextPID++
	a.s.byPID = append(a.s.byPID, p)
	a.g.created = append(a.g.created, p)
	a.g.touched[p] = true
	return p, nil
}

// evictOldest removes p's oldest live event.
func (a *applier) evictOldest(p *principal) {
	s := a.s
	r := p.q[p.qh]
	p.q[p.qh] = liveRef{}
	p.qh++
	if p.qh > 1024 && p.qh*2 > len(p.q) {
		p.q = append([]liveRef(nil), p.q[p.qh:]...)
		p.qh = 0
	}
	p.bytes -= int64(r.size)
	s.events--
	s.bytes -= int64(r.size)
	p.evictedThrough = r.cursor
	s.m.EvictedThrough = max(s.m.EvictedThrough, r.cursor)
	a.g.touched[p] = true
	if p.live() == 0 {
		p.tomb, p.tombMS = true, a.b.TimeMS
		s.tombs.push(tombEntry{ms: p.tombMS, pid: p.pid})
	}
	seq := CursorSeq(r.cursor)
	if seq != a.b.Seq && (p.live() == 0 || CursorSeq(p.q[p.qh].cursor) != seq) {
		a.dropMessage(p.pid, seq)
	}
}

// dropMessage deletes a principal's fully evicted stream message: its
// records, and its index groups and manifest, found through the manifest.
func (a *applier) dropMessage(pid uint32, seq uint64) {
	man, ok := a.g.manifests[string(manifestKey(pid, seq))]
	var err error
	if !ok {
		err = a.s.db.View(func(txn *badger.Txn) error {
			it, err := txn.Get(manifestKey(pid, seq))
			if err != nil {
				return err
			}
			man, err = it.ValueCopy(nil)
			return err
		})
	}
	if errors.Is(err, badger.ErrKeyNotFound) {
		return
	}
	if err != nil {
		if a.err == nil {
			a.err = err
		}
		return
	}
	m, ok := decodeManifest(man)
	if !ok {
		if a.err == nil {
			a.err = fmt.Errorf("tracestore: corrupt manifest of message %d", seq)
		}
		return
	}
	for _, h := range m.sels {
		a.del(groupKey(pid, h, seq))
	}
	a.del(messageKey(pid, seq))
	a.del(manifestKey(pid, seq))
}

// globalOldest returns the oldest live event, skipping entries a
// per-principal eviction already removed.
func (a *applier) globalOldest() (liveEvent, bool) {
	s := a.s
	for s.gh < len(s.global) {
		e := s.global[s.gh]
		p := s.byPID[e.pid]
		if p.live() > 0 && p.q[p.qh].cursor == e.cursor {
			return e, true
		}
		s.gh++
	}
	return liveEvent{}, false
}

func (a *applier) evictGlobal() bool {
	e, ok := a.globalOldest()
	if !ok {
		return false
	}
	a.s.gh++
	a.evictOldest(a.s.byPID[e.pid])
	return true
}

func (s *Store) compactGlobal() {
	if s.gh > 4096 && s.gh*2 > len(s.global) {
		s.global = append([]liveEvent(nil), s.global[s.gh:]...)
		s.gh = 0
	}
}

// expireTombstones drops the watermarks of principals whose events have
// all been evicted for longer than the retention (tombstone created before
// cutoff, in stream time), at most MaxPruneBatch per applied message. The
// principal then reads as an unknown stream: empty page, latest 0, no
// replay_gap. Its id and digest stay (principals are never evicted).
// Stale heap entries (the principal got events again) are skipped without
// counting, so a restarted node, whose heap holds only live tombstones,
// expires the same ones.
func (a *applier) expireTombstones(cutoff int64) {
	s := a.s
	for n := 0; n < s.opts.MaxPruneBatch && len(s.tombs) > 0; {
		e := s.tombs[0]
		p := s.byPID[e.pid]
		if !p.tomb || p.tombMS != e.ms || p.live() > 0 {
			s.tombs.pop()
			continue
		}
		if e.ms >= cutoff {
			return
		}
		s.tombs.pop()
		p.tomb, p.tombMS, p.evictedThrough, p.latest = false, 0, 0, 0
		a.g.touched[p] = true
		s.m.Counters.TombstonesPruned++
		n++
	}
}

// tombEntry is a tombstone in the expiry index.
type tombEntry struct {
	ms  int64
	pid uint32
}

// tombHeap is the tombstone expiry index: a min-heap by (stream time,
// principal id), an order that does not depend on when entries were
// pushed, so a node that rebuilt it at open expires in the same order.
type tombHeap []tombEntry

func (h tombHeap) less(i, j int) bool {
	return h[i].ms < h[j].ms || h[i].ms == h[j].ms && h[i].pid < h[j].pid
}

func (h *tombHeap) push(e tombEntry) {
	*h = append(*h, e)
	for i := len(*h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		(*h)[i], (*h)[parent] = (*h)[parent], (*h)[i]
		i = parent
	}
}

func (h *tombHeap) pop() {
	old := *h
	n := len(old) - 1
	old[0] = old[n]
	*h = old[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h.less(l, m) {
			m = l
		}
		if r < n && h.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		(*h)[i], (*h)[m] = (*h)[m], (*h)[i]
		i = m
	}
}

// writeMessage writes the batch principal's records of this message that
// are still live (quotas may have evicted the oldest already), with the
// index groups that still reach one and the manifest. A message whose
// records are all gone writes nothing.
func (a *applier) writeMessage(p *principal) {
	b := a.b
	first := 0 // the first live record
	for first < len(a.recs) && Cursor(b.Seq, int(a.recs[first].idx)) <= p.evictedThrough {
		first++
	}
	if first == len(a.recs) {
		return
	}
	live := a.recs[first:]
	sels := make([]uint64, 0, len(a.order))
	for _, h := range a.order {
		g := a.groups[h]
		if Cursor(b.Seq, int(g.idx[len(g.idx)-1])) <= p.evictedThrough {
			continue // the whole group is already gone
		}
		a.set(groupKey(p.pid, h, b.Seq), encodeGroup(g.check, g.idx))
		sels = append(sels, h)
	}
	// The value holds every accepted record, those this batch evicted
	// already included (only a batch larger than a quota does): queries
	// skip them by the watermark, as they skip records evicted after the
	// write.
	a.set(messageKey(p.pid, b.Seq), a.prep.value)
	mk, mv := manifestKey(p.pid, b.Seq), encodeManifest(b.TimeMS, live, sels)
	a.g.manifests[string(mk)] = mv
	a.set(mk, mv)
}
