package tracestore

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
)

// Key layout (see store/DESIGN.md). One prefix byte per record kind;
// integers are big-endian so byte order is numeric order.
const (
	prefixMeta      byte = 0x01 // 0x01 'a'                          → meta (msgpack)
	prefixPrincipal byte = 0x02 // 0x02 pid:u32                      → principalRec (msgpack)
	prefixDigest    byte = 0x03 // 0x03 digest:[32]                  → pid:u32
	prefixEvent     byte = 0x04 // 0x04 cursor:u64                   → pid:u32 ts:i64 json
	prefixGroup     byte = 0x05 // 0x05 pid:u32 sel:u64 seq:u64      → selector, idx:u16...
	prefixManifest  byte = 0x06 // 0x06 pid:u32 seq:u64              → sel:u64...
)

// CursorIndexBits is how many low bits of a cursor hold the record's index
// inside its JetStream message: cursor = seq<<16 | index. A batch holds at
// most MaxBatchRecords records.
const CursorIndexBits = 16

// MaxBatchRecords bounds the records of one batch (one stream message).
const MaxBatchRecords = 1<<CursorIndexBits - 1

// Cursor returns the cursor of record idx of stream message seq.
func Cursor(seq uint64, idx int) uint64 { return seq<<CursorIndexBits | uint64(idx) }

// CursorSeq returns the stream sequence a cursor belongs to.
func CursorSeq(c uint64) uint64 { return c >> CursorIndexBits }

var metaKey = []byte{prefixMeta, 'a'}

func principalKey(pid uint32) []byte {
	k := make([]byte, 5)
	k[0] = prefixPrincipal
	binary.BigEndian.PutUint32(k[1:], pid)
	return k
}

func digestKey(d [32]byte) []byte {
	return append([]byte{prefixDigest}, d[:]...)
}

func eventKey(c uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixEvent
	binary.BigEndian.PutUint64(k[1:], c)
	return k
}

func groupPrefix(pid uint32, sel uint64) []byte {
	k := make([]byte, 13, 21)
	k[0] = prefixGroup
	binary.BigEndian.PutUint32(k[1:], pid)
	binary.BigEndian.PutUint64(k[5:], sel)
	return k
}

func groupKey(pid uint32, sel, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(groupPrefix(pid, sel), seq)
}

func manifestKey(pid uint32, seq uint64) []byte {
	k := make([]byte, 13)
	k[0] = prefixManifest
	binary.BigEndian.PutUint32(k[1:], pid)
	binary.BigEndian.PutUint64(k[5:], seq)
	return k
}

// selectorString is the canonical form of a selector: its pairs in key
// order, "k=v" joined by NUL. The empty selector ("all") is "".
func selectorString(id *identity, mask int) string {
	var b strings.Builder
	b.Grow(64)
	for i, k := range identityKeys {
		if mask&(1<<i) == 0 {
			continue
		}
		v := id[i]
		if v == "" {
			return "" // not a subset of this identity
		}
		if b.Len() > 0 {
			b.WriteByte(0)
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	return b.String()
}

func selectorHash(s string) uint64 {
	h := sha256.Sum256([]byte(s))
	return binary.BigEndian.Uint64(h[:8])
}

// subsets returns the canonical selector strings of every subset of the
// identity's pairs, the empty selector included.
func subsets(id *identity) []string {
	var present, n int
	for i := range identityKeys {
		if id[i] != "" {
			present |= 1 << i
			n++
		}
	}
	out := make([]string, 0, 1<<n)
	for m := 0; m < 1<<len(identityKeys); m++ {
		if m&^present == 0 {
			out = append(out, selectorString(id, m))
		}
	}
	return out
}

// encodeGroup: u16 selector length, selector, then u16 indexes.
func encodeGroup(sel string, idx []uint16) []byte {
	b := make([]byte, 0, 2+len(sel)+2*len(idx))
	b = binary.BigEndian.AppendUint16(b, uint16(len(sel)))
	b = append(b, sel...)
	for _, i := range idx {
		b = binary.BigEndian.AppendUint16(b, i)
	}
	return b
}

func decodeGroup(b []byte) (sel string, idx []uint16, ok bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n || (len(b)-2-n)%2 != 0 {
		return "", nil, false
	}
	sel = string(b[2 : 2+n])
	for p := 2 + n; p < len(b); p += 2 {
		idx = append(idx, binary.BigEndian.Uint16(b[p:]))
	}
	return sel, idx, true
}

const eventHeader = 12 // pid:u32 ts:i64

// encodeEvent appends an event value header to b (the JSON follows).
func encodeEvent(pid uint32, ts int64, b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, pid)
	return binary.BigEndian.AppendUint64(b, uint64(ts))
}

func decodeEventHeader(b []byte) (pid uint32, ts int64, ok bool) {
	if len(b) < eventHeader {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(b), int64(binary.BigEndian.Uint64(b[4:])), true
}
