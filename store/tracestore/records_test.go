package tracestore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/s2"
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

// compressChunk returns the stored form of a chunk (the JSON of up to
// recordChunk2 records, concatenated), carved from *arena (a batch's
// chunks share a few allocations instead of one each, sized for the worst
// case). scratch is reused between calls.
func compressChunk(arena, scratch *[]byte, js []byte) []byte {
	if n := s2.MaxEncodedLen(len(js)); cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	enc := recordDict.Encode((*scratch)[:cap(*scratch)], js)
	if cap(*arena)-len(*arena) < len(enc) {
		*arena = make([]byte, 0, max(64<<10, len(enc))) // earlier chunks keep the old allocation
	}
	*arena = append(*arena, enc...)
	return (*arena)[len(*arena)-len(enc) : len(*arena) : len(*arena)]
}

// encodeMessageFormat2 is format 2's encoder as the store wrote it for an
// hour of issue 19, byte for byte (kept to show its values still read): format u8, n uvarint, n × idx (uvarint, the first as is and each
// next as the step from the one before, ≥ 1), n × size uvarint, then for
// each of the ceil(n/recordChunk2) chunks its compressed length uvarint,
// then the chunks. Record j is in chunk j/recordChunk2; a chunk's
// plain text is its records' JSON in order, so the sizes locate them.
// chunks[c] holds recs[c*recordChunk2:(c+1)*recordChunk2].
func encodeMessageFormat2(recs []msgRecord, chunks [][]byte) []byte {
	total := 0
	for _, c := range chunks {
		total += len(c)
	}
	b := make([]byte, 0, 1+binary.MaxVarintLen16+8*len(recs)+3*len(chunks)+total)
	b = append(b, recordFormatS2Dict1Chunks)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	prev := uint16(0)
	for j, r := range recs {
		if j == 0 {
			b = binary.AppendUvarint(b, uint64(r.idx))
		} else {
			b = binary.AppendUvarint(b, uint64(r.idx-prev))
		}
		prev = r.idx
	}
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(r.size))
	}
	for _, c := range chunks {
		b = binary.AppendUvarint(b, uint64(len(c)))
	}
	for _, c := range chunks {
		b = append(b, c...)
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

// chunked compresses jsons 16 at a time, as format 2 did.
func chunked(jsons [][]byte) [][]byte {
	var arena, scratch []byte
	var chunks [][]byte
	for c := 0; c < len(jsons); c += recordChunk2 {
		chunks = append(chunks, compressChunk(&arena, &scratch, bytes.Join(jsons[c:min(len(jsons), c+recordChunk2)], nil)))
	}
	return chunks
}

// grouped encodes recs in format 3 in a shuffled grouping order (records
// of one identity in index order, identities in any order).
func grouped(recs []msgRecord, jsons [][]byte, rng *rand.Rand) []byte {
	groups := 1 + rng.IntN(4)
	g := make([]int, len(recs))
	for i := range g {
		g[i] = rng.IntN(groups)
	}
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return g[x] - g[y] })
	return encodeGrouped(recs, jsons, order)
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
		if !ok || m.size(k) != int(recs[j].size) {
			t.Fatalf("record %d (idx %d): found %d %v", j, recs[j].idx, k, ok)
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

// TestMessageView_ReadsEveryFormat: a format 3 value (grouped chunks), a
// format 2 value (chunks in index order) and a format 1 value (a block per
// record) of the same records read back the same records, at chunk edges
// too, and so does a format 2 value whose leading chunks were not written.
func TestMessageView_ReadsEveryFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	for _, n := range []int{1, 2, recordChunk - 1, recordChunk, recordChunk + 1, recordChunk2 + 1, 3*recordChunk2 + 5, 100} {
		recs, jsons := testRecords(rng, n)
		v3 := grouped(recs, jsons, rng)
		if v3[0] != recordFormatS2Dict1Grouped {
			t.Fatalf("format %d written", v3[0])
		}
		checkView(t, v3, recs, jsons, rng)
		chunks := chunked(jsons)
		checkView(t, encodeMessageFormat2(recs, chunks), recs, jsons, rng)
		checkView(t, encodeMessageFormat1(recs, jsons), recs, jsons, rng)
		if c := len(chunks) - 1; c > 0 {
			checkView(t, encodeMessageFormat2(recs[c*recordChunk2:], chunks[c:]), recs[c*recordChunk2:], jsons[c*recordChunk2:], rng)
		}
	}
}

// TestMessageView_RefusesMalformedValues: truncations, a wrong format
// byte, and sizes that disagree with a chunk are refused or fail to read,
// never panic.
func TestMessageView_RefusesMalformedValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2))
	recs, jsons := testRecords(rng, 2*recordChunk2+3)
	ordered := make([]int, len(recs))
	for i := range ordered {
		ordered[i] = i
	}
	var m messageView
	for _, v := range [][]byte{encodeGrouped(recs, jsons, ordered), encodeMessageFormat2(recs, chunked(jsons))} {
		for n := range len(v) {
			if m.decode(v[:n]) {
				t.Fatalf("a format %d value cut at %d of %d decodes", v[0], n, len(v))
			}
		}
		if m.decode(append([]byte{9}, v[1:]...)) {
			t.Fatal("unknown format byte decodes")
		}
	}
	bad := append([]msgRecord(nil), recs...)
	bad[3].size++ // the first chunk's sizes no longer match it
	for _, v := range [][]byte{encodeGrouped(bad, jsons, ordered), encodeMessageFormat2(bad, chunked(jsons))} {
		if !m.decode(v) {
			t.Fatalf("format %d header does not decode", v[0])
		}
		if _, err := m.record(3); err == nil {
			t.Fatalf("format %d: a chunk whose sizes do not match reads", v[0])
		}
		j := recordChunk2
		if got, err := m.record(j); err != nil || !bytes.Equal(got, jsons[j]) {
			t.Fatalf("format %d: the next chunk: %q, %v", v[0], got, err)
		}
	}
}

// FuzzMessageValue: any bytes as a message value decode or are refused
// without a panic, and every record a decoded value lists reads or fails
// cleanly; records encoded from the input read back exactly.
func FuzzMessageValue(f *testing.F) {
	rng := rand.New(rand.NewPCG(19, 3))
	for _, n := range []int{1, recordChunk2 + 1} {
		recs, jsons := testRecords(rng, n)
		f.Add(grouped(recs, jsons, rng))
		f.Add(encodeMessageFormat2(recs, chunked(jsons)))
		f.Add(encodeMessageFormat1(recs, jsons))
	}
	f.Add([]byte{2, 1, 0, 0, 0})
	f.Add([]byte{3, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		var m messageView
		if m.decode(v) {
			for j := range m.n {
				if got, err := m.record(j); err == nil && len(got) != m.size(j) {
					t.Fatalf("record %d: %d bytes, size %d", j, len(got), m.size(j))
				}
			}
		}
		// The input as records: split at every 7th byte.
		var recs []msgRecord
		var jsons [][]byte
		for i := 0; i < len(v) && len(recs) < 3*recordChunk2; i += 7 {
			js := v[i:min(len(v), i+7)]
			recs = append(recs, msgRecord{idx: uint16(2 * len(recs)), size: uint32(len(js))})
			jsons = append(jsons, js)
		}
		if len(recs) == 0 {
			return
		}
		checkView(t, grouped(recs, jsons, rng), recs, jsons, rng)
		checkView(t, encodeMessageFormat2(recs, chunked(jsons)), recs, jsons, rng)
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

// TestStore_OlderFormatsStillReadAndTakeNewWrites: a store whose message
// values are format 1 (as written before issue 19) and format 2 answers
// byte-identically to one written in format 3, before and after it takes
// new (format 3) messages and evicts old ones, and across a restart.
func TestStore_OlderFormatsStillReadAndTakeNewWrites(t *testing.T) {
	ref := openStore(t, chunkOptions)
	applyAll(t, ref, chunkBatches(1, 30))
	dir := t.TempDir()
	old := openStoreAt(t, dir, chunkOptions)
	applyAll(t, old, chunkBatches(1, 30))
	// Rewrite the message values as format 1 and format 2, alternately.
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
			if !m.decode(v) || m.format != recordFormatS2Dict1Grouped {
				return fmt.Errorf("message %x does not decode as format 3", it.Item().Key())
			}
			type rec struct {
				r  msgRecord
				js []byte
			}
			var rs []rec
			for i := range maxMessageRecords {
				if j, ok := m.find(uint16(i)); ok {
					js, err := m.record(j)
					if err != nil {
						return err
					}
					rs = append(rs, rec{msgRecord{idx: uint16(i), size: uint32(m.size(j))}, js})
				}
			}
			recs := make([]msgRecord, len(rs))
			jsons := make([][]byte, len(rs))
			for k, r := range rs {
				recs[k], jsons[k] = r.r, r.js
			}
			nv := encodeMessageFormat1(recs, jsons)
			if rewritten%2 == 1 {
				nv = encodeMessageFormat2(recs, chunked(jsons))
			}
			if err := txn.Set(it.Item().KeyCopy(nil), nv); err != nil {
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

// TestStore_RecordsEvictedInTheirOwnMessageAreSkipped: a batch larger
// than the principal's quota evicts its own first records before it is
// written; the value keeps them (one value per message), and no page
// returns them.
func TestStore_RecordsEvictedInTheirOwnMessageAreSkipped(t *testing.T) {
	s := openStore(t, Options{MaxEvents: 100, MaxEventsPerPrincipal: 20, MaxQueryEvents: 50})
	var recs []Record
	for i := range 40 {
		recs = append(recs, Record{KindObservability, envelope(fmt.Sprintf("r%d", i%3), "t", nil)})
	}
	if _, err := s.Apply(Batch{Seq: 1, TimeMS: 1, Principal: "p", Records: recs}); err != nil {
		t.Fatal(err)
	}
	for _, sel := range []Selector{nil, {"run_id": "r1"}} {
		p, err := s.Query("p", sel, QueryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var want []uint64
		for i := 20; i < 40; i++ {
			if sel == nil || i%3 == 1 {
				want = append(want, Cursor(1, i))
			}
		}
		if got := cursors(t, p); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%v: cursors %v, want %v", sel, got, want)
		}
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
