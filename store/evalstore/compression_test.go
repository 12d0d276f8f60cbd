package evalstore

import (
	"testing"

	"github.com/dgraph-io/badger/v4/options"

	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
)

// A data dir written by a build whose tables were Snappy-compressed opens
// and reads under today's uncompressed tables: Badger takes each table's
// compression from its manifest, not from the options.
func TestStore_OpensTablesOfCompressedBuilds(t *testing.T) {
	opts := Options{Dir: t.TempDir(), MemTableSize: 8 << 20}
	old, err := open(opts, badgerOptions(opts).WithCompression(options.Snappy).WithBlockCacheSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	body, err := canonjson.Canonicalize([]byte(`{"cases":[{"id":"c1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := evalrecord.SetRecord{Scope: "app", ID: "s", Version: "v1", Digest: canonjson.DigestBytes(body), Body: body, CreatedAt: 1}
	if _, err := old.Update(1, func(tx *Tx) error { _, err := tx.PutSet(rec); return err }); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil { // flushes the memtable into a Snappy table
		t.Fatal(err)
	}

	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.db.Tables()) == 0 {
		t.Fatal("the old build's memtable was not flushed into a table: the test reads nothing compressed")
	}
	if s.AppliedIndex() != 1 {
		t.Fatalf("applied index %d, want 1", s.AppliedIndex())
	}
	var got *evalrecord.SetRecord
	if err := s.View(func(tx *Tx) error {
		var err error
		got, err = tx.GetSet("app", "s", "v1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got.Digest != rec.Digest || string(got.Body) != string(rec.Body) {
		t.Fatalf("read %+v, want %+v", got, rec)
	}
}
