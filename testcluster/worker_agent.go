package testcluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fadcedab/adk/evalengine"
)

// ScriptedAgent is a zero-latency (or fixed-latency) test adapter: every
// turn answers "echo: <input>". It counts sessions per sample id, so a
// test can assert that each task ran at most once across the fleet, and
// records model calls so a test can assert none started after a moment.
type ScriptedAgent struct {
	// TurnDelay makes every turn take this long (honouring ctx).
	TurnDelay time.Duration
	// Gate, when set, holds every turn until it is closed (or ctx ends):
	// a test decides when a running sample finishes.
	Gate chan struct{}

	mu       sync.Mutex
	sessions map[string]int // sample id -> sessions started
	calls    int
	lastCall time.Time
}

// NewSession implements evalengine.Adapter.
func (a *ScriptedAgent) NewSession(_ context.Context, info evalengine.SampleInfo) (evalengine.Session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sessions == nil {
		a.sessions = map[string]int{}
	}
	a.sessions[info.SampleID]++
	return &scriptedSession{a: a}, nil
}

// Executions returns how often each sample id ran.
func (a *ScriptedAgent) Executions() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.sessions))
	for k, v := range a.sessions {
		out[k] = v
	}
	return out
}

// Calls returns the number of model calls (turns) started and when the
// last one started.
func (a *ScriptedAgent) Calls() (int, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls, a.lastCall
}

type scriptedSession struct{ a *ScriptedAgent }

func (s *scriptedSession) Turn(ctx context.Context, in evalengine.TurnInput) (evalengine.TurnOutput, error) {
	s.a.mu.Lock()
	s.a.calls++
	s.a.lastCall = time.Now()
	s.a.mu.Unlock()
	if s.a.Gate != nil {
		select {
		case <-ctx.Done():
			return evalengine.TurnOutput{}, ctx.Err()
		case <-s.a.Gate:
		}
	}
	if s.a.TurnDelay > 0 {
		t := time.NewTimer(s.a.TurnDelay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return evalengine.TurnOutput{}, ctx.Err()
		case <-t.C:
		}
	}
	return evalengine.TurnOutput{Output: fmt.Sprintf("echo: %v", in.Input)}, nil
}

func (s *scriptedSession) Close() error { return nil }

// EvalSet returns a schema-2 set with n single-turn cases; odd cases
// expect a response the scripted agent does not give, so they fail.
func EvalSet(id string, n int) []byte {
	b := []byte(fmt.Sprintf(`{"schema_version":2,"id":%q,"version":"1","cases":[`, id))
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		want := fmt.Sprintf("echo: q%d", i)
		if i%2 == 1 {
			want = "something else"
		}
		b = append(b, fmt.Sprintf(`{"id":"c%d","turns":[{"id":"t","input":"q%d","expected_response":%q}]}`, i, i, want)...)
	}
	return append(b, "]}"...)
}
