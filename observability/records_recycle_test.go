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
