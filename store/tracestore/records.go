package tracestore

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/klauspost/compress/s2"
)

// Stored records are compressed with S2 and a fixed dictionary of typical
// records (key names, structure, common values). The dictionary is part of
// the format: every format byte below means this text, byte for byte; a
// new dictionary needs a new format byte.
//
// Format 1 (written until issue 19) compressed each record alone: a
// ~500-byte telemetrygen span stored in ~210 B, because what one span
// shares with its neighbours (the same keys, ids, timestamps) was not
// available to its compressor. Format 2 compressed 16 consecutive records
// of a message together (~68 B for the same span), but a page of one run
// among many interleaved in a message then decompressed a chunk per
// record it returned, and parsed a varint header of every record
// (BenchmarkPageQuery: p50 72 → 390–500 µs). Format 3 (written now)
// compresses recordChunk records together after ordering the message's
// records by identity (first appearance), so a run's or a trace's records
// of one message share a chunk, and keeps a fixed-width header that a page
// reads in place. All three formats are read.
const (
	recordFormatS2Dict1        byte = 1
	recordFormatS2Dict1Chunks  byte = 2
	recordFormatS2Dict1Grouped byte = 3
)

// recordChunk is how many records format 3 compresses together (part of
// the format: a reader derives a record's chunk from its position). On
// the bench's spans 4 stored ~95 B, 8 ~77 B, 16 ~68 B per span, while a
// page's work for one record grows with it.
const recordChunk = 8

// recordChunk2 is format 2's chunk (read only).
const recordChunk2 = 16

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

// msgRecord is one accepted record of a message: its index in the message
// and its JSON size (what quotas and pages count).
type msgRecord struct {
	idx  uint16
	size uint32
}

// maxMessageRecords bounds a message value's record count (a batch holds
// at most 65 535 records).
const maxMessageRecords = 1 << CursorIndexBits

// encodeGrouped is the value of a principal's message key (0x04),
// format 3: format u8, n u16, n × idx u16, n × end u32, c × cend u32,
// then the c = ceil(n/recordChunk) chunks. The n records are listed in
// chunk order (order), not index order; end is each record's cumulative
// end in the concatenated plain text of all chunks, cend each chunk's
// cumulative compressed end. Chunk k holds listed records
// k*recordChunk onwards; its plain text is their JSON in that order.
// jsons[i] is record recs[i]'s JSON; order lists positions in recs.
func encodeGrouped(recs []msgRecord, jsons [][]byte, order []int) []byte {
	n := len(order)
	nc := (n + recordChunk - 1) / recordChunk
	var plain []byte
	chunks := make([][]byte, 0, nc)
	total := 0
	for k := 0; k < nc; k++ {
		plain = plain[:0]
		for _, i := range order[k*recordChunk : min(n, (k+1)*recordChunk)] {
			plain = append(plain, jsons[i]...)
		}
		c := recordDict.Encode(nil, plain)
		chunks = append(chunks, c)
		total += len(c)
	}
	b := make([]byte, 0, 3+6*n+4*nc+total)
	b = append(b, recordFormatS2Dict1Grouped)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	for _, i := range order {
		b = binary.BigEndian.AppendUint16(b, recs[i].idx)
	}
	end := uint32(0)
	for _, i := range order {
		end += recs[i].size
		b = binary.BigEndian.AppendUint32(b, end)
	}
	cend := uint32(0)
	for _, c := range chunks {
		cend += uint32(len(c))
		b = binary.BigEndian.AppendUint32(b, cend)
	}
	for _, c := range chunks {
		b = append(b, c...)
	}
	return b
}

// messageView reads a message value of any format. Formats 1 and 2 are
// parsed into its slices (reused from one message to the next); format 3
// is read in place. Records it returns are copies.
type messageView struct {
	v      []byte
	format byte
	n      int
	// Formats 1 and 2.
	idx    []uint16
	sizes  []uint32 // JSON size; format 1: read from the block header
	off    []uint32 // offset in the chunk's plain text (format 2)
	chunks []int    // chunk c is v[chunks[c]:chunks[c+1]]
	// Format 3: where its arrays start in v.
	ends, cends, data int
	hint              int    // where find starts
	plainC            int    // the chunk plain holds, or -1
	plain             []byte // reused: records are copied out of it
}

// decode parses a message value's header. It reports false for a
// malformed value; it never panics (FuzzMessageValue).
func (m *messageView) decode(v []byte) bool {
	*m = messageView{idx: m.idx[:0], sizes: m.sizes[:0], off: m.off[:0], chunks: m.chunks[:0], plainC: -1, v: v, plain: m.plain[:0]}
	if len(v) < 1 {
		return false
	}
	m.format = v[0]
	switch m.format {
	case recordFormatS2Dict1:
		return m.decode1(v)
	case recordFormatS2Dict1Chunks:
		return m.decode2(v)
	case recordFormatS2Dict1Grouped:
		return m.decode3(v)
	}
	return false
}

// decode3 checks format 3's header (encodeGrouped) without reading it
// all: a page reads a few records of a message of hundreds, so the
// offsets are checked where record reads them.
func (m *messageView) decode3(v []byte) bool {
	if len(v) < 3 {
		return false
	}
	n := int(binary.BigEndian.Uint16(v[1:]))
	nc := (n + recordChunk - 1) / recordChunk
	m.n, m.ends, m.cends, m.data = n, 3+2*n, 3+6*n, 3+6*n+4*nc
	if len(v) < m.data {
		return false
	}
	return nc == 0 && len(v) == m.data || nc > 0 && int(binary.BigEndian.Uint32(v[m.cends+4*(nc-1):])) == len(v)-m.data
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
		if err != nil || size > MaxEventBytesLimit {
			return false
		}
		m.idx = append(m.idx, idx)
		m.sizes = append(m.sizes, uint32(size))
		m.off = append(m.off, 0)
		m.chunks = append(m.chunks, end)
	}
	m.n = n
	return true
}

// decode2 reads format 2: format u8, n uvarint, n × idx uvarint (the
// first as is, then steps ≥ 1), n × size uvarint, ceil(n/16) × compressed
// chunk length uvarint, then the chunks; record j is in chunk j/16.
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
		if j%recordChunk2 == 0 {
			off = 0
		}
		m.sizes = append(m.sizes, uint32(s))
		m.off = append(m.off, uint32(off))
		off += s
	}
	nc := (n + recordChunk2 - 1) / recordChunk2
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
	m.n = n
	return true
}

// find returns the position of record idx in the message, or false if
// the message does not hold it (evicted before it was written).
func (m *messageView) find(idx uint16) (int, bool) {
	if m.format != recordFormatS2Dict1Grouped {
		return slices.BinarySearch(m.idx, idx)
	}
	// Listed in chunk order: a scan of u16s, from where the last record
	// was found (a page's records of one message are usually listed one
	// after the other).
	ids := m.v[3:m.ends]
	for k := 0; k < m.n; k++ {
		j := m.hint + k
		if j >= m.n {
			j -= m.n
		}
		if binary.BigEndian.Uint16(ids[2*j:]) == idx {
			m.hint = j + 1
			if m.hint == m.n {
				m.hint = 0
			}
			return j, true
		}
	}
	return 0, false
}

// plainEnd is where record j of a format 3 value ends in the plain text
// of all chunks; plainEnd(-1) is 0.
func (m *messageView) plainEnd(j int) int {
	if j < 0 {
		return 0
	}
	return int(binary.BigEndian.Uint32(m.v[m.ends+4*j:]))
}

// size is record j's JSON size.
func (m *messageView) size(j int) int {
	if m.format == recordFormatS2Dict1Grouped {
		return m.plainEnd(j) - m.plainEnd(j-1)
	}
	return int(m.sizes[j])
}

// record returns a copy of record j's JSON, decompressing its chunk
// unless it is the one decompressed last.
func (m *messageView) record(j int) ([]byte, error) {
	var c, first, last int // chunk, and its first and last record
	switch m.format {
	case recordFormatS2Dict1:
		c, first, last = j, j, j
	case recordFormatS2Dict1Chunks:
		c = j / recordChunk2
		first, last = c*recordChunk2, min(m.n, (c+1)*recordChunk2)-1
	default:
		c = j / recordChunk
		first, last = c*recordChunk, min(m.n, (c+1)*recordChunk)-1
	}
	var want, off int // the chunk's plain size, record j's offset in it
	if m.format == recordFormatS2Dict1Grouped {
		want, off = m.plainEnd(last)-m.plainEnd(first-1), m.plainEnd(j-1)-m.plainEnd(first-1)
	} else {
		want, off = int(m.off[last])+int(m.sizes[last]), int(m.off[j])
	}
	if c != m.plainC {
		var blob []byte
		if m.format == recordFormatS2Dict1Grouped {
			start, end := 0, int(binary.BigEndian.Uint32(m.v[m.cends+4*c:]))
			if c > 0 {
				start = int(binary.BigEndian.Uint32(m.v[m.cends+4*(c-1):]))
			}
			if start > end || m.data+end > len(m.v) {
				return nil, errCorruptChunk
			}
			blob = m.v[m.data+start : m.data+end]
		} else {
			blob = m.v[m.chunks[c]:m.chunks[c+1]]
		}
		n, err := s2.DecodedLen(blob)
		if err != nil {
			return nil, err
		}
		if n != want {
			return nil, errCorruptChunk
		}
		m.plainC = -1
		plain, err := recordDict.Decode(m.plain[:0], blob)
		if err != nil {
			return nil, err
		}
		m.plain, m.plainC = plain, c
	}
	size := m.size(j)
	if off < 0 || size < 0 || off+size > len(m.plain) {
		return nil, errCorruptChunk
	}
	return append([]byte(nil), m.plain[off:off+size]...), nil
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
