package evalengine_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// goldenStream is the golden JSON Lines result: its bytes, its lines and
// what writes it again.
func goldenStream(t *testing.T) ([]byte, [][]byte, *evalengine.Stream, *evalengine.Result) {
	t.Helper()
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "result.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := evalengine.ReadStream(bytes.NewReader(golden))
	if err != nil {
		t.Fatal(err)
	}
	r, err := evalengine.StreamToResult(st)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(golden, []byte("\n"))
	if len(lines[len(lines)-1]) != 0 {
		t.Fatal("the golden stream does not end its last line")
	}
	return golden, lines[:len(lines)-1], st, r
}

// writeGolden writes the golden stream's lines after the header (the
// header too when header is set) into sw until one is refused, and returns
// the first error (nil: none refused).
func writeGolden(sw *evalengine.StreamWriter, st *evalengine.Stream, r *evalengine.Result) error {
	for _, s := range st.Samples {
		if err := sw.WriteSample(s.CaseIndex, &s.Sample); err != nil {
			return err
		}
	}
	if err := sw.WriteSummary(r); err != nil {
		return err
	}
	return sw.Flush()
}

// TestStreamWriter_BoundAtALineBoundary puts the byte bound exactly at the
// end of each line of the golden stream, and one byte before it, for a new
// stream and for one resumed after its header (already), into memory
// (each line straight in) and into a writer of another type (batched):
// both write the same whole lines, the line that ends at the bound
// included, refuse the next with ErrStreamFull, keep refusing, and count
// what they wrote.
func TestStreamWriter_BoundAtALineBoundary(t *testing.T) {
	golden, lines, st, r := goldenStream(t)
	if len(lines) < 4 {
		t.Fatalf("%d golden lines", len(lines))
	}
	header := int64(len(lines[0]))
	end := int64(0)
	for k := range lines {
		end += int64(len(lines[k]))
		for _, resumed := range []bool{false, true} {
			if resumed && k == 0 {
				continue // the bound within the header a resumed stream starts after
			}
			for _, bound := range []int64{end, end - 1} {
				want := golden[:end]
				if bound < end {
					want = golden[:end-int64(len(lines[k]))]
				}
				var got [2][]byte
				for i, mem := range []bool{true, false} {
					var buf bytes.Buffer
					var w io.Writer = &buf
					if !mem {
						w = writerOnly{&buf}
					}
					var sw *evalengine.StreamWriter
					var err error
					if resumed {
						buf.Write(lines[0])
						sw, err = evalengine.NewStreamWriter(w, nil, header, bound)
					} else {
						sw, err = evalengine.NewStreamWriter(w, &st.Header, 0, bound)
					}
					if err == nil {
						err = writeGolden(sw, st, r)
					}
					full := int64(len(want)) < int64(len(golden))
					if full != errors.Is(err, evalengine.ErrStreamFull) {
						t.Fatalf("line %d, bound %d (resumed %v, memory %v): error %v, want full %v", k, bound, resumed, mem, err, full)
					}
					if sw != nil {
						if err := sw.WriteSample(0, &st.Samples[0].Sample); full && !errors.Is(err, evalengine.ErrStreamFull) {
							t.Fatalf("line %d, bound %d (resumed %v, memory %v): a write after the bound: %v", k, bound, resumed, mem, err)
						}
						_ = sw.Flush()
						if full && sw.Written() != int64(len(want)) {
							t.Fatalf("line %d, bound %d (resumed %v, memory %v): Written %d, want %d", k, bound, resumed, mem, sw.Written(), len(want))
						}
					}
					if full && !bytes.Equal(buf.Bytes(), want) {
						t.Fatalf("line %d, bound %d (resumed %v, memory %v): %d bytes written, want the %d of the lines that fit:\n%s",
							k, bound, resumed, mem, buf.Len(), len(want), buf.Bytes())
					}
					got[i] = buf.Bytes()
				}
				if !bytes.Equal(got[0], got[1]) {
					t.Fatalf("line %d, bound %d (resumed %v): into memory\n%s\nbatched\n%s", k, bound, resumed, got[0], got[1])
				}
			}
		}
	}
}

// failAfter accepts n bytes, then fails every write.
type failAfter struct {
	n   int
	got bytes.Buffer
}

var errDiskFull = errors.New("disk full")

func (f *failAfter) Write(b []byte) (int, error) {
	if len(b) > f.n {
		k := f.n
		f.got.Write(b[:k])
		f.n = 0
		return k, errDiskFull
	}
	f.n -= len(b)
	f.got.Write(b)
	return len(b), nil
}

// TestStreamWriter_WriteErrorMidStream fails a batched stream's writer in
// the middle of it: the write that meets the error returns it, and every
// later write and Flush returns it too and writes nothing more.
func TestStreamWriter_WriteErrorMidStream(t *testing.T) {
	golden, _, st, r := goldenStream(t)
	f := &failAfter{n: len(golden) / 2}
	sw, err := evalengine.NewStreamWriter(f, &st.Header, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeGolden(sw, st, r); !errors.Is(err, errDiskFull) {
		t.Fatalf("error %v, want %v", err, errDiskFull)
	}
	n := f.got.Len()
	if !bytes.Equal(f.got.Bytes(), golden[:n]) || n != len(golden)/2 {
		t.Fatalf("%d bytes reached the writer, want the stream's first %d", n, len(golden)/2)
	}
	if err := sw.WriteSample(0, &st.Samples[0].Sample); !errors.Is(err, errDiskFull) {
		t.Fatalf("a write after the error: %v", err)
	}
	if err := sw.Flush(); !errors.Is(err, errDiskFull) {
		t.Fatalf("a flush after the error: %v", err)
	}
	if f.got.Len() != n {
		t.Fatalf("%d more bytes written after the error", f.got.Len()-n)
	}
}
