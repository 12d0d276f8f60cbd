package bus

import (
	"strconv"

	"github.com/fadcedab/adk/bus/wire"
	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
)

// How an ADK_SIGNALS message body is encoded. The body is the signal_batch
// wire envelope; a publisher compresses it once, at the source, and names
// the codec in a NATS header, so that every byte the NATS servers store,
// hash, replicate and write to their raft logs is already compressed
// (bus/DESIGN.md, "Signal batch encoding"). A message without the header
// is the plain envelope, which is what publishers wrote before, so old
// messages in a stream stay readable.
const (
	// SignalEncodingHeader is the NATS header naming a signal batch
	// message's body encoding. Absent or empty: the plain envelope.
	SignalEncodingHeader = "Adk-Signal-Encoding"
	// SignalEncodingS2 is one S2 block (github.com/klauspost/compress/s2,
	// block format: the decoded length first, then the compressed data)
	// of the plain envelope.
	SignalEncodingS2 = "s2"
)

// compressSignalBatch appends the message body for the plain batch raw to
// dst and returns it with its encoding: S2 when that is smaller, else raw
// itself ("": a tiny or incompressible batch is sent plain).
func compressSignalBatch(dst, raw []byte) ([]byte, string) {
	n := s2.MaxEncodedLen(len(raw))
	if n > 0 && len(raw) >= minCompressBytes {
		if cap(dst) < n {
			dst = make([]byte, 0, n)
		}
		if c := s2.Encode(dst[:n], raw); len(c) < len(raw) {
			return c, SignalEncodingS2
		}
	}
	return append(dst[:0], raw...), ""
}

// minCompressBytes: below this a batch (one or two small signals) gains
// too little from compression to be worth a header.
const minCompressBytes = 256

// DecodeSignalMessage decodes one ADK_SIGNALS message in any encoding a
// publisher writes: h is the message's headers (nil for none), data its
// body. maxBytes (0: the wire default, 1 MiB) bounds the body and also
// its decoded size, which is checked from the S2 header before anything
// is allocated: a compressed body that would decode past the bound is
// wire_too_large, an unknown encoding or a corrupt body is
// wire_bad_encoding, and the plain envelope is then decoded exactly as
// DecodeSignalBatch does. Every error is a *wire.WireError. The records'
// data alias data (plain) or a buffer allocated for this message.
func DecodeSignalMessage(h nats.Header, data []byte, maxBytes int) (SignalBatch, error) {
	enc := ""
	if h != nil {
		enc = h.Get(SignalEncodingHeader)
	}
	plain, err := decodeSignalBody(enc, data, maxBytes)
	if err != nil {
		return SignalBatch{}, err
	}
	return DecodeSignalBatch(plain, maxBytes)
}

// decodeSignalBody returns the plain envelope of a body in encoding enc.
func decodeSignalBody(enc string, data []byte, maxBytes int) ([]byte, error) {
	max := wire.DecodeLimits{MaxBytes: maxBytes}.Resolved().MaxBytes
	switch enc {
	case "":
		return data, nil
	case SignalEncodingS2:
	default:
		if len(enc) > 64 {
			enc = enc[:64]
		}
		return nil, &wire.WireError{Code: wire.CodeBadEncoding, Offset: -1,
			Detail: SignalEncodingHeader + " " + strconv.Quote(enc) + " is not one of \"\", " + strconv.Quote(SignalEncodingS2)}
	}
	if len(data) > max {
		return nil, &wire.WireError{Code: wire.CodeTooLarge, Offset: -1,
			Detail: "message of " + strconv.Itoa(len(data)) + " bytes exceeds " + strconv.Itoa(max)}
	}
	n, err := s2.DecodedLen(data)
	if err != nil {
		return nil, &wire.WireError{Code: wire.CodeBadEncoding, Offset: 0, Detail: "s2 block header", Err: err}
	}
	if n > max {
		return nil, &wire.WireError{Code: wire.CodeTooLarge, Offset: -1,
			Detail: "s2 body decodes to " + strconv.Itoa(n) + " bytes, over " + strconv.Itoa(max)}
	}
	plain, err := s2.Decode(make([]byte, n), data)
	if err != nil {
		return nil, &wire.WireError{Code: wire.CodeBadEncoding, Offset: -1, Detail: "s2 block", Err: err}
	}
	return plain, nil
}
