package evalstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/fadcedab/adk/store/evalrecord"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/vmihailenco/msgpack/v5"
)

// Limits are the store's count and byte quotas (CONTRACTS §6 defaults).
// They are configuration, identical on every Raft peer.
type Limits struct {
	MaxSets          int
	MaxJobs          int
	MaxBaselines     int
	MaxPageLimit     int
	MaxPruneLimit    int
	MaxRecordBytes   int64
	MaxScopeBytes    int64
	MaxTotalBytes    int64
	TerminalHeadroom int64 // reserved per queued or running job
	// MaxRequests bounds the submit request ids kept (RecordRequest):
	// past it the oldest is forgotten.
	MaxRequests int
}

// DefaultLimits returns the contract defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxSets:          10_000,
		MaxJobs:          100_000,
		MaxBaselines:     10_000,
		MaxPageLimit:     100,
		MaxPruneLimit:    100,
		MaxRecordBytes:   16 << 20,
		MaxScopeBytes:    256 << 20,
		MaxTotalBytes:    1 << 30,
		TerminalHeadroom: 4608,
		MaxRequests:      65_536,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	orDefault(&l.MaxSets, d.MaxSets)
	orDefault(&l.MaxJobs, d.MaxJobs)
	orDefault(&l.MaxBaselines, d.MaxBaselines)
	orDefault(&l.MaxPageLimit, d.MaxPageLimit)
	orDefault(&l.MaxPruneLimit, d.MaxPruneLimit)
	orDefault(&l.MaxRecordBytes, d.MaxRecordBytes)
	orDefault(&l.MaxScopeBytes, d.MaxScopeBytes)
	orDefault(&l.MaxTotalBytes, d.MaxTotalBytes)
	orDefault(&l.TerminalHeadroom, d.TerminalHeadroom)
	orDefault(&l.MaxRequests, d.MaxRequests)
	return l
}

// orDefault replaces a zero or negative limit with its default.
func orDefault[T int | int64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// CodeAlreadyOwned is Open's error when another process (or another Store
// in this one) holds the directory: CONTRACTS §6 "Single owner".
const CodeAlreadyOwned = "eval_store_already_owned"

// ErrAlreadyOwned matches CodeAlreadyOwned with errors.Is.
var ErrAlreadyOwned = &evalrecord.Error{Code: CodeAlreadyOwned}

// badgerLockMessage is how Badger reports a held directory lock (flock
// LOCK_EX|LOCK_NB). Badger formats the cause with %+v instead of wrapping
// it, so the message is the only thing to match.
const badgerLockMessage = "Cannot acquire directory lock"

// Options configure Open.
type Options struct {
	// Dir is the Badger directory; empty means in memory (tests).
	Dir string
	// Limits are the quotas; zero fields take the defaults.
	Limits Limits
	// MemTableSize bounds one Badger memtable (default
	// DefaultMemTableSize; a command's writes must stay under 15% of it).
	// Every node of a cluster must use the same size: a transaction too
	// big for it is refused, and that must be the same on every node.
	MemTableSize int64
	// Logger receives Badger warnings and errors (default: discarded).
	Logger *slog.Logger
}

// DefaultMemTableSize is the eval store's Badger memtable size. Badger
// keeps the mutable memtable and up to NumMemtables (2) full ones waiting
// to be flushed, each an arena of the size plus 30% (the batch bounds),
// and a flush builds its table in memory: at 64 MiB that was ~83 MiB per
// arena and ~310 MiB of live heap (~600 MiB in use before a collection) on
// every coordinator once a job had written a few memtables (a 100,000-task
// job), against ~95 MiB live below one. At 16 MiB it is ~21 MiB per arena,
// ~80 MiB at most. The cost: more, smaller flushes (a 100,000-task job
// writes ~150 MiB), and a transaction may hold 2.4 MiB and ~26,000
// entries (finish entries are bounded in bytes, and prune deletes a big
// job's tasks over several calls, for that).
const DefaultMemTableSize = 16 << 20

// Store is the eval store. Reads may run concurrently with Update; Update
// calls are serialised (the FSM applies one entry at a time anyway).
type Store struct {
	db  *badger.DB
	lim Limits

	mu      sync.Mutex // serialises Update and Restore; guards applied
	applied uint64
}

// Open opens (or creates) the store.
func Open(opts Options) (*Store, error) { return open(opts, badgerOptions(opts)) }

// badgerOptions is the eval store's Badger configuration.
func badgerOptions(opts Options) badger.Options {
	bo := badger.DefaultOptions(opts.Dir)
	if opts.Dir == "" {
		bo = bo.WithInMemory(true)
	}
	mem := opts.MemTableSize
	if mem <= 0 {
		mem = DefaultMemTableSize
	}
	bo = bo.WithMemTableSize(mem).
		WithNumMemtables(2).
		// Tables uncompressed (issue 17): with Snappy, every flush and
		// compaction kept each block twice in its table builder (the
		// block and its compressed copy, 24-32 MiB live at a 100,000-task
		// job's peak), and spent CPU on the apply path's flushes, for
		// keys and small records (results are S2-compressed by us, large
		// values live in the value log). The block cache stays: with it
		// off, TestClusterEval_LeaderKilledMidJobCompletesAtMostOnce made
		// no progress in 4 of 8 runs (not investigated). Tables written
		// compressed by earlier builds stay readable: Badger records each
		// table's compression in its manifest.
		WithCompression(options.None).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(8 << 20).
		WithNumCompactors(2).
		WithValueLogFileSize(64 << 20).
		WithValueThreshold(64 << 10).
		// Update holds s.mu: one write transaction at a time, so Badger's
		// read-set tracking for conflict detection is pure cost.
		WithDetectConflicts(false).
		WithLogger(badgerLogger{opts.Logger})
	return bo
}

func open(opts Options, bo badger.Options) (*Store, error) {
	db, err := badger.Open(bo)
	if err != nil {
		if strings.Contains(err.Error(), badgerLockMessage) {
			return nil, errf(CodeAlreadyOwned, "%s is held by another coordinator or adk serve; one owner per data directory", opts.Dir)
		}
		return nil, fmt.Errorf("open eval store: %w", err)
	}
	s := &Store{db: db, lim: opts.Limits.withDefaults()}
	if err := s.loadApplied(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes Badger.
func (s *Store) Close() error { return s.db.Close() }

// Limits returns the store's effective limits.
func (s *Store) Limits() Limits { return s.lim }

func (s *Store) loadApplied() error {
	return s.db.View(func(txn *badger.Txn) error {
		v, err := getUint(txn, metaKey("applied"))
		s.applied = v
		return err
	})
}

// AppliedIndex is the last Raft index recorded by Update or Restore.
func (s *Store) AppliedIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// Update runs fn in one write transaction and records index as applied in
// that same transaction. An index at or below the applied one is skipped
// (applied=false). When fn fails its writes are discarded but the index is
// still recorded: the command was applied and its answer is the error.
// The returned error is fn's error, or a storage failure (fatal for the
// FSM) wrapped in *StorageError.
func (s *Store) Update(index uint64, fn func(tx *Tx) error) (applied bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(index, fn)
}

func (s *Store) updateLocked(index uint64, fn func(tx *Tx) error) (applied bool, err error) {
	if index != 0 && index <= s.applied {
		return false, nil
	}
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	fnErr := fn(&Tx{txn: txn, lim: s.lim})
	if se := (*StorageError)(nil); errors.As(fnErr, &se) {
		// fn could not persist what the entry says: the index is not
		// recorded, so a restart replays the entry (the FSM stops).
		return false, fnErr
	}
	if fnErr != nil {
		txn.Discard()
		txn = s.db.NewTransaction(true)
	}
	if index != 0 {
		if err := putUint(txn, metaKey("applied"), index); err != nil {
			return false, &StorageError{Err: err}
		}
	}
	if err := txn.Commit(); err != nil {
		return false, &StorageError{Err: err}
	}
	if index != 0 {
		s.applied = index
	}
	return true, fnErr
}

// Op is one command of UpdateBatch: Fn at Raft index Index (non-zero).
type Op struct {
	Index uint64
	Fn    func(tx *Tx) error
}

// UpdateBatch applies ops in order with exactly the outcome of one Update
// per op (applied[i], errs[i]), but commits the ops that succeed together:
// one Badger transaction, one applied-index write and one commit for a
// whole Raft batch instead of one per entry (the commit, not the writes,
// was most of a follower's apply cost). When an op fails, the ones before
// it are re-run in a fresh transaction (the failed op's partial writes are
// in the old one) and committed, and the failed op then runs alone as
// Update would run it, so an error that only a shared transaction could
// cause (ErrTxnTooBig) is answered as it would be alone, and every node
// reaches the same state whatever batches its Raft hands it. Fn must be
// deterministic and may run more than once. err is a storage failure
// (*StorageError), fatal for the FSM; the ops after it are not applied.
func (s *Store) UpdateBatch(ops []Op) (applied []bool, errs []error, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	applied, errs = make([]bool, len(ops)), make([]error, len(ops))
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	var pending []int // ops whose writes txn holds
	commit := func() error {
		if len(pending) == 0 {
			return nil
		}
		last := ops[pending[len(pending)-1]].Index
		if err := putUint(txn, metaKey("applied"), last); err != nil {
			return &StorageError{Err: err}
		}
		if err := txn.Commit(); err != nil {
			return &StorageError{Err: err}
		}
		for _, i := range pending {
			applied[i] = true
		}
		s.applied, pending = last, pending[:0]
		return nil
	}
	for i, op := range ops {
		if op.Index <= s.applied || (len(pending) > 0 && op.Index <= ops[pending[len(pending)-1]].Index) {
			continue
		}
		fnErr := op.Fn(&Tx{txn: txn, lim: s.lim})
		if fnErr == nil {
			pending = append(pending, i)
			continue
		}
		txn.Discard()
		txn = s.db.NewTransaction(true)
		for _, j := range pending {
			if err := ops[j].Fn(&Tx{txn: txn, lim: s.lim}); err != nil {
				return applied, errs, &StorageError{Err: fmt.Errorf("re-run of index %d: %w", ops[j].Index, err)}
			}
		}
		if err := commit(); err != nil {
			return applied, errs, err
		}
		txn.Discard()
		applied[i], errs[i] = s.updateLocked(op.Index, op.Fn)
		if se := (*StorageError)(nil); errors.As(errs[i], &se) {
			return applied, errs, errs[i]
		}
		txn = s.db.NewTransaction(true)
	}
	return applied, errs, commit()
}

// View runs fn in a read transaction.
func (s *Store) View(fn func(tx *Tx) error) error {
	return s.db.View(func(txn *badger.Txn) error { return fn(&Tx{txn: txn, lim: s.lim}) })
}

// StorageError is a Badger failure, or an Fn that cannot persist what its
// entry says (it returns a *StorageError): not a domain answer, the FSM
// must stop, and the entry's index is not recorded.
type StorageError struct{ Err error }

func (e *StorageError) Error() string { return "evalstore storage: " + e.Err.Error() }
func (e *StorageError) Unwrap() error { return e.Err }

// Snapshot is a point-in-time view pinned to one read transaction, so what
// it streams is exactly the state at the index it was taken at, however
// long Persist runs beside later applies.
type Snapshot struct {
	txn   *badger.Txn
	index uint64
}

// Snapshot pins a read transaction. Call Release when done.
func (s *Store) Snapshot() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Snapshot{txn: s.db.NewTransaction(false), index: s.applied}
}

// Index is the applied index the snapshot holds.
func (sn *Snapshot) Index() uint64 { return sn.index }

// WriteTo streams every key and value as uvarint-length-prefixed pairs.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	var n int64
	var hdr [binary.MaxVarintLen64]byte
	it := sn.txn.NewIterator(badger.DefaultIteratorOptions)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		k := item.KeyCopy(nil)
		v, err := item.ValueCopy(nil)
		if err != nil {
			return n, err
		}
		for _, b := range [][]byte{k, v} {
			l := binary.PutUvarint(hdr[:], uint64(len(b)))
			if _, err := bw.Write(hdr[:l]); err != nil {
				return n, err
			}
			if _, err := bw.Write(b); err != nil {
				return n, err
			}
			n += int64(l + len(b))
		}
	}
	return n, bw.Flush()
}

// Release ends the pinned transaction.
func (sn *Snapshot) Release() { sn.txn.Discard() }

// maxSnapshotValue bounds one value read back by Restore.
const maxSnapshotValue = 1 << 30

// Restore discards all state and loads a stream written by
// Snapshot.WriteTo, applied index included.
func (s *Store) Restore(r io.Reader) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.db.DropAll(); err != nil {
		return fmt.Errorf("restore eval store: drop: %w", err)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	readChunk := func() ([]byte, error) {
		l, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, err
		}
		if l > maxSnapshotValue {
			return nil, fmt.Errorf("restore eval store: record of %d bytes", l)
		}
		b := make([]byte, l)
		_, err = io.ReadFull(br, b)
		return b, err
	}
	for {
		k, err := readChunk()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("restore eval store: %w", err)
		}
		v, err := readChunk()
		if err != nil {
			return fmt.Errorf("restore eval store: %w", err)
		}
		if err := wb.Set(k, v); err != nil {
			return fmt.Errorf("restore eval store: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("restore eval store: flush: %w", err)
	}
	return s.loadApplied()
}

// Tx is one store transaction (read-only inside View).
type Tx struct {
	txn *badger.Txn
	lim Limits
	// pruneBudget, set during one Prune, is how many task keys it may
	// still delete (maxPruneTaskDeletes).
	pruneBudget *int
	// uploads is the set uploads in progress expireUploads counted.
	uploads int
}

type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	if b.l != nil {
		b.l.Error(fmt.Sprintf(f, a...))
	}
}
func (b badgerLogger) Warningf(f string, a ...any) {
	if b.l != nil {
		b.l.Warn(fmt.Sprintf(f, a...))
	}
}
func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}

// --- encoding helpers ---

func metaKey(name string) []byte { return append([]byte{pMeta}, name...) }

func getUint(txn *badger.Txn, k []byte) (uint64, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var v uint64
	err = item.Value(func(b []byte) error {
		if len(b) != 8 {
			return newErr(evalrecord.CodeInvalidStoreRecord, "counter")
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	return v, err
}

func putUint(txn *badger.Txn, k []byte, v uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return txn.Set(k, b[:])
}

func getRecord(txn *badger.Txn, k []byte, v any) (bool, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, item.Value(func(b []byte) error { return msgpack.Unmarshal(b, v) })
}

func encode(v any) ([]byte, error) { return msgpack.Marshal(v) }

// encodeSized is encode into a buffer of hint bytes to start with: a
// finished task carries its sample (KiBs), which msgpack.Marshal's
// buffer reached by doubling from 64 bytes, zeroing each copy. The
// bytes are encode's.
func encodeSized(v any, hint int) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, hint))
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
