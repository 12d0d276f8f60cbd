package tracestore

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/klauspost/compress/s2"
)

// Stored records are compressed with S2 and a fixed dictionary of typical
// records (key names, structure, common values). The dictionary is part of
// the format: both format bytes below mean this text, byte for byte; a new
// dictionary needs a new format byte.
//
// Format 1 (written until issue 19) compressed each record alone: a
// ~500-byte telemetrygen span stored in ~210 B, because what one span
// shares with its neighbours (the same keys, ids, timestamps) was not
// available to its compressor. Format 2 compresses up to recordChunk
// consecutive records of a message together: the same span stores in
// ~70 B. A page that returns one record of a chunk decompresses the chunk
// (~8 KiB, a few µs); a page of neighbouring records decompresses each
// chunk once. Both formats are read; only format 2 is written.
const (
	recordFormatS2Dict1       byte = 1
	recordFormatS2Dict1Chunks byte = 2
)

// recordChunk is how many records format 2 compresses together. It is
// part of format 2 (a reader derives the chunk of a record from its
// position): 8 stored the bench span in ~77 B, 16 in ~68 B, 64 in ~61 B,
// while a page's work for one record grows with it.
const recordChunk = 16

// recordDictText: the most common record kind last (S2 prefers near
// offsets).
const recordDictText = `{"cursor":1,"event":{"schema_version":1,"type":"node_completed","sequence":1,"timestamp":1,` +
	`"workflow_id":"","workflow_kind":"sequential","invocation_id":"","node_id":"","node_type":"agent","outcome":"ok",` +
	`"pause_kind":"","parent":"","join_id":"","from":"","to":"","fork_id":"","iteration":0,"branch_count":0,` +
	`"completed_count":0,"attempt":1},"identity":{"invocation_id":"","workflow_id":""},"kind":"workflow_lifecycle","timestamp_ms":` +
	`{"cursor":1,"event":{"content_captured":false,"event":"adk.model.call","measurements":{"count":1,"duration_ms":1,"duration":1,` +
	`"system_time":1,"monotonic_time":1,"bytes":1,"frames":1},"metadata":{"agent":"","attributes":{"hook":"before_model",` +
	`"plugin":"","outcome":"continue"},"call_id":"","invocation_id":"","model":"","parent_id":"","run_id":"","session":"",` +
	`"span_id":"","tool":"","trace_flags":1,"trace_id":"","tracestate":""},"schema_version":1,"timestamp_ms":1},` +
	`"identity":{"invocation_id":"","run_id":"","trace_id":""},"kind":"observability","timestamp_ms":` +
	`{"cursor":1,"event":{"attributes":{"adk.gen_ai.mapping.version":"","capture_error":"","error.type":"",` +
	`"gen_ai.operation.name":"execute_tool","gen_ai.provider.name":"","gen_ai.response.finish_reasons":["stop"],` +
	`"gen_ai.response.id":"","gen_ai.response.model":"","gen_ai.tool.call.id":"","gen_ai.tool.name":"",` +
	`"gen_ai.usage.cache_read.input_tokens":0,"gen_ai.usage.reasoning_tokens":0,"hook":"","invocation_id":"",` +
	`"outcome":"","phase":"","status":"error","stream":"","workflow_id":""},"kind":"internal","parent_span_id":"",` +
	`"tracestate":""},"identity":{"invocation_id":"","run_id":"","trace_id":"","workflow_id":""},"kind":"observability",` +
	`"timestamp_ms":` +
	`{"cursor":1,"event":{"attributes":{"gen_ai.operation.name":"chat","gen_ai.provider.name":"openai",` +
	`"gen_ai.request.model":"","gen_ai.usage.input_tokens":1,"gen_ai.usage.output_tokens":1,"run_id":"run-"},` +
	`"duration_nano":1,"end_time_unix_nano":1,"kind":"client","name":"gen_ai.chat","phase":"end","schema_version":2,` +
	`"signal":"span","span_id":"0000000000000000","start_time_unix_nano":1,"status":"ok","trace_flags":1,` +
	`"trace_id":"00000000000000000000000000000000"},"identity":{"run_id":"run-","trace_id":"00000000000000000000000000000000"},` +
	`"kind":"observability","timestamp_ms":`

var recordDict = s2.MakeDict([]byte(recordDictText), []byte(`{"cursor":`))

// compressChunk returns the stored form of a chunk (the JSON of up to
// recordChunk records, concatenated), carved from *arena (a batch's
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

// msgRecord is one accepted record of a message: its index in the message
// and its JSON size (what quotas and pages count).
type msgRecord struct {
	idx  uint16
	size uint32
}

// maxMessageRecords bounds a message value's record count (a batch holds
// at most 65 535 records).
const maxMessageRecords = 1 << CursorIndexBits

// encodeMessage is the value of a principal's message key (0x04), format
// 2: format u8, n uvarint, n × idx (uvarint, the first as is and each
// next as the step from the one before, ≥ 1), n × size uvarint, then for
// each of the ceil(n/recordChunk) chunks its compressed length uvarint,
// then the chunks. Record j is in chunk j/recordChunk; a chunk's
// plain text is its records' JSON in order, so the sizes locate them.
// chunks[c] holds recs[c*recordChunk:(c+1)*recordChunk].
func encodeMessage(recs []msgRecord, chunks [][]byte) []byte {
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

// messageView reads a message value of either format. Its slices are
// reused from one message to the next; records it returns are fresh.
type messageView struct {
	v      []byte
	format byte
	idx    []uint16
	size   []uint32 // JSON size; format 1: read from the block header
	off    []uint32 // offset in the chunk's plain text (format 2)
	chunks []int    // chunk c is v[chunks[c]:chunks[c+1]]
	plainC int      // the chunk plain holds, or -1
	plain  []byte
}

// chunkOf is the chunk holding record j.
func (m *messageView) chunkOf(j int) int {
	if m.format == recordFormatS2Dict1 {
		return j
	}
	return j / recordChunk
}

// decode parses a message value's header. It reports false for a
// malformed value; it never panics (FuzzMessageValue).
func (m *messageView) decode(v []byte) bool {
	*m = messageView{idx: m.idx[:0], size: m.size[:0], off: m.off[:0], chunks: m.chunks[:0], plainC: -1, v: v}
	if len(v) < 1 {
		return false
	}
	m.format = v[0]
	switch m.format {
	case recordFormatS2Dict1:
		return m.decode1(v)
	case recordFormatS2Dict1Chunks:
		return m.decode2(v)
	}
	return false
}

// decode1 reads format 1: format u8, n u16, n × idx u16, n × end u32
// (cumulative blob ends), blobs, each record its own S2 block.
func (m *messageView) decode1(v []byte) bool {
	if len(v) < 3 {
		return false
	}
	n := int(binary.BigEndian.Uint16(v[1:]))
	head := 3 + 6*n
	if len(v) < head {
		return false
	}
	m.chunks = append(m.chunks, head)
	for j := 0; j < n; j++ {
		idx := binary.BigEndian.Uint16(v[3+2*j:])
		if j > 0 && idx <= m.idx[j-1] {
			return false
		}
		end := head + int(binary.BigEndian.Uint32(v[3+2*n+4*j:]))
		if end < m.chunks[j] || end > len(v) {
			return false
		}
		size, err := s2.DecodedLen(v[m.chunks[j]:end])
		if err != nil {
			return false
		}
		m.idx = append(m.idx, idx)
		m.size = append(m.size, uint32(size))
		m.off = append(m.off, 0)
		m.chunks = append(m.chunks, end)
	}
	return true
}

// decode2 reads format 2 (encodeMessage).
func (m *messageView) decode2(v []byte) bool {
	p := 1
	uv := func() (uint64, bool) {
		x, k := binary.Uvarint(v[p:])
		if k <= 0 {
			return 0, false
		}
		p += k
		return x, true
	}
	n64, ok := uv()
	if !ok || n64 > maxMessageRecords || n64 > uint64(len(v)) {
		return false
	}
	n := int(n64)
	idx := uint64(0)
	for j := 0; j < n; j++ {
		d, ok := uv()
		if !ok || j > 0 && d == 0 {
			return false
		}
		idx += d
		if idx >= maxMessageRecords {
			return false
		}
		m.idx = append(m.idx, uint16(idx))
	}
	var off uint64
	for j := 0; j < n; j++ {
		s, ok := uv()
		if !ok || s > MaxEventBytesLimit {
			return false
		}
		if j%recordChunk == 0 {
			off = 0
		}
		m.size = append(m.size, uint32(s))
		m.off = append(m.off, uint32(off))
		off += s
	}
	nc := (n + recordChunk - 1) / recordChunk
	lens := make([]uint64, 0, nc)
	total := uint64(0)
	for c := 0; c < nc; c++ {
		l, ok := uv()
		if !ok || l > uint64(len(v)) {
			return false
		}
		lens = append(lens, l)
		total += l
	}
	if total != uint64(len(v)-p) {
		return false
	}
	m.chunks = append(m.chunks, p)
	for _, l := range lens {
		p += int(l)
		m.chunks = append(m.chunks, p)
	}
	return true
}

// find returns the position of record idx in the message, or false if
// the message does not hold it (evicted before it was written).
func (m *messageView) find(idx uint16) (int, bool) {
	j, ok := slices.BinarySearch(m.idx, idx)
	return j, ok
}

// record returns record j's JSON, decompressing its chunk unless it is the
// one decompressed last. The result is the caller's (never reused).
func (m *messageView) record(j int) ([]byte, error) {
	c := m.chunkOf(j)
	if c != m.plainC {
		blob := m.v[m.chunks[c]:m.chunks[c+1]]
		n, err := s2.DecodedLen(blob)
		if err != nil {
			return nil, err
		}
		last := c
		if m.format == recordFormatS2Dict1Chunks {
			last = min(len(m.idx), (c+1)*recordChunk) - 1
		}
		if n != int(m.off[last])+int(m.size[last]) {
			return nil, errCorruptChunk
		}
		plain, err := recordDict.Decode(make([]byte, 0, n), blob)
		if err != nil {
			return nil, err
		}
		m.plain, m.plainC = plain, c
	}
	off, size := int(m.off[j]), int(m.size[j])
	if off+size > len(m.plain) {
		return nil, errCorruptChunk
	}
	if m.format == recordFormatS2Dict1 {
		return m.plain, nil
	}
	return m.plain[off : off+size : off+size], nil
}

var errCorruptChunk = errors.New("tracestore: record chunk does not match its records' sizes")

// encodeManifest is the value of a principal's manifest key (0x06): the
// message's stream time i64, n u16, n × (idx u16, size u32) of the records
// it stored, then the selector hashes of the groups it wrote (u64 each).
// Open rebuilds the order index from manifests alone (the LSM), without
// reading a record.
func encodeManifest(ts int64, recs []msgRecord, sels []uint64) []byte {
	b := make([]byte, 0, 10+6*len(recs)+8*len(sels))
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	b = binary.BigEndian.AppendUint16(b, uint16(len(recs)))
	for _, r := range recs {
		b = binary.BigEndian.AppendUint16(b, r.idx)
		b = binary.BigEndian.AppendUint32(b, r.size)
	}
	for _, h := range sels {
		b = binary.BigEndian.AppendUint64(b, h)
	}
	return b
}

type manifest struct {
	ts   int64
	recs []msgRecord // idx and size only
	sels []uint64
}

func decodeManifest(b []byte) (manifest, bool) {
	var m manifest
	if len(b) < 10 {
		return m, false
	}
	m.ts = int64(binary.BigEndian.Uint64(b))
	n := int(binary.BigEndian.Uint16(b[8:]))
	p := 10
	if len(b) < p+6*n || (len(b)-p-6*n)%8 != 0 {
		return m, false
	}
	m.recs = make([]msgRecord, n)
	for i := range m.recs {
		m.recs[i] = msgRecord{idx: binary.BigEndian.Uint16(b[p:]), size: binary.BigEndian.Uint32(b[p+2:])}
		p += 6
	}
	for ; p < len(b); p += 8 {
		m.sels = append(m.sels, binary.BigEndian.Uint64(b[p:]))
	}
	return m, true
}
