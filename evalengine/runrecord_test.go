package evalengine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
)

// gateAdapter answers its samples' turns in an order the test sets: the
// first turn at once, the next three when release is closed, every later
// one never (it waits for its context). It records which samples
// answered and signals every closed session on closed.
type gateAdapter struct {
	calls    atomic.Int64
	release  chan struct{}
	closed   chan struct{}
	mu       sync.Mutex
	answered []string
}

func newGateAdapter() *gateAdapter {
	return &gateAdapter{release: make(chan struct{}), closed: make(chan struct{}, 64)}
}

func (a *gateAdapter) NewSession(_ context.Context, info evalengine.SampleInfo) (evalengine.Session, error) {
	return &gateSession{a: a, id: info.SampleID}, nil
}

type gateSession struct {
	a  *gateAdapter
	id string
}

func (s *gateSession) Turn(ctx context.Context, in evalengine.TurnInput) (evalengine.TurnOutput, error) {
	switch n := s.a.calls.Add(1); {
	case n == 1:
	case n <= 4:
		select {
		case <-s.a.release:
		case <-ctx.Done():
			return evalengine.TurnOutput{}, ctx.Err()
		}
	default:
		<-ctx.Done()
		return evalengine.TurnOutput{}, ctx.Err()
	}
	s.a.mu.Lock()
	s.a.answered = append(s.a.answered, s.id)
	s.a.mu.Unlock()
	return evalengine.TurnOutput{Output: in.Input}, nil
}

func (s *gateSession) Close() error {
	s.a.closed <- struct{}{}
	return nil
}

// TestRun_CancelledRunRecordsEveryFinishedSample: a run cancelled while
// finished samples wait to be recorded still records each of them
// (OnSample, the resume journal's feed) before Run returns, and none
// after. The first sample's OnSample holds the recording until three more
// samples have finished and then cancels the run, so those three are
// waiting to be recorded when the run ends.
func TestRun_CancelledRunRecordsEveryFinishedSample(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[`+
		`{"id":"a","input":"x"},{"id":"b","input":"x"},{"id":"c","input":"x"},{"id":"d","input":"x"},`+
		`{"id":"e","input":"x"},{"id":"f","input":"x"},{"id":"g","input":"x"},{"id":"h","input":"x"}]}`)
	for _, drop := range []bool{false, true} {
		name := "kept samples"
		if drop {
			name = "dropped samples"
		}
		t.Run(name, func(t *testing.T) {
			a := newGateAdapter()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var (
				returned atomic.Bool
				mu       sync.Mutex
				recorded []string
				closes   int
			)
			onSample := func(_ int, s *evalengine.SampleResult) {
				if returned.Load() {
					t.Errorf("OnSample(%s) after Run returned", s.SampleID)
				}
				mu.Lock()
				recorded = append(recorded, s.SampleID)
				first := len(recorded) == 1
				mu.Unlock()
				if !first {
					return
				}
				// The first sample's session closed before it was handed
				// on; wait for three more to finish, then end the run.
				close(a.release)
				for range 4 {
					select {
					case <-a.closed:
						closes++
					case <-time.After(20 * time.Second):
						t.Errorf("only %d sessions closed", closes)
						cancel()
						return
					}
				}
				cancel()
			}
			_, err := evalengine.Run(ctx, set, evalengine.RunConfig{
				Adapter: a, Metrics: evalengine.DefaultCriteria(),
				Options:  opts(func(o *evalengine.Options) { o.Concurrency = 4 }),
				OnSample: onSample, DropSamples: drop,
			})
			returned.Store(true)
			wantCode(t, err, evalengine.CodeEvaluationCancelled)
			for len(a.closed) > 0 {
				<-a.closed
				closes++
			}
			mu.Lock()
			defer mu.Unlock()
			a.mu.Lock()
			defer a.mu.Unlock()
			if len(a.answered) != 4 {
				t.Fatalf("answered %d samples, want 4: %v", len(a.answered), a.answered)
			}
			if drop {
				// The stream is the result: every sample that ran is in it,
				// those the cancellation cut off as well.
				if len(recorded) != closes {
					t.Fatalf("recorded %d samples of %d run: %v (answered %v)", len(recorded), closes, recorded, a.answered)
				}
				return
			}
			// Kept samples: the finished ones, not those cut off (a resume
			// runs them again).
			got, want := slices.Clone(recorded), slices.Clone(a.answered)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("recorded %v, want the answered samples %v", got, want)
			}
		})
	}
}

// verdictScorer passes a sample whose one answer is "pass".
type verdictScorer struct{}

func (verdictScorer) ScoreCase(_ context.Context, e evalengine.CaseEval) evalengine.Score {
	if len(e.Outputs) == 1 && e.Outputs[0].Output == "pass" {
		return evalengine.OK(1, nil)
	}
	return evalengine.OK(0, nil)
}

// verdictAdapter echoes its input, and fails a turn whose input is "err".
type verdictAdapter struct{}

func (verdictAdapter) NewSession(context.Context, evalengine.SampleInfo) (evalengine.Session, error) {
	return verdictSession{}, nil
}

type verdictSession struct{}

func (verdictSession) Turn(_ context.Context, in evalengine.TurnInput) (evalengine.TurnOutput, error) {
	if in.Input == "err" {
		return evalengine.TurnOutput{}, errors.New("failed on purpose")
	}
	return evalengine.TurnOutput{Output: in.Input}, nil
}

func (verdictSession) Close() error { return nil }

// TestRun_ProgressCountsEverySampleOnce: Progress is called once per
// finished sample, one call at a time, after that sample's OnSample, with
// counts that add up to the result's.
func TestRun_ProgressCountsEverySampleOnce(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[`+
		`{"id":"p1","input":"pass"},{"id":"f1","input":"fail"},{"id":"e1","input":"err"},`+
		`{"id":"p2","input":"pass"},{"id":"p3","input":"pass"},{"id":"e2","input":"err"}]}`)
	var (
		inCall   atomic.Int32
		streamed atomic.Int64
		got      []evalengine.Progress
	)
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: verdictAdapter{},
		Metrics: []evalengine.Metric{{ID: "verdict", Threshold: 0.5, Case: verdictScorer{}}},
		Options: opts(func(o *evalengine.Options) { o.Concurrency, o.Samples = 4, 5 }),
		OnSample: func(int, *evalengine.SampleResult) {
			streamed.Add(1)
		},
		Progress: func(p evalengine.Progress) {
			if inCall.Add(1) != 1 {
				t.Error("Progress called concurrently")
			}
			if n := streamed.Load(); n != int64(p.Done) {
				t.Errorf("Progress at %d done after %d OnSample calls", p.Done, n)
			}
			got = append(got, p)
			inCall.Add(-1)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	const total = 30
	if len(got) != total {
		t.Fatalf("%d Progress calls, want %d", len(got), total)
	}
	for i, p := range got {
		if p.Done != i+1 || p.Total != total || p.Passed+p.Errors > p.Done {
			t.Fatalf("call %d: %+v", i, p)
		}
	}
	last := got[total-1]
	passed, errs := 0, 0
	for _, c := range r.Cases {
		for _, s := range c.Samples {
			switch {
			case s.Status == evalengine.SampleStatusError:
				errs++
			case s.Passed:
				passed++
			}
		}
	}
	if last.Passed != passed || last.Errors != errs || passed != 15 || errs != 10 {
		t.Fatalf("last progress %+v; result: %d passed, %d errors (want 15, 10)", last, passed, errs)
	}
}

// TestRun_ResumedDropSamplesRunsConcurrentSamples: a resumed run that
// streams its samples (DropSamples with Finished) runs the samples of a
// case with nothing finished several at a time, as a fresh one does:
// every sample is streamed once, the finished ones are not run again.
// Under -race it also checks that the scheduler's look at what is
// finished does not read the case slots the recording writes.
func TestRun_ResumedDropSamplesRunsConcurrentSamples(t *testing.T) {
	set := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"a","input":"x"},{"id":"b","input":"x"},{"id":"c","input":"x"}]}`)
	o := opts(func(o *evalengine.Options) { o.Concurrency, o.Samples = 4, 8 })
	first, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
		Adapter: &fakeAdapter{echo: true}, Metrics: evalengine.DefaultCriteria(), Options: o,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Case a is done but for its last sample; b and c have nothing.
	var finished []evalengine.StreamSample
	for _, s := range first.Cases[0].Samples[:7] {
		finished = append(finished, evalengine.StreamSample{CaseIndex: 0, Sample: s})
	}
	for round := range 20 {
		a := &fakeAdapter{echo: true}
		var mu sync.Mutex
		seen := map[string]int{}
		_, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{
			Adapter: a, Metrics: evalengine.DefaultCriteria(), Options: o,
			Finished: finished, DropSamples: true,
			OnSample: func(_ int, s *evalengine.SampleResult) {
				mu.Lock()
				seen[s.SampleID]++
				mu.Unlock()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != 17 || a.inits.Load() != 17 {
			t.Fatalf("round %d: streamed %d samples, ran %d; want 17 (24 less 7 finished)", round, len(seen), a.inits.Load())
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("round %d: %s streamed %d times", round, id, n)
			}
		}
	}
}
