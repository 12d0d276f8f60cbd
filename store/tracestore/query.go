package tracestore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// Selector names identity pairs among run_id, trace_id, workflow_id and
// invocation_id; empty selects all of the principal's events. An eval
// selector instead names job_id, optionally case_id, and with case_id
// optionally sample_id (the span attributes adk.eval.*); it cannot be
// combined with identity keys.
type Selector map[string]string

// QueryOptions page a query. A nil AfterCursor means "the current window":
// no replay_gap or cursor_ahead. Zero Limit and MaxBytes take the store's
// maxima.
type QueryOptions struct {
	AfterCursor *uint64
	Limit       int
	MaxBytes    int
}

// Page is the contract's page. Events are the stored JSON records
// {cursor, kind, timestamp_ms, identity, event, [content_pruned]}.
type Page struct {
	Events                []json.RawMessage `json:"events" msgpack:"events"`
	NextCursor            uint64            `json:"next_cursor" msgpack:"next_cursor"`
	OldestAvailableCursor *uint64           `json:"oldest_available_cursor" msgpack:"oldest_available_cursor"`
	LatestCursor          uint64            `json:"latest_cursor" msgpack:"latest_cursor"`
	EncodedBytes          int               `json:"encoded_bytes" msgpack:"encoded_bytes"`
	Truncated             bool              `json:"truncated" msgpack:"truncated"`
	// Scanned counts the index and event keys the query read (work, for
	// tests and benchmarks); not part of the contract's page.
	Scanned int `json:"-" msgpack:"-"`
}

// Query returns one page of the principal's events matching sel, in cursor
// order. Its cost is a prefix seek plus the keys of the page: it does not
// grow with the size of the stream. Per-principal watermarks answer
// latest_cursor, oldest_available_cursor and replay gaps (a gap is
// reported if any of the principal's events after after_cursor were
// evicted, whatever the selector: conservative, never silent).
func (s *Store) Query(principal string, sel Selector, q QueryOptions) (*Page, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if s.failed.Load() {
		return nil, ErrFailed
	}
	if !validPrincipal(principal) {
		return nil, errCode(CodeInvalidPrincipal, "principal must be 1..256 bytes of UTF-8")
	}
	o := s.opts
	if q.Limit == 0 {
		q.Limit = o.MaxQueryEvents
	}
	if q.MaxBytes == 0 {
		q.MaxBytes = o.MaxQueryBytes
	}
	if q.Limit < 1 || q.Limit > o.MaxQueryEvents || q.MaxBytes < o.MaxEventBytes || q.MaxBytes > o.MaxQueryBytes {
		return nil, errCode(CodeInvalidQueryOptions, "limit or max_bytes out of range")
	}
	selStr, err := parseSelector(sel)
	if err != nil {
		return nil, err
	}
	var after uint64
	if q.AfterCursor != nil {
		after = *q.AfterCursor
	}
	page := &Page{NextCursor: after, Events: []json.RawMessage{}}
	s.mu.RLock()
	p := s.byDigest[Digest(principal)]
	s.mu.RUnlock()
	if p == nil {
		return page, nil // unknown stream: empty, latest 0
	}
	v := p.view.Load()
	if v.events == 0 && v.latest == 0 {
		return page, nil // no event yet, or an expired tombstone: unknown too
	}
	page.LatestCursor = v.latest
	if v.events > 0 {
		o := v.oldest
		page.OldestAvailableCursor = &o
	}
	if q.AfterCursor != nil {
		gap := &Gap{AfterCursor: after, OldestAvailableCursor: page.OldestAvailableCursor, LatestCursor: v.latest, EvictedThrough: v.evictedThrough}
		if after < v.evictedThrough {
			return nil, &Error{Code: CodeReplayGap, Fields: ErrorFields{Gap: gap}}
		}
		if after > v.latest {
			return nil, &Error{Code: CodeCursorAhead, Fields: ErrorFields{Gap: gap}}
		}
	}
	start := max(after, v.evictedThrough)
	err = s.db.View(func(txn *badger.Txn) error {
		sh := selectorHash(selStr)
		prefix := groupPrefix(p.pid, sh.key)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		msgs := messageReader{txn: txn, pid: p.pid}
		defer msgs.close()
		var view messageView
		for it.Seek(binary.BigEndian.AppendUint64(prefix, CursorSeq(start))); it.Valid(); it.Next() {
			page.Scanned++
			key := it.Item().Key()
			seq := binary.BigEndian.Uint64(key[len(prefix):])
			var check uint64
			var idx []uint16
			var ok bool
			if err := it.Item().Value(func(b []byte) error {
				check, idx, ok = decodeGroup(b)
				return nil
			}); err != nil {
				return err
			}
			if !ok || check != sh.check { // corrupt, or a 64-bit hash collision
				continue
			}
			want := idx[:0:0]
			for _, i := range idx {
				if c := Cursor(seq, int(i)); c > start && c <= v.latest {
					want = append(want, i)
				}
			}
			if len(want) == 0 {
				continue
			}
			page.Scanned++
			item, err := msgs.get(seq)
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue // evicted since the view was taken
			}
			if err != nil {
				return err
			}
			// Decompress straight from Badger's buffer: the message is
			// read once for all of this group's records.
			if err := item.Value(func(msg []byte) error {
				if !view.decode(msg) {
					return nil // malformed: skipped, as a corrupt group is
				}
				for _, i := range want {
					j, ok := view.find(i)
					if !ok {
						continue // evicted before its message was written
					}
					size := view.size(j)
					if len(page.Events) >= q.Limit || page.EncodedBytes+size > q.MaxBytes {
						page.Truncated = true
						return nil
					}
					ev, err := view.record(j)
					if err != nil {
						return err
					}
					page.Events = append(page.Events, ev)
					page.EncodedBytes += len(ev)
					page.NextCursor = Cursor(seq, int(i))
				}
				return nil
			}); err != nil {
				return err
			}
			if page.Truncated {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, errCode(CodeUnavailable, "read failed")
	}
	return page, nil
}

// parseSelector validates a selector and returns its canonical string.
func parseSelector(sel Selector) (string, error) {
	var id identity
	var ev evalIdentity
	mask, evals := 0, 0
	for k, v := range sel {
		if v == "" || len(v) > maxTextBytes {
			return "", errCode(CodeInvalidSelector, "selector value "+k+" must be 1..512 bytes")
		}
		if i := slices.Index(evalKeys[:], k); i >= 0 {
			ev[i] = v
			evals++
			continue
		}
		i := slices.Index(identityKeys[:], k)
		if i < 0 {
			return "", errCode(CodeInvalidSelector, "selector keys are run_id, trace_id, workflow_id, invocation_id, or job_id [case_id [sample_id]]")
		}
		id[i] = v
		mask |= 1 << i
	}
	if evals == 0 {
		return selectorString(&id, mask), nil
	}
	if mask != 0 {
		return "", errCode(CodeInvalidSelector, "job_id, case_id and sample_id do not combine with identity keys")
	}
	for i := 0; i < evals; i++ {
		if ev[i] == "" {
			return "", errCode(CodeInvalidSelector, evalKeys[evals-1]+" needs "+evalKeys[i])
		}
	}
	return evalSelectorString(&ev, evals), nil
}

// Status is the store's bounded status. It never contains a principal,
// raw or hashed.
type Status struct {
	Events          int     `json:"events"`
	EncodedBytes    int64   `json:"encoded_bytes"`
	Principals      int     `json:"principals"`
	Streams         int     `json:"streams"`
	OldestCursor    *uint64 `json:"oldest_cursor"`
	LatestCursor    uint64  `json:"latest_cursor"`
	EvictedThrough  uint64  `json:"evicted_through"`
	AppliedSequence uint64  `json:"applied_sequence"`
	// Failed: a write failed and the store must be reopened (ErrFailed).
	Failed                bool     `json:"failed,omitempty"`
	LifecycleReceivers    int      `json:"lifecycle_receivers"`
	LifecycleActiveOwners int      `json:"lifecycle_active_owners"`
	LifecyclePending      int      `json:"lifecycle_pending"`
	Limits                Options  `json:"limits"`
	Counters              Counters `json:"counters"`
}

// PrincipalStatus is one principal's status.
type PrincipalStatus struct {
	Events       int     `json:"events"`
	EncodedBytes int64   `json:"encoded_bytes"`
	OldestCursor *uint64 `json:"oldest_cursor"`
	LatestCursor uint64  `json:"latest_cursor"`
}

// publishStatus snapshots the apply-owned state; called under applyMu.
func (s *Store) publishStatus() {
	st := &Status{Events: s.events, EncodedBytes: s.bytes, Principals: int(s.m.NextPID), Streams: int(s.m.NextPID),
		EvictedThrough: s.m.EvictedThrough, AppliedSequence: s.m.Applied, Limits: s.opts, Counters: s.m.Counters}
	for i := s.gh; i < len(s.global); i++ {
		e := s.global[i]
		if p := s.byPID[e.pid]; p.live() > 0 && p.q[p.qh].cursor == e.cursor {
			c := e.cursor
			st.OldestCursor = &c
			break
		}
	}
	st.LatestCursor = s.m.Latest
	s.status.Store(st)
}

// Status returns the current status with node-local counters merged in.
func (s *Store) Status() Status {
	st := *s.status.Load()
	st.Counters.LifecycleCapabilityRejected = s.local.capRejected.Load()
	st.Counters.LifecycleReceiversPruned = s.local.receiversPruned.Load()
	st.Counters.LifecycleDeliveryDropped = s.local.deliveryDropped.Load()
	st.LifecycleReceivers, st.LifecycleActiveOwners, st.LifecyclePending = s.recv.stats()
	st.Failed = s.failed.Load()
	return st
}

// PrincipalStatus returns one principal's counts; an unknown principal has
// zero counts.
func (s *Store) PrincipalStatus(principal string) PrincipalStatus {
	s.mu.RLock()
	p := s.byDigest[Digest(principal)]
	s.mu.RUnlock()
	if p == nil {
		return PrincipalStatus{}
	}
	v := p.view.Load()
	ps := PrincipalStatus{Events: v.events, EncodedBytes: v.bytes, LatestCursor: v.latest}
	if v.events > 0 {
		o := v.oldest
		ps.OldestCursor = &o
	}
	return ps
}

// messageReader reads a page's messages. A page's groups usually name
// neighbouring messages of the principal (a run's events arrive together),
// and one iterator stepping forward reads those much more cheaply than a
// point Get each: a Get probes every level of the LSM, and at 1M events
// that made the page 1.7× the 10k one, while a step is a merge of the
// levels' current blocks. A message further than maxMessageSteps keys
// ahead is sought instead, so a sparse page costs a seek per message, as
// before.
type messageReader struct {
	txn *badger.Txn
	pid uint32
	it  *badger.Iterator
	key []byte
}

// maxMessageSteps bounds the keys stepped over to reach the next message:
// beyond it a seek is cheaper.
const maxMessageSteps = 8

func (r *messageReader) get(seq uint64) (*badger.Item, error) {
	r.key = binary.BigEndian.AppendUint64(append(r.key[:0], prefixMessage, 0, 0, 0, 0), seq)
	binary.BigEndian.PutUint32(r.key[1:], r.pid)
	if r.it == nil {
		r.it = r.txn.NewIterator(badger.IteratorOptions{Prefix: r.key[:5]})
		r.it.Seek(r.key)
	} else {
		for i := 0; r.it.Valid() && bytes.Compare(r.it.Item().Key(), r.key) < 0; i++ {
			if i == maxMessageSteps {
				r.it.Seek(r.key)
				break
			}
			r.it.Next()
		}
	}
	if !r.it.Valid() || !bytes.Equal(r.it.Item().Key(), r.key) {
		return nil, badger.ErrKeyNotFound
	}
	return r.it.Item(), nil
}

func (r *messageReader) close() {
	if r.it != nil {
		r.it.Close()
	}
}
