package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/internal/samplescope"
	"github.com/fadcedab/adk/plugins"
)

// ctxProvider answers every call with text, recording the context it got;
// inner, when set, runs first with that context.
type ctxProvider struct {
	text  string
	seen  []context.Context
	inner func(ctx context.Context)
}

func (p *ctxProvider) Name() string { return "ctx" }

func (p *ctxProvider) Generate(ctx context.Context, _ *model.Request) (*model.Response, error) {
	p.seen = append(p.seen, ctx)
	if p.inner != nil {
		p.inner(ctx)
	}
	return &model.Response{Message: model.Message{Role: model.RoleModel, Parts: []model.Part{{Text: p.text}}}}, nil
}

// evalSample starts a sample of a worker's scope, as the eval engine does.
func evalSample(t *testing.T) (wctx, ctx context.Context, scope *samplescope.Scope) {
	t.Helper()
	wctx, scope, stop := samplescope.New(context.Background())
	ctx, cancel := context.WithTimeout(wctx, time.Minute)
	scope.Begin(ctx, cancel)
	t.Cleanup(func() {
		scope.End()
		stop()
	})
	return wctx, ctx, scope
}

func ctxRunner(t *testing.T, p model.Provider, opts RunnerOptions) *Runner {
	t.Helper()
	a, err := NewLLMAgent(LLMConfig{Name: "root", Model: p})
	if err != nil {
		t.Fatal(err)
	}
	return newRunner(t, a, opts)
}

func TestRunner_SampleScope(t *testing.T) {
	req := RunRequest{SessionID: "s", UserID: "u", Message: userMsg("hi")}

	t.Run("a lent scope is the run's context, ending with the sample", func(t *testing.T) {
		_, ctx, _ := evalSample(t)
		p := &ctxProvider{text: "ok"}
		if _, err := ctxRunner(t, p, RunnerOptions{}).RunTurn(ctx, req); err != nil {
			t.Fatal(err)
		}
		if len(p.seen) != 1 || p.seen[0].Done() != ctx.Done() {
			t.Fatal("the model call's context is not the sample's: the run nested a scope of its own")
		}
		if ctx.Err() != nil {
			t.Fatalf("the turn's end ended the sample: %v", ctx.Err())
		}
	})

	t.Run("without a lent scope the run nests its own, ended with the turn", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p := &ctxProvider{text: "ok"}
		if _, err := ctxRunner(t, p, RunnerOptions{}).RunTurn(ctx, req); err != nil {
			t.Fatal(err)
		}
		if len(p.seen) != 1 || p.seen[0].Done() == ctx.Done() || !errors.Is(p.seen[0].Err(), context.Canceled) {
			t.Fatal("without a scope the run's context is not its own, cancelled at its end")
		}
		if ctx.Err() != nil {
			t.Fatalf("the caller's context ended: %v", ctx.Err())
		}
	})

	t.Run("a nested Runner nests its own scope", func(t *testing.T) {
		_, ctx, _ := evalSample(t)
		innerP := &ctxProvider{text: "inner"}
		inner := ctxRunner(t, innerP, RunnerOptions{})
		outer := &ctxProvider{text: "outer", inner: func(c context.Context) {
			if _, err := inner.RunTurn(c, req); err != nil {
				t.Error(err)
			}
		}}
		if _, err := ctxRunner(t, outer, RunnerOptions{}).RunTurn(ctx, req); err != nil {
			t.Fatal(err)
		}
		if len(innerP.seen) != 1 || innerP.seen[0].Done() == ctx.Done() || innerP.seen[0].Err() == nil {
			t.Fatal("the nested run shared the sample's scope instead of nesting its own")
		}
		if ctx.Err() != nil {
			t.Fatalf("the nested run ended the sample: %v", ctx.Err())
		}
	})

	t.Run("a consumer that stops iterating cancels its sample only", func(t *testing.T) {
		wctx, ctx, scope := evalSample(t)
		tool := NewFuncTool("noop", "does nothing", nil, func(context.Context, *ToolContext, map[string]any) (any, error) { return "done", nil })
		a, err := NewLLMAgent(LLMConfig{Name: "root", Model: script(t, `{"provider":"scripted","default":{"steps":[{"tool_calls":[{"name":"noop","args":{}}]},{"text":"end"}]}}`), Tools: []Tool{tool}})
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range newRunner(t, a, RunnerOptions{}).Run(ctx, req) {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(ctx.Err(), context.Canceled) || wctx.Err() != nil {
			t.Fatalf("sample %v, worker %v: want the sample cancelled, the worker not", ctx.Err(), wctx.Err())
		}
		scope.End()
		next, cancel := context.WithTimeout(wctx, time.Minute)
		scope.Begin(next, cancel)
		if _, err := ctxRunner(t, &ctxProvider{text: "ok"}, RunnerOptions{}).RunTurn(next, req); err != nil || next.Err() != nil {
			t.Fatalf("the next sample: %v, %v", err, next.Err())
		}
	})

	t.Run("a plugin's halt stops its own run, and the next sample runs", func(t *testing.T) {
		wctx, ctx, scope := evalSample(t)
		p := pipeline(t, plugins.Descriptor{ID: "guard", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			BeforeModel: func(_ context.Context, _ plugins.CallContext, _ *model.Request, _ map[string]any) (plugins.Outcome, error) {
				return plugins.Halt("not allowed"), nil
			},
		}})
		_, err := ctxRunner(t, &ctxProvider{text: "ok"}, RunnerOptions{Plugins: p}).RunTurn(ctx, req)
		if !errors.Is(err, ErrPluginHalted) {
			t.Fatalf("err %v: want plugin_halted", err)
		}
		if ctx.Err() != nil || wctx.Err() != nil {
			t.Fatalf("a halt ended the sample (%v) or the worker (%v)", ctx.Err(), wctx.Err())
		}
		scope.End()
		next, cancel := context.WithTimeout(wctx, time.Minute)
		scope.Begin(next, cancel)
		if _, err := ctxRunner(t, &ctxProvider{text: "ok"}, RunnerOptions{}).RunTurn(next, req); err != nil {
			t.Fatalf("the next sample: %v", err)
		}
	})
}
