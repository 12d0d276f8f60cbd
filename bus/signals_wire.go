package bus

import (
	"encoding/binary"

	"github.com/fadcedab/adk/bus/wire"
)

// A signal batch is the wire envelope [1, "signal_batch", {"r": [{"k":
// kind, "d": data}, ...]}] in msgpack. Batches are the bus's hot path (one
// per JetStream message, hundreds of records each), so they are written
// and read by hand here instead of through msgpack's reflection: the
// encoder writes exactly the bytes wire.Encode writes for a SignalBatch,
// and the decoder accepts only that canonical form, handing anything else
// to wire.Decode, so what is accepted or rejected and every error stay
// wire.Decode's. Decoded record data aliases the message.

// signalBatchHead is the envelope up to the records array header.
var signalBatchHead = []byte{0x93, wire.WireVersion, 0xa0 | byte(len(SignalBatchKind))}

// signalBatchSize is the exact encoded size of a batch.
func signalBatchSize[T any, P recordOf[T]](recs []T) int {
	n := len(signalBatchHead) + len(SignalBatchKind) + 3 + msgpackLenSize(len(recs), 15)
	for i := range recs {
		kind, data := P(&recs[i]).kindData()
		n += 1 + 2 + msgpackStrSize(len(kind)) + len(kind) + 2 + msgpackBinSize(data) + len(data)
	}
	return n
}

// recordOf is a batch's records as the encoder takes them: SignalRecord,
// or the publisher's queued items.
type recordOf[T any] interface {
	*T
	kindData() (string, []byte)
}

func (r *SignalRecord) kindData() (string, []byte) { return r.Kind, r.Data }

// appendSignalBatch appends the canonical encoding of a batch of records.
func appendSignalBatch[T any, P recordOf[T]](b []byte, recs []T) []byte {
	b = append(b, signalBatchHead...)
	b = append(b, SignalBatchKind...)
	b = append(b, 0x81, 0xa1, 'r')
	if recs == nil {
		return append(b, 0xc0)
	}
	b = appendMsgpackArrayLen(b, len(recs))
	for i := range recs {
		kind, data := P(&recs[i]).kindData()
		b = append(b, 0x82, 0xa1, 'k')
		b = appendMsgpackStr(b, kind)
		b = append(b, 0xa1, 'd')
		b = appendMsgpackBin(b, data)
	}
	return b
}

func msgpackLenSize(n, fix int) int {
	switch {
	case n <= fix:
		return 1
	case n <= 0xffff:
		return 3
	}
	return 5
}

func msgpackStrSize(n int) int {
	switch {
	case n <= 31:
		return 1
	case n <= 0xff:
		return 2
	case n <= 0xffff:
		return 3
	}
	return 5
}

func msgpackBinSize(d []byte) int {
	switch {
	case d == nil:
		return 1
	case len(d) <= 0xff:
		return 2
	case len(d) <= 0xffff:
		return 3
	}
	return 5
}

func appendMsgpackArrayLen(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x90|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

func appendMsgpackStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n <= 31:
		b = append(b, 0xa0|byte(n))
	case n <= 0xff:
		b = append(b, 0xd9, byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func appendMsgpackBin(b []byte, d []byte) []byte {
	switch n := len(d); {
	case d == nil:
		return append(b, 0xc0)
	case n <= 0xff:
		b = append(b, 0xc4, byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, d...)
}

// decodeCanonicalSignalBatch decodes a batch in exactly the form
// appendSignalBatch writes, within lim, or reports false. Lengths are
// checked against the bytes left before anything is sliced or allocated.
func decodeCanonicalSignalBatch(data []byte, lim wire.DecodeLimits) (SignalBatch, bool) {
	var b SignalBatch
	p := len(signalBatchHead) + len(SignalBatchKind) + 3
	if len(data) > lim.MaxBytes || len(data) < p || lim.MaxDepth < 4 ||
		string(data[:len(signalBatchHead)]) != string(signalBatchHead) ||
		string(data[len(signalBatchHead):p]) != SignalBatchKind+"\x81\xa1r" {
		return b, false
	}
	n, ok := readLen(data, &p, 0x90, 0xdc, 0xdd)
	// Every record takes at least 8 bytes; scanMsgpack counts 6 + 5n values.
	if !ok || n > (len(data)-p)/8 || 6+5*n > lim.MaxElements {
		return b, false
	}
	b.Records = make([]SignalRecord, n)
	for i := range b.Records {
		if len(data)-p < 3 || data[p] != 0x82 || data[p+1] != 0xa1 || data[p+2] != 'k' {
			return SignalBatch{}, false
		}
		p += 3
		k, ok := readLen(data, &p, 0xa0, 0xda, 0xdb)
		if !ok && p < len(data) && data[p] == 0xd9 && len(data)-p >= 2 {
			k, ok = int(data[p+1]), true
			p += 2
		}
		if !ok || k > len(data)-p || k > lim.MaxStrLen {
			return SignalBatch{}, false
		}
		b.Records[i].Kind = recordKind(data[p : p+k])
		p += k
		if len(data)-p < 2 || data[p] != 0xa1 || data[p+1] != 'd' {
			return SignalBatch{}, false
		}
		p += 2
		d, ok := readBinLen(data, &p)
		if !ok || d > len(data)-p || d > lim.MaxStrLen {
			return SignalBatch{}, false
		}
		b.Records[i].Data = data[p : p+d : p+d]
		p += d
	}
	if p != len(data) {
		return SignalBatch{}, false
	}
	return b, true
}

// readLen reads a fix (4-bit array or 5-bit str), 16-bit or 32-bit length
// header of one msgpack family.
func readLen(d []byte, p *int, fix, b16, b32 byte) (int, bool) {
	if *p >= len(d) {
		return 0, false
	}
	c := d[*p]
	fixMask := byte(0x0f)
	if fix == 0xa0 {
		fixMask = 0x1f
	}
	switch {
	case c&^fixMask == fix:
		*p++
		return int(c & fixMask), true
	case c == b16 && len(d)-*p >= 3:
		n := int(binary.BigEndian.Uint16(d[*p+1:]))
		*p += 3
		return n, true
	case c == b32 && len(d)-*p >= 5:
		n := int(binary.BigEndian.Uint32(d[*p+1:]))
		*p += 5
		return n, true
	}
	return 0, false
}

func readBinLen(d []byte, p *int) (int, bool) {
	if *p >= len(d) {
		return 0, false
	}
	switch c := d[*p]; {
	case c == 0xc4 && len(d)-*p >= 2:
		n := int(d[*p+1])
		*p += 2
		return n, true
	case c == 0xc5 && len(d)-*p >= 3:
		n := int(binary.BigEndian.Uint16(d[*p+1:]))
		*p += 3
		return n, true
	case c == 0xc6 && len(d)-*p >= 5:
		n := int(binary.BigEndian.Uint32(d[*p+1:]))
		*p += 5
		return n, true
	}
	return 0, false
}

// recordKind returns the known kinds without allocating.
func recordKind(k []byte) string {
	switch string(k) {
	case RecordObservability:
		return RecordObservability
	case RecordWorkflowLifecycle:
		return RecordWorkflowLifecycle
	}
	return string(k)
}
