package evalengine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// fakeAdapter is the in-test system under evaluation: it answers each turn
// from a script keyed by the turn's input string, and records what the
// engine did to it.
type fakeAdapter struct {
	script map[string]evalengine.TurnOutput
	// echo answers with the input when the script has no entry.
	echo bool
	// block makes every turn wait for ctx (or release) before answering.
	block   bool
	release chan struct{}
	// failTurn returns this error from every turn when set.
	failTurn error
	// failInit returns this error from NewSession when set.
	failInit error
	// panicTurn panics in Turn.
	panicTurn bool

	inits, closes atomic.Int64
	mu            sync.Mutex
	inFlight      int
	maxInFlight   int
	sampleIDs     []string
}

func (a *fakeAdapter) NewSession(ctx context.Context, info evalengine.SampleInfo) (evalengine.Session, error) {
	a.inits.Add(1)
	if a.failInit != nil {
		return nil, a.failInit
	}
	a.mu.Lock()
	a.inFlight++
	a.maxInFlight = max(a.maxInFlight, a.inFlight)
	a.sampleIDs = append(a.sampleIDs, info.SampleID)
	a.mu.Unlock()
	return &fakeSession{a: a}, nil
}

type fakeSession struct{ a *fakeAdapter }

func (s *fakeSession) Turn(ctx context.Context, in evalengine.TurnInput) (evalengine.TurnOutput, error) {
	a := s.a
	if a.panicTurn {
		panic("boom")
	}
	if a.block {
		select {
		case <-ctx.Done():
			return evalengine.TurnOutput{}, ctx.Err()
		case <-a.release:
		}
	}
	if a.failTurn != nil {
		return evalengine.TurnOutput{}, a.failTurn
	}
	text, _ := in.Input.(string)
	if out, ok := a.script[text]; ok {
		return out, nil
	}
	if a.echo {
		return evalengine.TurnOutput{Output: in.Input}, nil
	}
	return evalengine.TurnOutput{Output: "unknown"}, nil
}

func (s *fakeSession) Close() error {
	s.a.closes.Add(1)
	s.a.mu.Lock()
	s.a.inFlight--
	s.a.mu.Unlock()
	return nil
}

// mustSet parses a set or fails the test.
func mustSet(t testing.TB, doc string) *evalengine.Set {
	t.Helper()
	s, err := evalengine.ParseSet([]byte(doc))
	if err != nil {
		t.Fatalf("ParseSet: %v", err)
	}
	return s
}

func mustCriterion(t testing.TB, id, name string, threshold float64, cfg map[string]any) evalengine.Metric {
	t.Helper()
	m, err := evalengine.NewCriterion(id, name, threshold, cfg)
	if err != nil {
		t.Fatalf("NewCriterion: %v", err)
	}
	return m
}

func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s, got nil", code)
	}
	if got := evalengine.ErrorCode(err); got != code {
		t.Fatalf("want error code %s, got %q (%v)", code, got, err)
	}
	var e *evalengine.Error
	if !errors.As(err, &e) {
		t.Fatalf("not an *evalengine.Error: %v", err)
	}
}

func opts(mod func(*evalengine.Options)) evalengine.Options {
	o := evalengine.DefaultOptions()
	o.TimeoutMS = int((20 * time.Second).Milliseconds())
	if mod != nil {
		mod(&o)
	}
	return o
}
