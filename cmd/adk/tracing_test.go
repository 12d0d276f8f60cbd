package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/observability"
)

// TestTraceTo_RecycledRecordsAreEncodedBeforeReuse: `adk eval run
// --trace-to` writes its records into chunks the publisher gives back
// once each batch is encoded. Concurrent samples trace through the
// tracer startLocalTracing builds, and the stream must hold each of their
// five records exactly once, each a whole record of its own sample: a
// record released before its batch was encoded would show up as another
// record's bytes (a duplicate and a missing one, or broken JSON), and
// under -race as the poison a freed chunk is filled with.
func TestTraceTo_RecycledRecordsAreEncodedBeforeReuse(t *testing.T) {
	s := bustest.Start(t, bus.ServerConfig{Port: -1})
	st := s.SignalStream(t, bus.SignalStreamConfig{})
	lt, err := startLocalTracing(func(string) string { return "" }, "adk-eval", 30*time.Second, traceTarget{url: s.ClientURL(), principal: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if lt.pub == nil {
		lt.close()
		t.Fatal("no publisher for a reachable --trace-to")
	}
	const writers, samples = 8, 500
	base := observability.ContextWithEval(context.Background(), observability.EvalIDs{JobID: "local"})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range samples {
				ctx, end := lt.tracer.Start(base, observability.Observation{Kind: observability.KindEval,
					Eval: &observability.EvalIDs{CaseID: fmt.Sprint("case-", i), SampleID: fmt.Sprint(w, "#", i)}})
				lt.tracer.EvaluationResult(ctx, observability.EvaluationResult{Name: "exact_match", Score: float64(w*samples + i), Label: "pass"})
				end(observability.Outcome{})
			}
		})
	}
	wg.Wait()
	var stderr bytes.Buffer
	lt.finish(&stderr) // drains, then closes
	if stderr.Len() != 0 {
		t.Fatalf("signals lost: %s", stderr.String())
	}

	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{} // sample id / record kind
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
			seen[traceToRecordKey(t, r.Data, samples)]++
		}
	}
	for w := range writers {
		for i := range samples {
			for _, k := range []string{"adk.eval.start", "span.start", observability.EventEvaluationResult, "span.end", "adk.eval.stop"} {
				if key := fmt.Sprint(w, "#", i, "/", k); seen[key] != 1 {
					t.Fatalf("record %s in the stream %d times, want once", key, seen[key])
				}
			}
		}
	}
	if len(seen) != writers*samples*5 {
		t.Fatalf("%d distinct records in the stream, want %d", len(seen), writers*samples*5)
	}
}

// traceToRecordKey names a record of the test's samples by its sample id
// and kind, after checking it is whole: valid JSON whose case id (and
// score) belong to its sample id.
func traceToRecordKey(t *testing.T, data []byte, samples int) string {
	t.Helper()
	var rec struct {
		Event    string         `json:"event"`
		Phase    string         `json:"phase"`
		Attrs    map[string]any `json:"attributes"`
		Metadata struct {
			Attrs map[string]any `json:"attributes"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("record is not JSON (reused before encoding?): %v: %q", err, bytes.ToValidUTF8(data, []byte("?")))
	}
	kind, attrs := rec.Event, rec.Metadata.Attrs
	if rec.Event == "" {
		kind, attrs = "span."+rec.Phase, rec.Attrs
	}
	sample, _ := attrs[observability.AttrEvalSampleID].(string)
	var w, i int
	if _, err := fmt.Sscanf(sample, "%d#%d", &w, &i); err != nil {
		t.Fatalf("record without the test's sample id: %s", data)
	}
	if c := attrs[observability.AttrEvalCaseID]; c != fmt.Sprint("case-", i) || attrs[observability.AttrEvalJobID] != "local" {
		t.Fatalf("record of sample %s has case %v: %s", sample, c, data)
	}
	if kind == observability.EventEvaluationResult && attrs[observability.AttrEvaluationScoreValue] != float64(w*samples+i) {
		t.Fatalf("record of sample %s has another sample's score: %s", sample, data)
	}
	return sample + "/" + kind
}

// BenchmarkTraceTo_Sample is one traced sample's signals through
// --trace-to's sink into an embedded JetStream: "recycled" is the sink as
// startLocalTracing wires it (records go back to the tracer's chunks once
// encoded), "bytes" hides its RecycledRecordSink side (every record's
// chunk becomes garbage), what --trace-to did before.
func BenchmarkTraceTo_Sample(b *testing.B) {
	for _, recycled := range []bool{true, false} {
		name := "recycled"
		if !recycled {
			name = "bytes"
		}
		b.Run(name, func(b *testing.B) {
			s := bustest.Start(b, bus.ServerConfig{Port: -1})
			s.SignalStream(b, bus.SignalStreamConfig{})
			lt, err := startLocalTracing(func(string) string { return "" }, "adk-eval", 30*time.Second, traceTarget{url: s.ClientURL(), principal: "team"})
			if err != nil {
				b.Fatal(err)
			}
			tr := lt.tracer
			if !recycled {
				if tr, err = observability.New(observability.Config{Records: bytesOnlySink{lt}}); err != nil {
					b.Fatal(err)
				}
			}
			base := observability.ContextWithEval(context.Background(), observability.EvalIDs{JobID: "local"})
			b.ReportAllocs()
			for b.Loop() {
				ctx, end := tr.Start(base, observability.Observation{Kind: observability.KindEval,
					Eval: &observability.EvalIDs{CaseID: "case-0042", SampleID: "case-0042#3"}})
				tr.EvaluationResult(ctx, observability.EvaluationResult{Name: "exact_match", Score: 1, Label: "pass"})
				end(observability.Outcome{})
			}
			var stderr bytes.Buffer
			lt.finish(&stderr)
			if stderr.Len() != 0 {
				b.Fatalf("signals lost: %s", stderr.String())
			}
		})
	}
}

// bytesOnlySink is --trace-to's sink without its RecycledRecordSink side.
type bytesOnlySink struct{ lt *localTracing }

func (s bytesOnlySink) EnqueueSignalJSON(jobID string, data []byte) error {
	return s.lt.EnqueueSignalJSON(jobID, data)
}
