package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/observability"
)

// copySink hands a tracer's records to a Publisher as Records (so the
// publisher releases them and the tracer writes later records over their
// memory) and keeps a copy of each, taken before the publisher sees it.
type copySink struct {
	p      *bus.Publisher
	mu     sync.Mutex
	copies map[string]int
}

func (s *copySink) EnqueueSignalJSON(string, []byte) error {
	panic("a RecycledRecordSink gets Records")
}

func (s *copySink) EnqueueSignalRecord(jobID string, r observability.Record) error {
	c := string(r.Data)
	if err := s.p.EnqueueSignalRecord(jobID, r); err != nil {
		return err
	}
	s.mu.Lock()
	s.copies[c]++
	s.mu.Unlock()
	return nil
}

// TestPublisher_RecycledRecordsAreEncodedBeforeReuse: concurrent tracers
// write records into chunks the publisher gives back once each batch is
// encoded. Every record in the stream must be exactly a record a tracer
// enqueued: a record released before its batch was encoded would show
// another record's bytes (or, under -race, the poison a freed chunk is
// filled with, and a reported race). The queue is small and drops its
// oldest records, so the drop path releases too.
func TestPublisher_RecycledRecordsAreEncodedBeforeReuse(t *testing.T) {
	e := newSignalEnv(t)
	st := e.ensure(t, bus.SignalStreamConfig{})
	p := e.publisher(t, bus.PublisherConfig{BatchSize: 7, MaxInflightBatches: 2, MaxQueueEvents: 1000, DropPolicy: bus.DropOldest})
	sink := &copySink{p: p, copies: map[string]int{}}
	tr, err := observability.New(observability.Config{Records: sink})
	if err != nil {
		t.Fatal(err)
	}
	const writers, tasks = 8, 400
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			base := observability.ContextWithEval(context.Background(), observability.EvalIDs{JobID: "job-1", WorkerID: fmt.Sprint("w", w)})
			for i := range tasks {
				ctx, end := tr.Start(base, observability.Observation{Kind: observability.KindEval,
					Eval: &observability.EvalIDs{CaseID: fmt.Sprint("case-", i), SampleID: fmt.Sprint(w, "#", i)}})
				tr.EvaluationResult(ctx, observability.EvaluationResult{Name: "exact_match", Score: float64(i), Label: "pass"})
				end(observability.Outcome{})
			}
		})
	}
	wg.Wait()
	drain(t, p)
	s := p.Stats()
	if s.Accepted != writers*tasks*5 || s.Exported+s.DroppedOldest != s.Accepted {
		t.Fatalf("stats %+v", s)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got uint64
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := st.GetMsg(ctx, seq)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		b, err := bus.DecodeSignalMessage(m.Header, m.Data, 1<<20)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		for _, r := range b.Records {
			if sink.copies[string(r.Data)] == 0 {
				t.Fatalf("message %d: record not enqueued by any tracer (reused before encoding?): %q", seq, bytes.ToValidUTF8(r.Data, []byte("?")))
			}
			sink.copies[string(r.Data)]--
			got++
		}
	}
	if got != s.Exported {
		t.Fatalf("%d records in the stream, %d exported", got, s.Exported)
	}
	t.Logf("%d records exported, %d dropped oldest", s.Exported, s.DroppedOldest)
}

// TestPublisher_CloseReleasesQueuedRecords: records still queued when the
// publisher closes are released (and counted closed_dropped); the tracer
// writes on over their memory without a double release.
func TestPublisher_CloseReleasesQueuedRecords(t *testing.T) {
	e := newSignalEnv(t) // no stream: every batch waits for a retry
	p := e.publisher(t, bus.PublisherConfig{BatchSize: 3, MaxInflightBatches: 1, RetryBaseDelay: time.Minute})
	sink := &copySink{p: p, copies: map[string]int{}}
	tr, err := observability.New(observability.Config{Records: sink})
	if err != nil {
		t.Fatal(err)
	}
	base := observability.ContextWithEval(context.Background(), observability.EvalIDs{JobID: "job-1"})
	for range 50 {
		_, end := tr.Start(base, observability.Observation{Kind: observability.KindEval})
		end(observability.Outcome{})
	}
	p.Close()
	if s := p.Stats(); s.ClosedDropped+s.Exported+s.ExportFailed+s.PermanentFailures != s.Accepted || s.QueueEvents != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Refused now (closed): the tracer releases each refused record.
	for range 50 {
		_, end := tr.Start(base, observability.Observation{Kind: observability.KindEval})
		end(observability.Outcome{})
	}
}
