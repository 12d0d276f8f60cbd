package observability

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// recycleSink is a RecycledRecordSink of a test: keep decides whether a
// record is kept (and its bytes copied, to compare later) or released at
// once; refuse makes every enqueue fail.
type recycleSink struct {
	mu     sync.Mutex
	keep   func(i int) bool
	refuse bool
	n      int
	kept   []Record
	copies []string
	chunks map[*recordChunk]bool
}

func (s *recycleSink) EnqueueSignalJSON(string, []byte) error {
	panic("a RecycledRecordSink gets Records")
}

func (s *recycleSink) EnqueueSignalRecord(_ string, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse {
		return errors.New("refused")
	}
	if r.c != nil {
		s.chunks[r.c] = true
	}
	i := s.n
	s.n++
	if s.keep != nil && s.keep(i) {
		s.kept = append(s.kept, r)
		s.copies = append(s.copies, string(r.Data))
		return nil
	}
	r.Release()
	return nil
}

func tracedTasks(t *testing.T, sink RecordSink, tasks int) {
	t.Helper()
	tr, err := New(Config{Records: sink})
	if err != nil {
		t.Fatal(err)
	}
	base := ContextWithEval(context.Background(), EvalIDs{JobID: "job-1", WorkerID: "w1"})
	for i := range tasks {
		ctx, end := tr.Start(base, Observation{Kind: KindEval, Eval: &EvalIDs{CaseID: "case", SampleID: string(rune('a' + i%26))}})
		tr.EvaluationResult(ctx, EvaluationResult{Name: "exact_match", Score: float64(i), Label: "pass"})
		end(Outcome{})
	}
}

// TestRecordChunks_ReleasedRecordsAreWrittenAgain: records a
// RecycledRecordSink releases free their chunks for later records (a
// few chunks serve thousands of tasks), and a record that is not released
// keeps its bytes however many records are written after it.
func TestRecordChunks_ReleasedRecordsAreWrittenAgain(t *testing.T) {
	const tasks = 4000 // 20,000 records, ~150 chunks' worth
	all := &recycleSink{chunks: map[*recordChunk]bool{}}
	tracedTasks(t, all, tasks)
	if all.n != 5*tasks {
		t.Fatalf("%d records, want %d", all.n, 5*tasks)
	}
	t.Logf("%d chunks for %d records", len(all.chunks), all.n)
	// Without reuse every ~130 records take a new chunk (~150 here).
	// freeChunks (a sync.Pool) may drop a freed chunk (a quarter of them
	// under -race), so allow a margin.
	if len(all.chunks) > 75 {
		t.Fatalf("%d chunks for %d released records: not reused", len(all.chunks), all.n)
	}

	// Kept records pin their chunks: none is written over.
	some := &recycleSink{chunks: map[*recordChunk]bool{}, keep: func(i int) bool { return i%97 == 0 }}
	tracedTasks(t, some, tasks)
	tracedTasks(t, all, tasks) // more writers over freed chunks
	for i, r := range some.kept {
		if string(r.Data) != some.copies[i] {
			t.Fatalf("kept record %d changed:\n got %q\nwant %q", i, r.Data, some.copies[i])
		}
		r.Release()
	}

	// A refused record is released by the tracer: the chunks are reused.
	refused := &recycleSink{chunks: map[*recordChunk]bool{}, refuse: true}
	tracedTasks(t, refused, tasks)
	tracedTasks(t, all, tasks)
	if len(all.chunks) > 150 {
		t.Fatalf("%d chunks after refused records: refused records were not released", len(all.chunks))
	}
}

func TestRecord_ReleasedTwicePanics(t *testing.T) {
	c := &recordChunk{b: make([]byte, 0, recordChunkBytes)}
	c.refs.Store(1) // retired already: only the record's reference
	rec := Record{Data: append(c.b, "{}"...), c: c}
	rec.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("second Release did not panic")
		}
	}()
	rec.Release()
}

// TestRecordChunks_WritersTakeAnyChunkAndKeepBoth: a writer takes the
// chunk in whichever slot has one, and a writer that found every slot
// empty (the others' chunks out) puts its new chunk back beside theirs
// rather than retiring either. Taking only from one random slot made
// concurrent writers start a fresh chunk for one record and retire it
// (64 traced samples at once allocated ~3x the memory their records
// filled).
func TestRecordChunks_WritersTakeAnyChunkAndKeepBoth(t *testing.T) {
	var saved [recordSlots]*recordChunk
	for i := range recordChunks {
		saved[i] = recordChunks[i].Swap(nil)
	}
	defer func() {
		for i := range recordChunks {
			recordChunks[i].Store(saved[i])
		}
	}()
	only := &recordChunk{b: make([]byte, 0, recordChunkBytes)}
	only.refs.Store(1)
	recordChunks[recordSlots-1].Store(only)
	for range 4 * recordSlots {
		r := takeRecordBuf()
		if r.c != only {
			t.Fatal("a writer started a chunk while one was in a slot")
		}
		r.putBack()
	}
	held := takeRecordBuf() // every slot empty now
	fresh := takeRecordBuf()
	if fresh.c == held.c {
		t.Fatal("two writers hold one chunk")
	}
	fresh.putBack()
	held.putBack()
	var in int
	for i := range recordChunks {
		if c := recordChunks[i].Load(); c == held.c || c == fresh.c {
			in++
		}
	}
	if in != 2 || held.c.refs.Load() != 1 || fresh.c.refs.Load() != 1 {
		t.Fatalf("%d of the two chunks in slots (refs %d, %d), want both kept", in, held.c.refs.Load(), fresh.c.refs.Load())
	}
}
