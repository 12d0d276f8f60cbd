package respcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/internal/canonjson"
)

// Modes.
const (
	ModeRead      = "read"      // answer from the cache; never store
	ModeWrite     = "write"     // call the provider and store; never answer from the cache
	ModeReadWrite = "readwrite" // answer hits, store misses (the default)
	ModeOff       = "off"       // no cache
)

// Modes lists the modes in a fixed order.
func Modes() []string { return []string{ModeRead, ModeWrite, ModeReadWrite, ModeOff} }

// DefaultMaxBytes bounds the cache's entries by default.
const DefaultMaxBytes = 1 << 30

// Error codes.
const (
	CodeCacheUnavailable = "response_cache_unavailable"
	CodeInvalidMode      = "invalid_cache_mode"
)

// Error is the package's typed error.
type Error struct {
	Code   string
	Detail string
	Err    error
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Code
	}
	return e.Code + ": " + e.Detail
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Config configures Open.
type Config struct {
	Dir      string
	Mode     string // a Modes value; "" is readwrite
	MaxBytes int64  // 0 is DefaultMaxBytes
}

// Stats counts what the cache did.
type Stats struct {
	Hits      int64 `json:"hits"`
	Misses    int64 `json:"misses"`
	Writes    int64 `json:"writes"`
	Corrupt   int64 `json:"corrupt"`
	Evictions int64 `json:"evictions"`
}

// Cache is an open response cache. Safe for concurrent use.
type Cache struct {
	db       *badger.DB
	mode     string
	maxBytes int64

	hits, misses, writes, corrupt, evictions atomic.Int64

	mu   sync.Mutex // guards seq, size and eviction
	seq  uint64
	size int64
}

// Key prefixes: r/<sha256> is an entry, t/<seq be64><sha256> its place in
// insertion order with the entry's size as the value.
var (
	prefixEntry = []byte("r/")
	prefixOrder = []byte("t/")
)

// CheckMode validates a mode name.
func CheckMode(mode string) error {
	for _, m := range Modes() {
		if mode == m {
			return nil
		}
	}
	return &Error{Code: CodeInvalidMode, Detail: mode + " (valid: " + strings.Join(Modes(), ", ") + ")"}
}

// Open opens (or creates) the cache in cfg.Dir. With mode off it returns
// nil and no error.
func Open(cfg Config) (*Cache, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeReadWrite
	}
	if err := CheckMode(cfg.Mode); err != nil {
		return nil, err
	}
	if cfg.Mode == ModeOff {
		return nil, nil
	}
	if cfg.Dir == "" {
		return nil, &Error{Code: CodeCacheUnavailable, Detail: "no directory"}
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	// Small tables: a cache run is a CLI process next to a model client,
	// not a server; 8 MiB memtables keep its RSS low.
	bo := badger.DefaultOptions(cfg.Dir).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(4 << 20).
		WithIndexCacheSize(4 << 20).
		WithNumCompactors(2).
		WithValueLogFileSize(64 << 20).
		WithLogger(nil)
	db, err := openBadger(bo)
	if err != nil {
		return nil, &Error{Code: CodeCacheUnavailable, Detail: cfg.Dir + ": " + firstLine(err.Error()), Err: err}
	}
	c := &Cache{db: db, mode: cfg.Mode, maxBytes: cfg.MaxBytes}
	if err := c.loadOrder(); err != nil {
		_ = db.Close()
		return nil, &Error{Code: CodeCacheUnavailable, Detail: cfg.Dir + ": " + firstLine(err.Error()), Err: err}
	}
	return c, nil
}

// openBadger opens Badger, turning a panic on a damaged directory into an
// error.
func openBadger(bo badger.Options) (db *badger.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("badger: %v", p)
		}
	}()
	return badger.Open(bo)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// loadOrder reads the insertion index: the next sequence number and the
// total size.
func (c *Cache) loadOrder() error {
	return c.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefixOrder, PrefetchValues: true, PrefetchSize: 256})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) == len(prefixOrder)+8+sha256.Size {
				c.seq = max(c.seq, binary.BigEndian.Uint64(k[len(prefixOrder):])+1)
			}
			_ = it.Item().Value(func(v []byte) error {
				if len(v) == 8 {
					c.size += int64(binary.BigEndian.Uint64(v))
				}
				return nil
			})
		}
		return nil
	})
}

// Close closes the store.
func (c *Cache) Close() error {
	if c == nil {
		return nil
	}
	return c.db.Close()
}

// Mode is the cache's mode.
func (c *Cache) Mode() string { return c.mode }

// Stats returns the counters so far.
func (c *Cache) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Writes: c.writes.Load(), Corrupt: c.corrupt.Load(), Evictions: c.evictions.Load()}
}

// Key is the cache key of one call.
func Key(provider, modelName string, req *model.Request, sampleIndex int) ([sha256.Size]byte, error) {
	body, err := canonjson.Marshal(req)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(provider), []byte(modelName), body, []byte(strconv.Itoa(sampleIndex))} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k, nil
}

// Wrap returns p answering through the cache for one sample.
func (c *Cache) Wrap(p model.Provider, modelName string, sampleIndex int) model.Provider {
	if c == nil {
		return p
	}
	return &provider{c: c, p: p, model: modelName, sample: sampleIndex}
}

type provider struct {
	c      *Cache
	p      model.Provider
	model  string
	sample int
}

func (p *provider) Name() string { return p.p.Name() }

func (p *provider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	key, err := Key(p.p.Name(), p.model, req, p.sample)
	if err != nil {
		return p.p.Generate(ctx, req) // not canonicalisable: never cached
	}
	c := p.c
	if c.mode == ModeRead || c.mode == ModeReadWrite {
		if resp, ok := c.get(key); ok {
			c.hits.Add(1)
			return resp, nil
		}
		c.misses.Add(1)
	}
	resp, err := p.p.Generate(ctx, req)
	if err != nil || resp == nil || !cacheable(resp) {
		return resp, err
	}
	if c.mode == ModeWrite || c.mode == ModeReadWrite {
		c.put(key, resp)
	}
	return resp, nil
}

// refusals are finish reasons (OpenAI, Gemini, Anthropic spellings, lower
// case) that mean the model declined: never cached.
var refusals = map[string]bool{
	"content_filter": true, "refusal": true, "safety": true, "recitation": true,
	"blocklist": true, "prohibited_content": true, "spii": true, "malformed_function_call": true,
}

func cacheable(r *model.Response) bool {
	if refusals[strings.ToLower(r.FinishReason)] {
		return false
	}
	return len(r.Message.Parts) > 0
}

// entry is a stored value: the key it was stored under, the payload, and
// the payload's SHA-256.
type entry struct {
	Key      []byte          `json:"key"`
	Response json.RawMessage `json:"response"`
	Sum      []byte          `json:"sum"`
}

func entryKey(k [sha256.Size]byte) []byte { return append(append([]byte{}, prefixEntry...), k[:]...) }

// get returns the stored response for key; a value that fails its checks
// is a miss, counted and deleted.
func (c *Cache) get(key [sha256.Size]byte) (*model.Response, bool) {
	var raw []byte
	err := c.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(entryKey(key))
		if err != nil {
			return err
		}
		raw, err = it.ValueCopy(nil)
		return err
	})
	if err != nil {
		if !errors.Is(err, badger.ErrKeyNotFound) {
			c.corrupt.Add(1)
		}
		return nil, false
	}
	var e entry
	sum := sha256.Sum256(nil)
	ok := json.Unmarshal(raw, &e) == nil && bytes.Equal(e.Key, key[:])
	if ok {
		sum = sha256.Sum256(e.Response)
		ok = bytes.Equal(e.Sum, sum[:])
	}
	var resp model.Response
	if ok {
		dec := json.NewDecoder(bytes.NewReader(e.Response))
		dec.DisallowUnknownFields()
		ok = dec.Decode(&resp) == nil
	}
	if !ok {
		c.corrupt.Add(1)
		_ = c.db.Update(func(txn *badger.Txn) error { return txn.Delete(entryKey(key)) })
		return nil, false
	}
	return &resp, true
}

// put stores resp under key and evicts the oldest entries past the bound.
// A failure to store is not the run's failure: the answer is returned
// anyway and the next run misses.
func (c *Cache) put(key [sha256.Size]byte, resp *model.Response) {
	payload, err := json.Marshal(resp)
	if err != nil {
		return
	}
	sum := sha256.Sum256(payload)
	val, err := json.Marshal(entry{Key: key[:], Response: payload, Sum: sum[:]})
	if err != nil {
		return
	}
	size := int64(len(val) + 2*len(key) + 32)
	c.mu.Lock()
	seq := c.seq
	c.seq++
	c.mu.Unlock()
	order := make([]byte, 0, len(prefixOrder)+8+sha256.Size)
	order = append(order, prefixOrder...)
	order = binary.BigEndian.AppendUint64(order, seq)
	order = append(order, key[:]...)
	err = c.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(entryKey(key), val); err != nil {
			return err
		}
		return txn.Set(order, binary.BigEndian.AppendUint64(nil, uint64(size)))
	})
	if err != nil {
		return
	}
	c.writes.Add(1)
	c.mu.Lock()
	c.size += size
	over := c.size > c.maxBytes
	c.mu.Unlock()
	if over {
		c.evict()
	}
}

// evict deletes the oldest entries until the cache is at 90 % of its
// bound. One evictor at a time.
func (c *Cache) evict() {
	c.mu.Lock()
	defer c.mu.Unlock()
	target := c.maxBytes / 10 * 9
	for c.size > target {
		var keys [][]byte
		var freed int64
		_ = c.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefixOrder, PrefetchValues: true, PrefetchSize: 64})
			defer it.Close()
			for it.Rewind(); it.Valid() && c.size-freed > target && len(keys) < 1000; it.Next() {
				k := it.Item().KeyCopy(nil)
				keys = append(keys, k)
				_ = it.Item().Value(func(v []byte) error {
					if len(v) == 8 {
						freed += int64(binary.BigEndian.Uint64(v))
					}
					return nil
				})
			}
			return nil
		})
		if len(keys) == 0 {
			c.size = 0
			return
		}
		wb := c.db.NewWriteBatch()
		for _, k := range keys {
			_ = wb.Delete(k)
			if len(k) == len(prefixOrder)+8+sha256.Size {
				_ = wb.Delete(append(append([]byte{}, prefixEntry...), k[len(prefixOrder)+8:]...))
			}
		}
		if wb.Flush() != nil {
			return
		}
		c.evictions.Add(int64(len(keys)))
		c.size -= freed
	}
}
