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
	prefixMessage   byte = 0x04 // 0x04 pid:u32 seq:u64              → the message's records (records.go)
	prefixGroup     byte = 0x05 // 0x05 pid:u32 sel:u64 seq:u64      → selector, idx:u16...
	prefixManifest  byte = 0x06 // 0x06 pid:u32 seq:u64              → ts, (idx, size)..., sel:u64...
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

// messageKey is the key of a principal's records of one stream message.
func messageKey(pid uint32, seq uint64) []byte {
	k := manifestKey(pid, seq)
	k[0] = prefixMessage
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

// selHash is a selector's SHA-256 cut in two: key (the first 8 bytes) is in
// the group key, check (the next 8) in the group value, so a 64-bit key
// collision is detected on read without storing the selector.
type selHash struct{ key, check uint64 }

func selectorHash(s string) selHash {
	h := sha256.Sum256([]byte(s))
	return selHash{key: binary.BigEndian.Uint64(h[:8]), check: binary.BigEndian.Uint64(h[8:16])}
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

// evalSelectorString is the canonical form of an eval selector: its pairs
// in nesting order (job_id, case_id, sample_id), "k=v" joined by NUL. Its
// keys are not identity keys, so it never equals an identity selector.
func evalSelectorString(e *evalIdentity, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(evalKeys[i])
		b.WriteByte('=')
		b.WriteString(e[i])
	}
	return b.String()
}

// evalSelectors returns the eval selectors a record is indexed under: its
// job, its job and case, its job, case and sample (as far as it has them).
// Three groups at most, and none for a record outside an eval, where every
// subset would cost 2^7 groups.
func evalSelectors(e *evalIdentity) []string {
	var out []string
	for n := 1; n <= len(evalKeys) && e[n-1] != ""; n++ {
		out = append(out, evalSelectorString(e, n))
	}
	return out
}

// encodeGroup: the selector's check hash u64, then u16 indexes.
func encodeGroup(check uint64, idx []uint16) []byte {
	b := make([]byte, 0, 8+2*len(idx))
	b = binary.BigEndian.AppendUint64(b, check)
	for _, i := range idx {
		b = binary.BigEndian.AppendUint16(b, i)
	}
	return b
}

func decodeGroup(b []byte) (check uint64, idx []uint16, ok bool) {
	if len(b) < 8 || (len(b)-8)%2 != 0 {
		return 0, nil, false
	}
	check = binary.BigEndian.Uint64(b)
	for p := 8; p < len(b); p += 2 {
		idx = append(idx, binary.BigEndian.Uint16(b[p:]))
	}
	return check, idx, true
}
