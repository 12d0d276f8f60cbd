package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// compile builds a pipeline and closes it when the test ends.
func compile(t *testing.T, descs ...Descriptor) *Pipeline {
	t.Helper()
	p, err := Compile(descs)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func outcomes(tr []TraceEntry) []TraceOutcome {
	out := make([]TraceOutcome, len(tr))
	for i, e := range tr {
		out[i] = e.Outcome
	}
	return out
}

func wantOutcomes(t *testing.T, r Result, want ...TraceOutcome) {
	t.Helper()
	if got := outcomes(r.Trace); !reflect.DeepEqual(got, want) {
		t.Fatalf("trace outcomes = %v, want %v", got, want)
	}
}

func wantCode(t *testing.T, err error, code string) *Error {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
	return pe
}

func request(text string) *model.Request {
	return &model.Request{Model: "m", Messages: []model.Message{
		{Role: model.RoleSystem, Parts: []model.Part{{Text: "be brief"}}},
		{Role: model.RoleUser, Parts: []model.Part{{Text: text}}},
	}}
}

func observer(seen *[]string) Hooks {
	return Hooks{BeforeModel: func(_ context.Context, _ CallContext, r *model.Request, _ map[string]any) (Outcome, error) {
		*seen = append(*seen, r.Messages[len(r.Messages)-1].Parts[0].Text)
		return Observe(), nil
	}}
}

func amender(text string) Hooks {
	return Hooks{BeforeModel: func(_ context.Context, _ CallContext, r *model.Request, _ map[string]any) (Outcome, error) {
		r.Messages[len(r.Messages)-1].Parts[0].Text = text
		return Amend(r), nil
	}}
}

func panicker() Hooks {
	return Hooks{BeforeModel: func(context.Context, CallContext, *model.Request, map[string]any) (Outcome, error) {
		panic("boom")
	}}
}

func TestPipeline_OrderedAmendmentContinues(t *testing.T) {
	var seen []string
	var extras []map[string]any
	first := observer(&seen)
	inner := first.BeforeModel
	first.BeforeModel = func(ctx context.Context, cc CallContext, r *model.Request, cfg map[string]any) (Outcome, error) {
		extras = append(extras, cc.Extra)
		return inner(ctx, cc, r, cfg)
	}
	p := compile(t,
		Descriptor{ID: "obs1", Plugin: first},
		Descriptor{ID: "amend", Plugin: amender("amended"), Mode: ModeIntervene},
		Descriptor{ID: "obs2", Plugin: observer(&seen)},
	)
	req := request("original")
	cc := CallContext{RunID: "r1", Extra: map[string]any{
		"api_key": "k", "keep": "v",
		"nested": map[string]any{"Authorization": "x", "list": []any{map[string]any{"refresh-token": "t", "ok": 1}}},
	}}
	r := p.Run(context.Background(), HookBeforeModel, cc, req)
	if r.Disposition != DispositionAmend || r.Err != nil {
		t.Fatalf("disposition = %s, err = %v", r.Disposition, r.Err)
	}
	wantOutcomes(t, r, OutcomeObserved, OutcomeAmended, OutcomeObserved)
	if !reflect.DeepEqual(seen, []string{"original", "amended"}) {
		t.Fatalf("plugins saw %v", seen)
	}
	if got := r.Value.(*model.Request).Messages[1].Parts[0].Text; got != "amended" {
		t.Fatalf("result value text = %q", got)
	}
	if got := req.Messages[1].Parts[0].Text; got != "original" {
		t.Fatalf("caller's request was mutated: %q", got)
	}
	wantExtra := map[string]any{"keep": "v", "nested": map[string]any{"list": []any{map[string]any{"ok": 1}}}}
	if !reflect.DeepEqual(extras[0], wantExtra) {
		t.Fatalf("plugin saw extra %v, want %v", extras[0], wantExtra)
	}
	if cc.Extra["api_key"] != "k" {
		t.Fatal("caller's context was pruned in place")
	}
	for i, e := range r.Trace {
		if e.Hook != HookBeforeModel || e.PluginID != []string{"obs1", "amend", "obs2"}[i] {
			t.Fatalf("trace[%d] = %+v", i, e)
		}
	}
}

func TestPipeline_ReturnStopsRemainingPlugins(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  func(any) Outcome
	}{{"return", Return}, {"replace", Replace}} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []string
			cached := &model.Response{Message: model.Message{Role: model.RoleModel, Parts: []model.Part{{Text: "cached"}}}}
			p := compile(t,
				Descriptor{ID: "ret", Mode: ModeIntervene, Plugin: Hooks{BeforeModel: func(context.Context, CallContext, *model.Request, map[string]any) (Outcome, error) {
					return tc.out(cached), nil
				}}},
				Descriptor{ID: "never", Plugin: observer(&seen)},
			)
			r := p.Run(context.Background(), HookBeforeModel, CallContext{}, request("q"))
			if r.Disposition != DispositionReturn || r.Value != cached {
				t.Fatalf("result = %+v", r)
			}
			wantOutcomes(t, r, OutcomeReturned)
			if len(seen) != 0 {
				t.Fatal("plugin after an early return was called")
			}
		})
	}
}

func TestPipeline_FailOpenAndClosed(t *testing.T) {
	failures := map[string]Hooks{
		"panic": panicker(),
		"error": {BeforeModel: func(context.Context, CallContext, *model.Request, map[string]any) (Outcome, error) {
			return Outcome{}, errors.New("secret detail api_key=abc")
		}},
	}
	for name, bad := range failures {
		t.Run(name+"/open", func(t *testing.T) {
			var seen []string
			p := compile(t, Descriptor{ID: "bad", Plugin: bad}, Descriptor{ID: "next", Plugin: observer(&seen)})
			r := p.Run(context.Background(), HookBeforeModel, CallContext{}, request("q"))
			if r.Disposition != DispositionContinue || r.Err != nil {
				t.Fatalf("result = %+v", r)
			}
			wantOutcomes(t, r, OutcomeException, OutcomeObserved)
			if len(seen) != 1 {
				t.Fatal("next plugin did not run after an open failure")
			}
		})
		t.Run(name+"/closed", func(t *testing.T) {
			var seen []string
			p := compile(t, Descriptor{ID: "bad", Plugin: bad, FailurePolicy: PolicyClosed}, Descriptor{ID: "next", Plugin: observer(&seen)})
			req := request("q")
			r := p.Run(context.Background(), HookBeforeModel, CallContext{}, req)
			if r.Disposition != DispositionError || r.Value != req {
				t.Fatalf("result = %+v", r)
			}
			pe := wantCode(t, r.Err, CodePluginFailed)
			if pe.PluginID != "bad" || pe.Hook != HookBeforeModel || pe.Reason != "exception" {
				t.Fatalf("error = %+v", pe)
			}
			if !errors.Is(r.Err, ErrPluginFailed) || strings.Contains(r.Err.Error(), "abc") {
				t.Fatalf("error %q: not plugin_failed or leaks the plugin's text", r.Err)
			}
			wantOutcomes(t, r, OutcomeException)
			if len(seen) != 0 {
				t.Fatal("plugin after a closed failure was called")
			}
		})
	}
}

func TestPipeline_TimeoutWithHookIgnoringContext(t *testing.T) {
	slow := Hooks{BeforeModel: func(context.Context, CallContext, *model.Request, map[string]any) (Outcome, error) {
		time.Sleep(300 * time.Millisecond) // deliberately ignores ctx
		return Return(&model.Response{}), nil
	}}
	for _, policy := range []FailurePolicy{PolicyOpen, PolicyClosed} {
		t.Run(string(policy), func(t *testing.T) {
			p := compile(t, Descriptor{ID: "slow", Plugin: slow, Mode: ModeIntervene, TimeoutMs: 20, FailurePolicy: policy})
			start := time.Now()
			r := p.Run(context.Background(), HookBeforeModel, CallContext{}, request("q"))
			if el := time.Since(start); el > 150*time.Millisecond {
				t.Fatalf("Run took %v with a 20 ms timeout", el)
			}
			wantOutcomes(t, r, OutcomeTimeout)
			if policy == PolicyOpen && r.Disposition != DispositionContinue {
				t.Fatalf("open: disposition %s", r.Disposition)
			}
			if policy == PolicyClosed {
				if pe := wantCode(t, r.Err, CodePluginFailed); pe.Reason != "timeout" {
					t.Fatalf("closed: %+v", pe)
				}
			}
		})
	}
}

func TestPipeline_LateCompletionCountsAsTimeout(t *testing.T) {
	deadline := time.Now()
	if r := fence(callResult{kind: kindReturn, at: deadline.Add(time.Millisecond)}, deadline); r.failure != OutcomeTimeout {
		t.Fatalf("late completion = %+v", r)
	}
	if r := fence(callResult{kind: kindReturn, at: deadline}, deadline); r.failure != outcomeNone {
		t.Fatalf("completion at the deadline = %+v", r)
	}
}

func TestPipeline_CallerCancellationCancelsHook(t *testing.T) {
	started := make(chan struct{})
	var sawCancel atomic.Bool
	p := compile(t, Descriptor{ID: "wait", TimeoutMs: 60_000, Plugin: Hooks{BeforeModel: func(ctx context.Context, _ CallContext, _ *model.Request, _ map[string]any) (Outcome, error) {
		close(started)
		<-ctx.Done()
		sawCancel.Store(errors.Is(ctx.Err(), context.Canceled))
		return Observe(), nil
	}}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	r := p.Run(ctx, HookBeforeModel, CallContext{}, request("q"))
	if r.Disposition != DispositionError || !errors.Is(r.Err, ErrCancelled) {
		t.Fatalf("result = %+v", r)
	}
	wantOutcomes(t, r, OutcomeCancelled)
	testutil.WaitFor(t, 2*time.Second, "hook to see the cancellation", sawCancel.Load)
}

func TestPipeline_ObserverCannotIntervene(t *testing.T) {
	for _, tc := range []struct {
		out  Outcome
		want TraceOutcome
	}{
		{Amend(request("x")), OutcomeObserverCannotAmend},
		{Return(&model.Response{}), OutcomeObserverCannotReturn},
		{Replace(&model.Response{}), OutcomeObserverCannotReturn},
		{Halt("no"), OutcomeObserverCannotHalt},
	} {
		t.Run(string(tc.want)+"/"+tc.out.Kind(), func(t *testing.T) {
			out := tc.out
			p := compile(t, Descriptor{ID: "obs", FailurePolicy: PolicyClosed, Plugin: Hooks{BeforeModel: func(context.Context, CallContext, *model.Request, map[string]any) (Outcome, error) {
				return out, nil
			}}})
			r := p.Run(context.Background(), HookBeforeModel, CallContext{}, request("q"))
			if pe := wantCode(t, r.Err, CodePluginFailed); pe.Reason != string(tc.want) {
				t.Fatalf("error = %+v", pe)
			}
			wantOutcomes(t, r, tc.want)
		})
	}
}

func TestPipeline_NotificationsAreBestEffortAndImmutable(t *testing.T) {
	crash := func(context.Context, CallContext, *Failure, map[string]any) (Outcome, error) { panic("boom") }
	ret := func(context.Context, CallContext, *Failure, map[string]any) (Outcome, error) {
		return Return(&Failure{Class: "rewritten"}), nil
	}
	halt := func(context.Context, CallContext, *Failure, map[string]any) (Outcome, error) {
		return Halt("stop"), nil
	}
	var observed atomic.Int32
	obs := func(context.Context, CallContext, *Failure, map[string]any) (Outcome, error) {
		observed.Add(1)
		return Observe(), nil
	}
	for _, hook := range []Hook{HookOnRunError, HookOnAgentError} {
		t.Run(string(hook), func(t *testing.T) {
			observed.Store(0)
			p := compile(t,
				Descriptor{ID: "crash", FailurePolicy: PolicyClosed, Plugin: Hooks{OnRunError: crash, OnAgentError: crash}},
				Descriptor{ID: "ret", Mode: ModeIntervene, FailurePolicy: PolicyClosed, Plugin: Hooks{OnRunError: ret, OnAgentError: ret}},
				Descriptor{ID: "halt", FailurePolicy: PolicyClosed, Plugin: Hooks{OnRunError: halt, OnAgentError: halt}},
				Descriptor{ID: "obs", Plugin: Hooks{OnRunError: obs, OnAgentError: obs}},
			)
			f := &Failure{Component: "run", Class: "timeout"}
			r := p.Run(context.Background(), hook, CallContext{}, f)
			if r.Disposition != DispositionContinue || r.Value != f || r.Err != nil {
				t.Fatalf("result = %+v", r)
			}
			wantOutcomes(t, r, OutcomeException, OutcomeNotificationIgnored, OutcomeNotificationIgnored, OutcomeObserved)
			if observed.Load() != 1 {
				t.Fatal("the last plugin was not notified")
			}
		})
	}
	t.Run("after_run", func(t *testing.T) {
		p := compile(t, Descriptor{ID: "ret", Mode: ModeIntervene, FailurePolicy: PolicyClosed, Plugin: Hooks{AfterRun: func(context.Context, CallContext, *Turn, map[string]any) (Outcome, error) {
			return Amend(&Turn{Agent: "other"}), nil
		}}})
		turn := &Turn{Agent: "root"}
		r := p.Run(context.Background(), HookAfterRun, CallContext{}, turn)
		if r.Disposition != DispositionContinue || r.Value != turn {
			t.Fatalf("result = %+v", r)
		}
		wantOutcomes(t, r, OutcomeNotificationIgnored)
	})
}

func TestPipeline_ResultSizeAndTypeAreBounded(t *testing.T) {
	toolReturn := func(v map[string]any) Hooks {
		return Hooks{BeforeTool: func(context.Context, CallContext, *ToolInvocation, map[string]any) (Outcome, error) {
			return Return(v), nil
		}}
	}
	// {"s":"…"} is 8 bytes of JSON around the string.
	sized := func(n int) map[string]any { return map[string]any{"s": strings.Repeat("x", n-8)} }
	for _, tc := range []struct {
		name   string
		value  map[string]any
		max    int
		want   TraceOutcome
		result Disposition
	}{
		{"at the bound", sized(100), 100, OutcomeReturned, DispositionReturn},
		{"past the bound", sized(101), 100, OutcomeResultTooLarge, DispositionContinue},
		{"default bound", sized(DefaultMaxResultBytes + 1), 0, OutcomeResultTooLarge, DispositionContinue},
		{"func inside", map[string]any{"f": func() {}}, 0, OutcomeInvalidResultType, DispositionContinue},
		{"chan inside", map[string]any{"c": make(chan int)}, 0, OutcomeInvalidResultType, DispositionContinue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := compile(t, Descriptor{ID: "p", Mode: ModeIntervene, MaxResultBytes: tc.max, Plugin: toolReturn(tc.value)})
			r := p.Run(context.Background(), HookBeforeTool, CallContext{}, &ToolInvocation{Call: model.ToolCall{Name: "t"}})
			wantOutcomes(t, r, tc.want)
			if r.Disposition != tc.result {
				t.Fatalf("disposition = %s", r.Disposition)
			}
		})
	}
}

func TestPipeline_AmendAndReturnKeepThePhaseType(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  Outcome
	}{
		{"amend with a response", Amend(&model.Response{})},
		{"amend with nil", Amend(nil)},
		{"amend with a typed nil", Amend((*model.Request)(nil))},
		{"return a request", Return(request("q"))},
		{"return a map", Return(map[string]any{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.out
			p := compile(t, Descriptor{ID: "p", Mode: ModeIntervene, Plugin: Hooks{BeforeModel: func(context.Context, CallContext, *model.Request, map[string]any) (Outcome, error) {
				return out, nil
			}}})
			r := p.Run(context.Background(), HookBeforeModel, CallContext{}, request("q"))
			wantOutcomes(t, r, OutcomeInvalidResult)
		})
	}
}

func TestPipeline_RunChecksHookAndValue(t *testing.T) {
	p := compile(t, Descriptor{ID: "p", Plugin: observer(new([]string))})
	if r := p.Run(context.Background(), "on_nothing", CallContext{}, request("q")); !errors.Is(r.Err, ErrInvalidHook) {
		t.Fatalf("unknown hook: %+v", r)
	}
	if r := p.Run(context.Background(), HookOnError, CallContext{}, &Failure{}); !errors.Is(r.Err, ErrInvalidHook) {
		t.Fatalf("on_error called directly: %+v", r)
	}
	if r := p.Run(context.Background(), HookBeforeModel, CallContext{}, &model.Response{}); !errors.Is(r.Err, ErrInvalidHookValue) {
		t.Fatalf("wrong value type: %+v", r)
	}
}

func TestPipeline_UnimplementedHookIsSkipped(t *testing.T) {
	var seen []string
	p := compile(t,
		Descriptor{ID: "tool-only", Plugin: Hooks{AfterTool: func(context.Context, CallContext, map[string]any, map[string]any) (Outcome, error) {
			return Observe(), nil
		}}},
		Descriptor{ID: "model", Plugin: observer(&seen)},
	)
	r := p.Run(context.Background(), HookBeforeModel, CallContext{}, request("q"))
	wantOutcomes(t, r, OutcomeSkipped, OutcomeObserved)
	r = p.Run(context.Background(), HookOnEvent, CallContext{}, &session.Event{ID: "e"})
	wantOutcomes(t, r, OutcomeSkipped, OutcomeSkipped)
	if r.Disposition != DispositionContinue {
		t.Fatalf("disposition = %s", r.Disposition)
	}
}

func TestPipeline_LegacyOnErrorFallback(t *testing.T) {
	var legacy, specific atomic.Int32
	onError := func(context.Context, CallContext, *Failure, map[string]any) (Outcome, error) {
		legacy.Add(1)
		return Observe(), nil
	}
	onRun := func(context.Context, CallContext, *Failure, map[string]any) (Outcome, error) {
		specific.Add(1)
		return Observe(), nil
	}
	p := compile(t,
		Descriptor{ID: "legacy", Plugin: Hooks{OnError: onError}},
		Descriptor{ID: "both", Plugin: Hooks{OnError: onError, OnRunError: onRun}},
	)
	r := p.Run(context.Background(), HookOnRunError, CallContext{}, &Failure{Component: "run"})
	wantOutcomes(t, r, OutcomeObserved, OutcomeObserved)
	if legacy.Load() != 1 || specific.Load() != 1 {
		t.Fatalf("on_run_error: legacy %d specific %d, want 1 and 1", legacy.Load(), specific.Load())
	}
	r = p.Run(context.Background(), HookOnAgentError, CallContext{}, &Failure{Component: "agent"})
	wantOutcomes(t, r, OutcomeObserved, OutcomeObserved)
	if legacy.Load() != 3 {
		t.Fatalf("on_agent_error fell back %d times, want 2", legacy.Load()-1)
	}
	r = p.Run(context.Background(), HookOnModelError, CallContext{}, &Failure{Component: "model"})
	wantOutcomes(t, r, OutcomeSkipped, OutcomeSkipped)
}

func TestPipeline_HaltIsTypedAndRedacted(t *testing.T) {
	p := compile(t, Descriptor{ID: "guard", Mode: ModeIntervene, Plugin: Hooks{BeforeTool: func(context.Context, CallContext, *ToolInvocation, map[string]any) (Outcome, error) {
		return Halt(`blocked: api_key=sk-123 password: "hunter2" user=bob Authorization: Bearer abc.def ` + strings.Repeat("é", 600)), nil
	}}})
	r := p.Run(context.Background(), HookBeforeTool, CallContext{}, &ToolInvocation{})
	if r.Disposition != DispositionHalt {
		t.Fatalf("disposition = %s", r.Disposition)
	}
	wantOutcomes(t, r, OutcomeHalted)
	pe := wantCode(t, r.Err, CodePluginHalted)
	for _, secret := range []string{"sk-123", "hunter2", "abc.def"} {
		if strings.Contains(pe.Reason, secret) {
			t.Fatalf("halt reason leaks %q: %s", secret, pe.Reason)
		}
	}
	if !strings.Contains(pe.Reason, "user=bob") || len(pe.Reason) > 512 {
		t.Fatalf("halt reason over-redacted or unbounded (%d bytes): %.80s", len(pe.Reason), pe.Reason)
	}
}

func TestPipeline_ValueIsIsolatedFromPlugins(t *testing.T) {
	ev := &session.Event{ID: "e1", Author: "root", Content: &model.Message{Role: model.RoleModel, Parts: []model.Part{
		{Text: "hi"}, {ToolCall: &model.ToolCall{ID: "c", Name: "t", Args: map[string]any{"a": []any{1.0}}}},
	}}, Actions: session.Actions{StateDelta: map[string]any{"k": map[string]any{"v": 1.0}}}}
	orig := cloneEvent(ev)
	p := compile(t, Descriptor{ID: "vandal", Plugin: Hooks{OnEvent: func(_ context.Context, _ CallContext, e *session.Event, _ map[string]any) (Outcome, error) {
		e.ID = "changed"
		e.Content.Parts[0].Text = "changed"
		e.Content.Parts[1].ToolCall.Args["a"].([]any)[0] = 2.0
		e.Actions.StateDelta["k"].(map[string]any)["v"] = 2.0
		return Observe(), nil
	}}})
	r := p.Run(context.Background(), HookOnEvent, CallContext{}, ev)
	wantOutcomes(t, r, OutcomeObserved)
	if !reflect.DeepEqual(ev, orig) {
		t.Fatalf("in-place mutation reached the caller's event: %+v", ev)
	}
}

func TestPipeline_DescribeHasNoConfig(t *testing.T) {
	p := compile(t,
		Descriptor{ID: "a", Plugin: observer(new([]string)), Config: map[string]any{"api_key": "k"}},
		Descriptor{ID: "b", Plugin: amender("x"), Mode: ModeIntervene, FailurePolicy: PolicyClosed, TimeoutMs: 50, MaxResultBytes: 10},
	)
	b, err := json.Marshal(p.Describe())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema_version":1,"plugins":[` +
		`{"id":"a","mode":"observe","failure_policy":"open","timeout_ms":1000,"max_result_bytes":262144},` +
		`{"id":"b","mode":"intervene","failure_policy":"closed","timeout_ms":50,"max_result_bytes":10}]}`
	if string(b) != want {
		t.Fatalf("Describe = %s\nwant       %s", b, want)
	}
}

func TestPipeline_CloseWaitsForStragglersAndRejectsRuns(t *testing.T) {
	release := make(chan struct{})
	var finished atomic.Bool
	p, err := Compile([]Descriptor{{ID: "s", TimeoutMs: 10, Plugin: Hooks{BeforeModel: func(context.Context, CallContext, *model.Request, map[string]any) (Outcome, error) {
		<-release // ignores ctx
		finished.Store(true)
		return Observe(), nil
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Run(context.Background(), HookBeforeModel, CallContext{}, request("q"))
	wantOutcomes(t, r, OutcomeTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a straggler = %v", err)
	}
	if r := p.Run(context.Background(), HookBeforeModel, CallContext{}, request("q")); !errors.Is(r.Err, ErrPipelineClosed) {
		t.Fatalf("Run after Close = %+v", r)
	}
	close(release)
	testutil.WaitFor(t, 2*time.Second, "straggler to finish", finished.Load)
	// Let the Shutdown waiter observe the straggler's exit before goleak looks.
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	<-done
}

func TestPipeline_EmptyAndNil(t *testing.T) {
	var nilp *Pipeline
	req := request("q")
	if r := nilp.Run(context.Background(), HookBeforeModel, CallContext{}, req); r.Disposition != DispositionContinue || r.Value != req {
		t.Fatalf("nil pipeline: %+v", r)
	}
	p := compile(t)
	if r := p.Run(context.Background(), HookBeforeModel, CallContext{}, req); r.Disposition != DispositionContinue || r.Trace != nil {
		t.Fatalf("empty pipeline: %+v", r)
	}
}

func TestFailureOf(t *testing.T) {
	f := FailureOf("model", "gpt", &model.Error{Provider: "openai", Class: model.ClassRateLimited, Status: 429, Retryable: true})
	want := &Failure{Component: "model", Operation: "gpt", Class: "rate_limited", Status: 429, Retryable: true}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("FailureOf(model.Error) = %+v", f)
	}
	if f := FailureOf("tool", "t", errors.New("raw body with password=x")); f.Class != "error" || f.Reason != "" {
		t.Fatalf("FailureOf(plain error) = %+v", f)
	}
	if f := FailureOf("tool", "t", context.DeadlineExceeded); f.Class != "timeout" {
		t.Fatalf("FailureOf(deadline) = %+v", f)
	}
}
