package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/model/openai"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
)

// strayAdapter's sample of the slow case leaves a goroutine behind that
// calls the provider with the sample's context (a plugin's or a tool's
// late call): its first call waits on the provider when the turn
// returns, and once the next sample has begun it calls again with the
// same, by then ended, context. The next sample (the hello case) waits
// for that late call before its own.
type strayAdapter struct {
	p       *openai.Provider
	arrived <-chan struct{} // the provider's slow requests, as they arrive
	// strayErr and lateErr are the stray goroutine's two calls' errors;
	// next is closed when the next sample has begun, lateDone when the
	// late call has returned.
	strayErr, lateErr chan error
	next, lateDone    chan struct{}
}

func newStrayAdapter(t *testing.T, url string, arrived <-chan struct{}) *strayAdapter {
	t.Helper()
	p, err := openai.New(openai.Config{Model: "fake", HTTPConfig: model.HTTPConfig{BaseURL: url + "/v1", MaxAttempts: 1, TimeoutMS: 60_000}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &strayAdapter{p: p, arrived: arrived, strayErr: make(chan error, 1), lateErr: make(chan error, 1),
		next: make(chan struct{}), lateDone: make(chan struct{})}
}

func userRequest(text string) *model.Request {
	return &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Text: text}}}}}
}

func (a *strayAdapter) NewSession(context.Context, evalengine.SampleInfo) (evalengine.Session, error) {
	return straySession{a}, nil
}

type straySession struct{ a *strayAdapter }

func (s straySession) Turn(ctx context.Context, in evalengine.TurnInput) (evalengine.TurnOutput, error) {
	a := s.a
	if text, _ := in.Input.(string); strings.Contains(text, "slow") {
		go func() {
			_, err := a.p.Generate(ctx, userRequest("be slow"))
			a.strayErr <- err
			<-a.next
			_, err = a.p.Generate(ctx, userRequest("hello late"))
			a.lateErr <- err
			close(a.lateDone)
		}()
		select {
		case <-a.arrived: // the stray call is on the wire
		case <-ctx.Done():
			return evalengine.TurnOutput{}, ctx.Err()
		}
		return evalengine.TurnOutput{Output: "ok"}, nil
	}
	close(a.next)
	select {
	case <-a.lateDone:
	case <-ctx.Done():
		return evalengine.TurnOutput{}, ctx.Err()
	}
	resp, err := a.p.Generate(ctx, userRequest("hello"))
	if err != nil {
		return evalengine.TurnOutput{}, err
	}
	return evalengine.TurnOutput{Output: resp.Message.Text()}, nil
}

func (straySession) Close() error { return nil }

// isClass reports whether err is a model error of class c.
func isClass(err error, c model.ErrorClass) bool {
	var me *model.Error
	return errors.As(err, &me) && me.Class == c
}

// TestRunner_AStrayCallEndsWithItsTaskAndSparesTheNext runs two tasks on
// one runner (one run slot, so one cancel scope lent to both samples in
// turn). The first task's sample leaves a goroutine whose provider call,
// made with the sample's context, is on the wire when the sample passes:
// the sample's end aborts it (the provider fake never answers it) and the
// call ends cancelled. The goroutine's later call with that ended context,
// made while the next task's sample runs in the same slot, ends cancelled
// too; that sample's own call then passes. (Without End's abort of the
// armed call, the stray call outlives its sample: tried.)
func TestRunner_AStrayCallEndsWithItsTaskAndSparesTheNext(t *testing.T) {
	opts := evalengine.DefaultOptions()
	opts.CaseTimeoutMS = 20_000
	url, arrived := providerFake(t)
	w := taskWorker(t, url, opts, false)
	a := newStrayAdapter(t, url, arrived)
	w.agents["a"] = trustedAgent{events: a, plain: a}
	w.runq = make(chan *runReq)
	w.wg.Add(1)
	go func() { defer w.wg.Done(); w.runner() }()
	defer func() { w.cancel(); w.wg.Wait() }()

	runTask := func(caseIdx int) evalengine.SampleResult {
		t.Helper()
		task := api.Task{JobID: "j1", Index: caseIdx, CaseIndex: caseIdx, DeadlineAt: time.Now().Add(time.Minute).UnixMilli()}
		ctx, h := w.taskCtx(task)
		defer h.cancel()
		r := &runReq{ctx: ctx, task: task, h: h, done: make(chan struct{}, 1)}
		w.runq <- r
		<-r.done
		var s evalengine.SampleResult
		if err := json.Unmarshal(r.res.Sample, &s); err != nil || !r.ok {
			t.Fatalf("case %d: ok %v, sample %s (%v)", caseIdx, r.ok, r.res.Sample, err)
		}
		return s
	}
	if s := runTask(caseSlow); !s.Passed {
		t.Fatalf("the sample that left a call behind: %+v", s)
	}
	select {
	case err := <-a.strayErr:
		if !isClass(err, model.ClassCancelled) {
			t.Fatalf("the stray call: %v, want %s (its sample's end)", err, model.ClassCancelled)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stray call outlived its sample")
	}
	if s := runTask(caseHello); !s.Passed || s.Error != "" {
		t.Fatalf("the next sample in the slot: passed %v, error %q", s.Passed, s.Error)
	}
	if err := <-a.lateErr; !isClass(err, model.ClassCancelled) {
		t.Fatalf("the stray's late call with its ended context: %v, want %s", err, model.ClassCancelled)
	}
}
