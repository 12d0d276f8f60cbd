package tracestore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/vmihailenco/msgpack/v5"
)

// encodeMessageFormat1 is format 1's encoder as the store wrote it until
// issue 19, byte for byte: format u8, n u16, n × idx u16, n × end u32
// (cumulative blob ends), then each record compressed alone. Kept to show
// that stores written before format 2 still read.
func encodeMessageFormat1(recs []msgRecord, jsons [][]byte) []byte {
	blobs := make([][]byte, len(jsons))
	total := 0
	for i, js := range jsons {
		blobs[i] = recordDict.Encode(nil, js)
		total += len(blobs[i])
	}
	b := make([]byte, 0, 3+6*len(recs)+total)
	b = append(b, recordFormatS2Dict1)
	b = binary.BigEndian.AppendUint16(b, uint16(len(recs)))
	for _, r := range recs {
		b = binary.BigEndian.AppendUint16(b, r.idx)
	}
	end := 0
	for _, blob := range blobs {
		end += len(blob)
		b = binary.BigEndian.AppendUint32(b, uint32(end))
	}
	for _, blob := range blobs {
		b = append(b, blob...)
	}
	return b
}

// testRecords makes n record JSONs of varied sizes at increasing indexes
// with gaps (rejected records leave holes).
func testRecords(rng *rand.Rand, n int) ([]msgRecord, [][]byte) {
	recs := make([]msgRecord, n)
	jsons := make([][]byte, n)
	idx := rng.IntN(3)
	for j := range n {
		js := fmt.Appendf(nil, `{"cursor":%d,"event":{"span_id":"%016x","name":"%s"},"kind":"observability","timestamp_ms":%d}`,
			idx, rng.Uint64(), bytes.Repeat([]byte("x"), rng.IntN(40)), rng.IntN(1e6))
		recs[j] = msgRecord{idx: uint16(idx), size: uint32(len(js))}
		jsons[j] = js
		idx += 1 + rng.IntN(2)
	}
	return recs, jsons
}

// chunked compresses jsons recordChunk at a time, as Prepare does.
func chunked(jsons [][]byte) [][]byte {
	var arena, scratch []byte
	var chunks [][]byte
	for c := 0; c < len(jsons); c += recordChunk {
		chunks = append(chunks, compressChunk(&arena, &scratch, bytes.Join(jsons[c:min(len(jsons), c+recordChunk)], nil)))
	}
	return chunks
}

// checkView reads every record of a message value, in a shuffled order
// (chunks are decompressed out of order and again), and checks that
// indexes the message does not hold are not found.
func checkView(t *testing.T, v []byte, recs []msgRecord, jsons [][]byte, rng *rand.Rand) {
	t.Helper()
	var m messageView
	if !m.decode(v) {
		t.Fatalf("format %d value of %d records does not decode", v[0], len(recs))
	}
	for _, j := range rng.Perm(len(recs)) {
		k, ok := m.find(recs[j].idx)
		if !ok || k != j || m.size[k] != recs[j].size {
			t.Fatalf("record %d (idx %d): found %d %v, size %d", j, recs[j].idx, k, ok, m.size[k])
		}
		got, err := m.record(k)
		if err != nil || !bytes.Equal(got, jsons[j]) {
			t.Fatalf("record %d: %q, %v; want %q", j, got, err, jsons[j])
		}
	}
	held := map[uint16]bool{}
	for _, r := range recs {
		held[r.idx] = true
	}
	for i := range uint16(200) {
		if _, ok := m.find(i); ok != held[i] {
			t.Fatalf("find(%d) = %v, held %v", i, ok, held[i])
		}
	}
}

// TestMessageView_ReadsBothFormats: a format 2 value (chunks) and a
// format 1 value (a block per record) of the same records read back the
// same records, at chunk edges too, and so does a format 2 value whose
// leading chunks were not written (evicted before the write).
func TestMessageView_ReadsBothFormats(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	for _, n := range []int{1, 2, recordChunk - 1, recordChunk, recordChunk + 1, 3*recordChunk + 5, 100} {
		recs, jsons := testRecords(rng, n)
		chunks := chunked(jsons)
		v2 := encodeMessage(recs, chunks)
		if v2[0] != recordFormatS2Dict1Chunks {
			t.Fatalf("format %d written", v2[0])
		}
		checkView(t, v2, recs, jsons, rng)
		checkView(t, encodeMessageFormat1(recs, jsons), recs, jsons, rng)
		if c := len(chunks) - 1; c > 0 {
			checkView(t, encodeMessage(recs[c*recordChunk:], chunks[c:]), recs[c*recordChunk:], jsons[c*recordChunk:], rng)
		}
	}
}

// TestMessageView_RefusesMalformedValues: truncations, a wrong format
// byte, and sizes that disagree with a chunk are refused or fail to read,
// never panic.
func TestMessageView_RefusesMalformedValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2))
	recs, jsons := testRecords(rng, 2*recordChunk+3)
	v := encodeMessage(recs, chunked(jsons))
	var m messageView
	for n := range len(v) {
		if m.decode(v[:n]) {
			t.Fatalf("a value cut at %d of %d decodes", n, len(v))
		}
	}
	if m.decode(append([]byte{9}, v[1:]...)) {
		t.Fatal("unknown format byte decodes")
	}
	bad := append([]msgRecord(nil), recs...)
	bad[3].size++ // the first chunk's sizes no longer match it
	if !m.decode(encodeMessage(bad, chunked(jsons))) {
		t.Fatal("header does not decode")
	}
	if _, err := m.record(3); err == nil {
		t.Fatal("a chunk whose sizes do not match reads")
	}
	if got, err := m.record(recordChunk); err != nil || !bytes.Equal(got, jsons[recordChunk]) {
		t.Fatalf("the next chunk: %q, %v", got, err)
	}
}

// FuzzMessageValue: any bytes as a message value decode or are refused
// without a panic, and every record a decoded value lists reads or fails
// cleanly; records encoded from the input read back exactly.
func FuzzMessageValue(f *testing.F) {
	rng := rand.New(rand.NewPCG(19, 3))
	for _, n := range []int{1, recordChunk + 1} {
		recs, jsons := testRecords(rng, n)
		f.Add(encodeMessage(recs, chunked(jsons)))
		f.Add(encodeMessageFormat1(recs, jsons))
	}
	f.Add([]byte{2, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		var m messageView
		if m.decode(v) {
			for j := range m.idx {
				if got, err := m.record(j); err == nil && len(got) != int(m.size[j]) {
					t.Fatalf("record %d: %d bytes, size %d", j, len(got), m.size[j])
				}
			}
		}
		// The input as records: split at every 7th byte.
		var recs []msgRecord
		var jsons [][]byte
		for i := 0; i < len(v) && len(recs) < 3*recordChunk; i += 7 {
			js := v[i:min(len(v), i+7)]
			recs = append(recs, msgRecord{idx: uint16(2 * len(recs)), size: uint32(len(js))})
			jsons = append(jsons, js)
		}
		if len(recs) == 0 {
			return
		}
		checkView(t, encodeMessage(recs, chunked(jsons)), recs, jsons, rng)
	})
}

// pagesOf is every page of a principal's events matching sel, walked from
// the start with small pages, as JSON.
func pagesOf(t *testing.T, s *Store, principal string, sel Selector) string {
	t.Helper()
	var out bytes.Buffer
	var after *uint64
	for {
		p, err := s.Query(principal, sel, QueryOptions{AfterCursor: after, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(p)
		out.Write(js)
		out.WriteByte('\n')
		if len(p.Events) == 0 {
			return out.String()
		}
		after = ptr(p.NextCursor)
	}
}

// chunkBatches: principals' batches of 1..60 spans over a few traces and
// runs (several chunks per message), under quotas that evict inside the
// batch being applied.
func chunkBatches(from, to uint64) []Batch {
	var bs []Batch
	for seq := from; seq <= to; seq++ {
		var recs []Record
		for i := range 1 + int(seq*37)%60 {
			recs = append(recs, Record{KindObservability, envelope(fmt.Sprintf("r%d", i%3), fmt.Sprintf("t%d", (int(seq)+i)%5), nil)})
		}
		bs = append(bs, Batch{Seq: seq, TimeMS: int64(seq) * 100, Principal: fmt.Sprintf("p%d", seq%2), Records: recs})
	}
	return bs
}

var chunkOptions = Options{MaxEvents: 300, MaxEventsPerPrincipal: 130, MaxQueryEvents: 7, MaxEventBytes: 4 << 10, MaxQueryBytes: 64 << 10}

func applyAll(t *testing.T, s *Store, bs []Batch) {
	t.Helper()
	for _, b := range bs {
		if _, err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
}

func allPages(t *testing.T, s *Store) string {
	t.Helper()
	var out string
	for _, p := range []string{"p0", "p1"} {
		for _, sel := range []Selector{nil, {"run_id": "r1"}, {"trace_id": "t2"}, {"run_id": "r0", "trace_id": "t3"}} {
			out += pagesOf(t, s, p, sel)
		}
	}
	return out
}

// TestStore_FormatOneStoreStillReadsAndTakesNewWrites: a store whose
// message values are all format 1 (as written before issue 19) answers
// byte-identically to one written in format 2, before and after it takes
// new (format 2) messages and evicts old ones, and across a restart.
func TestStore_FormatOneStoreStillReadsAndTakesNewWrites(t *testing.T) {
	ref := openStore(t, chunkOptions)
	applyAll(t, ref, chunkBatches(1, 30))
	dir := t.TempDir()
	old := openStoreAt(t, dir, chunkOptions)
	applyAll(t, old, chunkBatches(1, 30))
	// Rewrite every message value as format 1.
	rewritten := 0
	err := old.db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixMessage}})
		defer it.Close()
		var m messageView
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if !m.decode(v) || m.format != recordFormatS2Dict1Chunks {
				return fmt.Errorf("message %x does not decode as format 2", it.Item().Key())
			}
			recs := make([]msgRecord, len(m.idx))
			jsons := make([][]byte, len(m.idx))
			for j := range m.idx {
				js, err := m.record(j)
				if err != nil {
					return err
				}
				recs[j], jsons[j] = msgRecord{idx: m.idx[j], size: m.size[j]}, js
			}
			if err := txn.Set(it.Item().KeyCopy(nil), encodeMessageFormat1(recs, jsons)); err != nil {
				return err
			}
			rewritten++
		}
		return nil
	})
	if err != nil || rewritten < 5 {
		t.Fatalf("rewrote %d messages: %v", rewritten, err)
	}
	_ = old.Close()
	old = openStoreAt(t, dir, chunkOptions)
	want := allPages(t, ref)
	if got := allPages(t, old); got != want {
		t.Fatalf("format 1 store answers differently:\n%s\nwant:\n%s", got, want)
	}
	applyAll(t, ref, chunkBatches(31, 45))
	applyAll(t, old, chunkBatches(31, 45))
	if got, want := allPages(t, old), allPages(t, ref); got != want {
		t.Fatalf("mixed store answers differently:\n%s\nwant:\n%s", got, want)
	}
}

// TestStore_ChunkEvictedInItsOwnMessageIsSkipped: a batch larger than the
// principal's quota evicts its own first records before it is written:
// whole chunks of them are not written, records sharing a chunk with live
// ones are, and no page returns them.
func TestStore_ChunkEvictedInItsOwnMessageIsSkipped(t *testing.T) {
	s := openStore(t, Options{MaxEvents: 100, MaxEventsPerPrincipal: 20, MaxQueryEvents: 50})
	var recs []Record
	for range 40 {
		recs = append(recs, Record{KindObservability, envelope("r", "t", nil)})
	}
	if _, err := s.Apply(Batch{Seq: 1, TimeMS: 1, Principal: "p", Records: recs}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Query("p", nil, QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for i := 20; i < 40; i++ {
		want = append(want, Cursor(1, i))
	}
	if got := cursors(t, p); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cursors %v, want %v", got, want)
	}
	var m messageView
	err = s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(messageKey(0, 1))
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			if !m.decode(v) {
				return fmt.Errorf("undecodable")
			}
			if len(m.idx) != 40-recordChunk || m.idx[0] != recordChunk {
				return fmt.Errorf("message holds %d records from %d, want %d from %d", len(m.idx), m.idx[0], 40-recordChunk, recordChunk)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStore_Layout2DirectoryIsUpgradedOnItsFirstApply: a layout 2
// directory (format 1 values) opens and reads; its first apply records
// layout 3, which a build that reads only layout 2 refuses.
func TestStore_Layout2DirectoryIsUpgradedOnItsFirstApply(t *testing.T) {
	dir := t.TempDir()
	s := openStoreAt(t, dir, Options{})
	c := appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 1)
	s.m.Layout = upgradableLayout
	mb, _ := msgpack.Marshal(&s.m)
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(metaKey, mb) }); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	layout := func() int {
		t.Helper()
		var m meta
		err := s.db.View(func(txn *badger.Txn) error {
			it, err := txn.Get(metaKey)
			if err != nil {
				return err
			}
			return it.Value(func(v []byte) error { return msgpack.Unmarshal(v, &m) })
		})
		if err != nil {
			t.Fatal(err)
		}
		return m.Layout
	}
	s = openStoreAt(t, dir, Options{})
	if got := layout(); got != upgradableLayout {
		t.Fatalf("opening alone wrote layout %d", got)
	}
	if p, err := s.Query("alice", nil, QueryOptions{}); err != nil || fmt.Sprint(cursors(t, p)) != fmt.Sprint([]uint64{c}) {
		t.Fatalf("layout 2 store reads %v, %v", p, err)
	}
	appendOK(t, s, "alice", KindObservability, envelope("r", "t", nil), 2)
	if got := layout(); got != storeLayout {
		t.Fatalf("after an apply the layout is %d", got)
	}
}
