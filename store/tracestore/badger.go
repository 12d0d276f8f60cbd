package tracestore

import (
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// BadgerTuning sizes Badger (store/DESIGN.md, "Badger sizing"). A zero
// field takes the default for the store's profile (Config.Small or the
// 2-core node). Sizing is node-local: it changes memory, disk and speed,
// never what a query answers, so nodes may differ here.
type BadgerTuning struct {
	MemTableSize            int64 // bytes per memtable; each is allocated up front (+15%)
	NumMemtables            int   // memtables in memory, the mutable one included
	ValueThreshold          int64 // values at or above this go to the value log; ≤ 15% of MemTableSize
	BlockCacheSize          int64 // decompressed data blocks; must be > 0 with compression
	IndexCacheSize          int64 // table indexes and bloom filters
	BaseTableSize           int64 // SST size (every level: the multiplier is 1)
	NumLevelZeroTables      int   // L0 tables before compaction starts
	NumLevelZeroTablesStall int   // L0 tables at which writes stall
	ValueLogFileSize        int64 // value-log file size (mmapped at twice this)
	NumCompactors           int   // concurrent compactions; never 1
	// Compression is "snappy" (default), "zstd" or "none".
	Compression string
	// PageOutInterval is how often the pages of the mapped value-log
	// files are handed back to the kernel (MADV_PAGEOUT, Linux): Badger
	// writes and reads the value log through mmap, so every page it ever
	// wrote stays in the process's RSS until the kernel needs memory.
	// Negative: never.
	PageOutInterval time.Duration
}

// defaultTuning is the 2-core, 24 GiB node shared with NATS and workers.
// Messages (a principal's compressed records of one stream message) go to
// the value log: the LSM then holds keys, value pointers and the small
// index groups, so compactions move tens of bytes per record, and the LSM
// of 1M events (~60 MB) stays in the page cache. Two L0 tables, not five:
// every read probes each L0 table, and the 1M-event page measured 1.5×
// the 10k one with two against 2.4× with five (store/DESIGN.md).
var defaultTuning = BadgerTuning{
	MemTableSize: 8 << 20, NumMemtables: 3, ValueThreshold: 256,
	BlockCacheSize: 0, IndexCacheSize: 0, BaseTableSize: 4 << 20,
	NumLevelZeroTables: 2, NumLevelZeroTablesStall: 10, ValueLogFileSize: 32 << 20,
	NumCompactors: 2, Compression: "none", PageOutInterval: DefaultPageOutInterval,
}

// DefaultPageOutInterval is the node's PageOutInterval: a saturated node
// writes ~5-10 MB of value log per second, so RSS holds at most a few
// seconds of it beyond what queries touch.
const DefaultPageOutInterval = 5 * time.Second

// smallTuning is for tests: many stores per process.
var smallTuning = BadgerTuning{
	MemTableSize: 8 << 20, NumMemtables: 2, ValueThreshold: 256,
	BlockCacheSize: 8 << 20, IndexCacheSize: 4 << 20, BaseTableSize: 2 << 20,
	NumLevelZeroTables: 2, NumLevelZeroTablesStall: 8, ValueLogFileSize: 16 << 20,
	NumCompactors: 2, Compression: "snappy", PageOutInterval: -1,
}

// resolve fills zero fields from def and checks Badger's traps: a
// ValueThreshold above 15% of the memtable fails at open, BlockCacheSize 0
// panics with compression, NumCompactors 1 deadlocks compaction.
func (t BadgerTuning) resolve(def BadgerTuning) (BadgerTuning, error) {
	or64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	or := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	or64(&t.MemTableSize, def.MemTableSize)
	or(&t.NumMemtables, def.NumMemtables)
	or64(&t.ValueThreshold, def.ValueThreshold)
	or64(&t.BlockCacheSize, def.BlockCacheSize)
	or64(&t.IndexCacheSize, def.IndexCacheSize)
	or64(&t.BaseTableSize, def.BaseTableSize)
	or(&t.NumLevelZeroTables, def.NumLevelZeroTables)
	or(&t.NumLevelZeroTablesStall, def.NumLevelZeroTablesStall)
	or64(&t.ValueLogFileSize, def.ValueLogFileSize)
	or(&t.NumCompactors, def.NumCompactors)
	if t.PageOutInterval == 0 {
		t.PageOutInterval = def.PageOutInterval
	}
	if t.Compression == "" {
		t.Compression = def.Compression
	}
	bad := func(f, r string) (BadgerTuning, error) {
		return t, fmt.Errorf("%w: badger %s %s", ErrInvalidOptions, f, r)
	}
	switch {
	case t.MemTableSize < 1<<20 || t.NumMemtables < 1 || t.ValueThreshold < 1 || t.BlockCacheSize < 0 ||
		t.IndexCacheSize < 0 || t.BaseTableSize < 1<<20 || t.NumLevelZeroTables < 1 || t.ValueLogFileSize < 1<<20:
		return bad("sizes", "out of range")
	case t.ValueThreshold*100 > t.MemTableSize*15:
		return bad("ValueThreshold", "above 15% of MemTableSize")
	case t.NumLevelZeroTablesStall <= t.NumLevelZeroTables:
		return bad("NumLevelZeroTablesStall", "must exceed NumLevelZeroTables")
	case t.NumCompactors < 2:
		return bad("NumCompactors", "must be at least 2")
	case t.Compression != "snappy" && t.Compression != "zstd" && t.Compression != "none":
		return bad("Compression", "must be snappy, zstd or none")
	case t.Compression != "none" && t.BlockCacheSize == 0:
		return bad("BlockCacheSize", "must be > 0 with compression")
	}
	return t, nil
}

// badgerOptions builds Badger's options. Conflict detection is off: the
// store writes only through WriteBatch from one applier. Metrics are off:
// they cost an expvar map update per bloom-filter probe on every get.
func badgerOptions(cfg Config) (badger.Options, BadgerTuning, error) {
	def := defaultTuning
	if cfg.Small {
		def = smallTuning
	}
	t, err := cfg.Badger.resolve(def)
	if err != nil {
		return badger.Options{}, t, err
	}
	comp := map[string]options.CompressionType{"snappy": options.Snappy, "zstd": options.ZSTD, "none": options.None}[t.Compression]
	o := badger.DefaultOptions(cfg.Dir).
		WithLogger(nil).
		WithMetricsEnabled(false).
		WithSyncWrites(false).
		WithDetectConflicts(false).
		WithMemTableSize(t.MemTableSize).
		WithNumMemtables(t.NumMemtables).
		WithValueThreshold(t.ValueThreshold).
		WithBlockCacheSize(t.BlockCacheSize).
		WithIndexCacheSize(t.IndexCacheSize).
		WithBaseTableSize(t.BaseTableSize).
		WithNumLevelZeroTables(t.NumLevelZeroTables).
		WithNumLevelZeroTablesStall(t.NumLevelZeroTablesStall).
		WithValueLogFileSize(t.ValueLogFileSize).
		WithNumCompactors(t.NumCompactors).
		WithCompression(comp)
	o.TableSizeMultiplier = 1
	if cfg.InMemory {
		// No value log in memory: a value above the threshold is refused
		// (and Badger v4.9.6 panics formatting that error), so keep every
		// value in the LSM, up to the batch limit (and Badger's 1 MiB cap).
		o = o.WithInMemory(true).WithDir("").WithValueDir("").WithValueThreshold(min(t.MemTableSize*15/100, 1<<20))
	}
	return o, t, nil
}
