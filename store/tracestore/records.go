package tracestore

import (
	"encoding/binary"
	"sort"

	"github.com/klauspost/compress/s2"
)

// Stored records are compressed one by one with S2 and a fixed dictionary
// of typical records (key names, structure, common values), so a page
// decompresses only the records it returns (~0.1 µs each) and a ~450-byte
// record costs tens of bytes on disk. The dictionary is part of the
// format: recordFormatS2Dict1 always means this text, byte for byte; a
// new dictionary needs a new format byte.
const recordFormatS2Dict1 byte = 1

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

// compressRecord returns the stored form of a record's JSON, carved from
// *arena (a batch's records share a few chunks instead of one allocation
// each, sized for the worst case). scratch is reused between calls.
func compressRecord(arena, scratch *[]byte, js []byte) []byte {
	if n := s2.MaxEncodedLen(len(js)); cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	enc := recordDict.Encode((*scratch)[:cap(*scratch)], js)
	if cap(*arena)-len(*arena) < len(enc) {
		*arena = make([]byte, 0, max(64<<10, len(enc))) // earlier blobs keep the old chunk
	}
	*arena = append(*arena, enc...)
	return (*arena)[len(*arena)-len(enc) : len(*arena) : len(*arena)]
}

// recordSize is the JSON size of a stored record, from its block header.
func recordSize(blob []byte) (int, bool) {
	n, err := s2.DecodedLen(blob)
	return n, err == nil
}

func decompressRecord(blob []byte) ([]byte, error) { return recordDict.Decode(nil, blob) }

// msgRecord is one accepted record of a message: its index in the message,
// its JSON size (what quotas and pages count) and its stored form.
type msgRecord struct {
	idx  uint16
	size uint32
	blob []byte
}

// encodeMessage is the value of a principal's message key (0x04): format
// u8, n u16, n × idx u16, n × end u32 (cumulative blob ends), blobs. idx
// is increasing.
func encodeMessage(recs []msgRecord) []byte {
	total := 0
	for _, r := range recs {
		total += len(r.blob)
	}
	b := make([]byte, 0, 3+6*len(recs)+total)
	b = append(b, recordFormatS2Dict1)
	b = binary.BigEndian.AppendUint16(b, uint16(len(recs)))
	for _, r := range recs {
		b = binary.BigEndian.AppendUint16(b, r.idx)
	}
	end := 0
	for _, r := range recs {
		end += len(r.blob)
		b = binary.BigEndian.AppendUint32(b, uint32(end))
	}
	for _, r := range recs {
		b = append(b, r.blob...)
	}
	return b
}

// messageRecord returns the stored form of record idx of a message value,
// or ok false if the message does not hold it (evicted before it was
// written) or the value is malformed.
func messageRecord(v []byte, idx uint16) ([]byte, bool) {
	if len(v) < 3 || v[0] != recordFormatS2Dict1 {
		return nil, false
	}
	n := int(binary.BigEndian.Uint16(v[1:]))
	head := 3 + 6*n
	if len(v) < head {
		return nil, false
	}
	idxs, ends := v[3:3+2*n], v[3+2*n:head]
	j := sort.Search(n, func(i int) bool { return binary.BigEndian.Uint16(idxs[2*i:]) >= idx })
	if j == n || binary.BigEndian.Uint16(idxs[2*j:]) != idx {
		return nil, false
	}
	start := 0
	if j > 0 {
		start = int(binary.BigEndian.Uint32(ends[4*(j-1):]))
	}
	end := int(binary.BigEndian.Uint32(ends[4*j:]))
	if start > end || head+end > len(v) {
		return nil, false
	}
	return v[head+start : head+end], true
}

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
