package evalcore

import (
	"bytes"

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
	enc := r.sampleJSON
	if enc == nil || r.legacy != nil || len(enc) != len(r.Cases) {
		return nil, false, nil
	}
	size := 0
	for ci := range r.Cases {
		if len(enc[ci]) != len(r.Cases[ci].Samples) {
			return nil, false, nil
		}
		for _, b := range enc[ci] {
			if b == nil {
				return nil, false, nil
			}
			size += len(b) + 1
		}
	}
	type plain Result
	head := *r
	head.Cases, head.sampleJSON = nil, nil
	hb, err := canonjson.Marshal((*plain)(&head))
	if err != nil {
		return nil, false, err
	}
	at := topLevelKey(hb, `"cases":null`)
	if at < 0 || r.Cases == nil {
		return nil, false, nil
	}
	// The cases are encoded first, so the document is allocated once at
	// its exact size: a 5,000-sample report is megabytes, and growing it
	// copied and cleared them again in the run's tail.
	const null = `"samples":null`
	heads := make([][]byte, len(r.Cases))
	cuts := make([]int, len(r.Cases))
	size += len(hb) + len(r.Cases) + 1
	for ci := range r.Cases {
		c := r.Cases[ci]
		c.Samples = nil
		cb, err := canonjson.Marshal(&c)
		if err != nil {
			return nil, false, err
		}
		cuts[ci] = -1
		if r.Cases[ci].Samples != nil {
			if cuts[ci] = topLevelKey(cb, null); cuts[ci] < 0 {
				return nil, false, nil
			}
			size += len(`[]`) - len(`null`)
		}
		heads[ci] = cb
		size += len(cb)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.Write(hb[:at])
	buf.WriteString(`"cases":[`)
	for ci, cb := range heads {
		if ci > 0 {
			buf.WriteByte(',')
		}
		k := cuts[ci]
		if k < 0 {
			buf.Write(cb)
			continue
		}
		buf.Write(cb[:k])
		buf.WriteString(`"samples":[`)
		for si, b := range enc[ci] {
			if si > 0 {
				buf.WriteByte(',')
			}
			buf.Write(b)
		}
		buf.WriteByte(']')
		buf.Write(cb[k+len(null):])
	}
	buf.WriteByte(']')
	buf.Write(hb[at+len(`"cases":null`):])
	buf.WriteByte('\n')
	return buf.Bytes(), true, nil
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
