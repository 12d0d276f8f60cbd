package evalcore

import (
	"bufio"
	"bytes"
	"io"

	"github.com/fadcedab/adk/internal/canonjson"
)

// CanonicalResult is the JSON report's encoding of a Result whose samples Run encoded
// as they finished (Result.sampleJSON): the document without samples is
// encoded, and every case's "samples":null is replaced by its samples'
// bytes. Canonical encoding is compositional (an element of an array, a
// value under a key, encodes as it does alone), so the bytes are those of
// encoding the whole value. ok is false when r has no such encodings or
// they do not match its shape; the caller then encodes r whole.
func CanonicalResult(r *Result) (out []byte, ok bool, err error) {
	p, ok, err := canonicalParts(r)
	if !ok || err != nil {
		return nil, ok, err
	}
	// The document is allocated once at its exact size: a 5,000-sample
	// report is megabytes, and growing it copied and cleared them again
	// in the run's tail.
	buf := bytes.NewBuffer(make([]byte, 0, p.size))
	_ = p.writeTo(buf)
	return buf.Bytes(), true, nil
}

// canonicalWriteBuffer is how much of the document WriteCanonicalResult
// holds before it writes to its writer.
const canonicalWriteBuffer = 64 << 10

// WriteCanonicalResult writes CanonicalResult's bytes to w without holding
// the document in one buffer: it is written in canonicalWriteBuffer
// pieces from the samples' own encodings, so the run's tail touches no
// megabytes of fresh memory for it. check is given the document's size
// before anything is written; its error is returned as is, with nothing
// written. ok is false (nothing written) as for CanonicalResult; an error
// after check is w's.
func WriteCanonicalResult(w io.Writer, r *Result, check func(size int) error) (ok bool, err error) {
	p, ok, err := canonicalParts(r)
	if !ok || err != nil {
		return ok, err
	}
	if err := check(p.size); err != nil {
		return true, err
	}
	bw := bufio.NewWriterSize(w, min(canonicalWriteBuffer, p.size))
	if err := p.writeTo(bw); err != nil {
		return true, err
	}
	return true, bw.Flush()
}

// canonicalDoc is a canonical result document in parts: the document
// without cases (cut at its "cases":null member), each case without its
// samples (cut at its "samples":null member, -1 for a case whose samples
// are null) and the samples' encodings.
type canonicalDoc struct {
	hb    []byte
	at    int
	heads [][]byte
	cuts  []int
	enc   [][][]byte
	size  int // the document's length in bytes, its newline included
}

// canonicalParts encodes r's parts; ok is false as for CanonicalResult.
func canonicalParts(r *Result) (p canonicalDoc, ok bool, err error) {
	enc := r.sampleJSON
	if enc == nil || r.legacy != nil || len(enc) != len(r.Cases) {
		return p, false, nil
	}
	for ci := range r.Cases {
		if len(enc[ci]) != len(r.Cases[ci].Samples) {
			return p, false, nil
		}
		for _, b := range enc[ci] {
			if b == nil {
				return p, false, nil
			}
		}
	}
	type plain Result
	head := *r
	head.Cases, head.sampleJSON = nil, nil
	hb, err := canonjson.Marshal((*plain)(&head))
	if err != nil {
		return p, false, err
	}
	at := topLevelKey(hb, `"cases":null`)
	if at < 0 || r.Cases == nil {
		return p, false, nil
	}
	heads := make([][]byte, len(r.Cases))
	cuts := make([]int, len(r.Cases))
	for ci := range r.Cases {
		c := r.Cases[ci]
		c.Samples = nil
		cb, err := canonjson.Marshal(&c)
		if err != nil {
			return p, false, err
		}
		cuts[ci] = -1
		if r.Cases[ci].Samples != nil {
			if cuts[ci] = topLevelKey(cb, samplesNull); cuts[ci] < 0 {
				return p, false, nil
			}
		}
		heads[ci] = cb
	}
	p = canonicalDoc{hb: hb, at: at, heads: heads, cuts: cuts, enc: enc}
	// The exact size, from the writes themselves: counted, not copied.
	var n byteCount
	_ = p.writeTo(&n)
	p.size = int(n)
	return p, true, nil
}

const samplesNull = `"samples":null`

// canonicalSink is what writeTo writes through: a bytes.Buffer or a
// bufio.Writer, whose write errors stick (so only the last is checked).
type canonicalSink interface {
	io.Writer
	io.ByteWriter
	io.StringWriter
}

// byteCount is a canonicalSink that only counts.
type byteCount int

func (n *byteCount) Write(p []byte) (int, error) { *n += byteCount(len(p)); return len(p), nil }

func (n *byteCount) WriteString(s string) (int, error) { *n += byteCount(len(s)); return len(s), nil }

func (n *byteCount) WriteByte(byte) error { *n++; return nil }

// writeTo writes the document to w; the error is the first write's.
func (p *canonicalDoc) writeTo(w canonicalSink) error {
	_, _ = w.Write(p.hb[:p.at])
	_, _ = w.WriteString(`"cases":[`)
	for ci, cb := range p.heads {
		if ci > 0 {
			_ = w.WriteByte(',')
		}
		k := p.cuts[ci]
		if k < 0 {
			_, _ = w.Write(cb)
			continue
		}
		_, _ = w.Write(cb[:k])
		_, _ = w.WriteString(`"samples":[`)
		for si, b := range p.enc[ci] {
			if si > 0 {
				_ = w.WriteByte(',')
			}
			_, _ = w.Write(b)
		}
		_ = w.WriteByte(']')
		_, _ = w.Write(cb[k+len(samplesNull):])
	}
	_ = w.WriteByte(']')
	_, _ = w.Write(p.hb[p.at+len(`"cases":null`):])
	return w.WriteByte('\n')
}

// topLevelKey returns where member (a key and its value, like
// `"cases":null`) starts among the members of the object that compact
// JSON doc is, or -1: keys inside strings or nested values do not count.
func topLevelKey(doc []byte, member string) int {
	depth := 0
	inString, escaped := false, false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			if depth == 1 && i > 0 && (doc[i-1] == '{' || doc[i-1] == ',') && bytes.HasPrefix(doc[i:], []byte(member)) {
				return i
			}
			inString = true
		}
	}
	return -1
}
