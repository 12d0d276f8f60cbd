package evalstore

import (
	"encoding/binary"
	"errors"
	"sort"

	"github.com/dgraph-io/badger/v4"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/vmihailenco/msgpack/v5"
)

// A result tail is what a node renders once from a completed records
// job's records so that reading the job never decodes them again: the
// stream's case lines and summary line (coordinator/DESIGN.md, "The
// result tail"). It is the one thing in this store the Raft log does not
// write. A node writes it (PutTail) outside any log entry, from records
// it walked and found to be the log's (their count and digest, which the
// tail names); a reader uses it only while the job's own count and digest
// are the ones it names, and records of a completed job are never
// written again (only pruned with their job, and job ids are never
// reused). It travels in snapshots like every key, so a node restored
// from a peer's snapshot has the peer's tails. Tails are bounded per node
// (MaxTails, MaxTailBytes): PutTail evicts the tails of jobs that are
// gone, then the oldest.
//
//	g<job16>              TailHead (msgpack)
//	g<job16><chunk32>     case lines chunk*TailChunkCases .. (chunk+1)*TailChunkCases-1, concatenated

// Bounds of the tails one node keeps, and how case lines are grouped.
const (
	MaxTails       = 64
	MaxTailBytes   = 512 << 20
	TailChunkCases = 64
)

// TailHead is a result tail's head: which records it was built from and
// the lines that are not case lines.
type TailHead struct {
	JobID   string `msgpack:"job"`
	Records int64  `msgpack:"records"`
	Digest  string `msgpack:"digest"` // the records' SHA-256 hex, the log's
	Cases   int    `msgpack:"cases"`
	Header  []byte `msgpack:"header"`  // the stream's line 0
	Summary []byte `msgpack:"summary"` // the stream's last line
	// Failed is the case indexes of the cases that did not pass, in case
	// order, each 4 bytes big-endian (so a rank is a slice, not a decode).
	Failed []byte `msgpack:"failed"`
	Bytes  int64  `msgpack:"bytes"` // the head's and chunks' bytes
	Built  int64  `msgpack:"built"` // node-local order of writing (eviction)
}

// FailedCount is the number of cases that did not pass.
func (h *TailHead) FailedCount() int { return len(h.Failed) / 4 }

// FailedAt is the case index of the failed case of rank r.
func (h *TailHead) FailedAt(r int) int { return int(binary.BigEndian.Uint32(h.Failed[4*r:])) }

// PassedAt is the case index of the passed case of rank r (0-based, in
// case order): r plus the failed cases before it.
func (h *TailHead) PassedAt(r int) int {
	// Failed case i has FailedAt(i)-i passed cases before it.
	k := sort.Search(h.FailedCount(), func(i int) bool { return h.FailedAt(i)-i > r })
	return r + k
}

func tailKey(job string) []byte { return appendPart([]byte{pTail}, job) }
func tailChunkKey(job string, chunk int) []byte {
	return binary.BigEndian.AppendUint32(tailKey(job), uint32(chunk))
}

// TailHead reads job's tail head (evalrecord.ErrNotFound: none).
func (tx *Tx) TailHead(jobID string) (*TailHead, error) {
	var h TailHead
	ok, err := getRecord(tx.txn, tailKey(jobID), &h)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, evalrecord.ErrNotFound
	}
	return &h, nil
}

// TailChunk reads chunk i of job's case lines.
func (tx *Tx) TailChunk(jobID string, i int) ([]byte, error) {
	item, err := tx.txn.Get(tailChunkKey(jobID, i))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, newErr(evalrecord.CodeInvalidStoreRecord, "result tail chunk")
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// PutTail stores a job's tail: its chunks (case lines, TailChunkCases a
// chunk) first, its head last, so a head is only ever read with every
// chunk in place. Before, it makes room: the tails of jobs the store no
// longer holds go first, then the oldest, until MaxTails and
// MaxTailBytes hold with this one. A tail over MaxTailBytes alone is
// not stored (ErrTailTooLarge). Not a log entry: nothing here is
// replicated, and PutTail runs beside Update (its keys are no entry's).
func (s *Store) PutTail(h *TailHead, chunks [][]byte) error {
	h.Bytes = int64(len(h.Header) + len(h.Summary) + len(h.Failed))
	for _, c := range chunks {
		h.Bytes += int64(len(c))
	}
	if h.Bytes > MaxTailBytes {
		return ErrTailTooLarge
	}
	if err := s.evictTails(h.JobID, h.Bytes); err != nil {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for i, c := range chunks {
		if err := wb.Set(tailChunkKey(h.JobID, i), c); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	v, err := encode(h)
	if err != nil {
		return err
	}
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(tailKey(h.JobID), v) })
}

// ErrTailTooLarge: a tail over MaxTailBytes is not kept.
var ErrTailTooLarge = errors.New("evalstore: result tail over its bound")

// evictTails deletes tails until one of add bytes fits the bounds (and
// job's own tail, being replaced).
func (s *Store) evictTails(job string, add int64) error {
	var heads []TailHead
	gone := map[string]bool{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pTail}, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			id, rest, ok := splitPart(k[1:])
			if !ok || len(rest) != 0 {
				continue // a chunk
			}
			var h TailHead
			if err := it.Item().Value(func(b []byte) error { return msgpack.Unmarshal(b, &h) }); err != nil {
				return err
			}
			_, err := txn.Get(jobIndexKey(id))
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
				gone[id] = true
			case err != nil:
				return err
			}
			h.JobID = id
			heads = append(heads, h)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Gone first, then oldest first.
	sort.SliceStable(heads, func(a, b int) bool {
		if gone[heads[a].JobID] != gone[heads[b].JobID] {
			return gone[heads[a].JobID]
		}
		return heads[a].Built < heads[b].Built
	})
	count, bytes := 1, add
	for _, h := range heads {
		if h.JobID != job {
			count++
			bytes += h.Bytes
		}
	}
	for _, h := range heads {
		over := count > MaxTails || bytes > MaxTailBytes
		if !gone[h.JobID] && h.JobID != job && !over {
			continue
		}
		if err := s.deleteTail(h.JobID); err != nil {
			return err
		}
		if h.JobID != job {
			count--
			bytes -= h.Bytes
		}
	}
	return nil
}

// deleteTail deletes job's tail, head first (a reader then no longer
// uses its chunks).
func (s *Store) deleteTail(job string) error {
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(tailKey(job)) }); err != nil {
		return err
	}
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: tailKey(job), PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	return wb.Flush()
}
