package agent

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/plugins"
)

func textResp(s string) *model.Response {
	return &model.Response{Message: model.Message{Role: model.RoleModel, Parts: []model.Part{{Text: s}}}}
}

// localLogging returns local callbacks that record each phase.
func localLogging(l *log) Callbacks {
	return Callbacks{
		BeforeAgent: func(context.Context, *CallbackContext) (*model.Message, error) {
			l.add("local:before_agent")
			return nil, nil
		},
		AfterAgent: func(context.Context, *CallbackContext, *model.Message) (*model.Message, error) {
			l.add("local:after_agent")
			return nil, nil
		},
		BeforeModel: func(context.Context, *CallbackContext, *model.Request) (*model.Response, error) {
			l.add("local:before_model")
			return nil, nil
		},
		AfterModel: func(context.Context, *CallbackContext, *model.Response) (*model.Response, error) {
			l.add("local:after_model")
			return nil, nil
		},
		BeforeTool: func(context.Context, *CallbackContext, *model.ToolCall) (*model.ToolResult, error) {
			l.add("local:before_tool")
			return nil, nil
		},
		AfterTool: func(context.Context, *CallbackContext, *model.ToolCall, *model.ToolResult) (*model.ToolResult, error) {
			l.add("local:after_tool")
			return nil, nil
		},
	}
}

func filter(items []string, prefix ...string) []string {
	var out []string
	for _, it := range items {
		for _, p := range prefix {
			if strings.Contains(it, p) {
				out = append(out, it)
				break
			}
		}
	}
	return out
}

func TestRunner_PluginPrecedence(t *testing.T) {
	oneTool := `{"provider":"scripted","default":{"steps":[{"tool_calls":[{"name":"get_weather","args":{"city":"Pune"}}]},{"text":"final"}]}}`

	t.Run("global plugins precede local callbacks; run hooks fire", func(t *testing.T) {
		l := &log{}
		prov := script(t, `{"provider":"scripted","default":{"steps":[{"text":"hi"}]}}`)
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov, Callbacks: localLogging(l)})
		obs := func(h plugins.Hook) plugins.AnyHookFunc {
			return func(_ context.Context, hook plugins.Hook, _ plugins.CallContext, _ any, _ map[string]any) (plugins.Outcome, error) {
				l.add("global:" + string(hook))
				return plugins.Observe(), nil
			}
		}
		p := pipeline(t, plugins.Descriptor{ID: "g", Plugin: plugins.Dispatch(obs(""))})
		mustTurn(t, newRunner(t, a, RunnerOptions{Plugins: p}), "hello")
		got := filter(l.all(), "run", "agent", "model")
		want := []string{"global:before_run", "global:before_agent", "local:before_agent", "global:before_model", "local:before_model",
			"global:after_model", "local:after_model", "global:after_agent", "local:after_agent", "global:after_run"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("order\n got %v\nwant %v", got, want)
		}
	})

	t.Run("global before_model return skips local before_model and the provider; local after_model still runs", func(t *testing.T) {
		l := &log{}
		prov := &recordingProvider{Provider: script(t, `{"provider":"scripted","default":{"steps":[{"text":"from provider"}]}}`)}
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov, Callbacks: localLogging(l)})
		p := pipeline(t, plugins.Descriptor{ID: "cache", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			BeforeModel: func(context.Context, plugins.CallContext, *model.Request, map[string]any) (plugins.Outcome, error) {
				return plugins.Return(textResp("cached")), nil
			},
		}})
		tr := mustTurn(t, newRunner(t, a, RunnerOptions{Plugins: p}), "q")
		if tr.FinalText != "cached" || prov.calls() != 0 {
			t.Fatalf("final %q provider calls %d", tr.FinalText, prov.calls())
		}
		if l.count("local:before_model") != 0 || l.count("local:after_model") != 1 {
			t.Fatalf("local calls %v", l.all())
		}
	})

	t.Run("global after_model return skips local after_model", func(t *testing.T) {
		l := &log{}
		prov := script(t, `{"provider":"scripted","default":{"steps":[{"text":"original"}]}}`)
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov, Callbacks: localLogging(l)})
		p := pipeline(t, plugins.Descriptor{ID: "rewrite", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			AfterModel: func(context.Context, plugins.CallContext, *model.Response, map[string]any) (plugins.Outcome, error) {
				return plugins.Return(textResp("rewritten")), nil
			},
		}})
		tr := mustTurn(t, newRunner(t, a, RunnerOptions{Plugins: p}), "q")
		if tr.FinalText != "rewritten" || l.count("local:after_model") != 0 || l.count("local:before_model") != 1 {
			t.Fatalf("final %q local %v", tr.FinalText, l.all())
		}
	})

	t.Run("before_model amendment reaches the provider", func(t *testing.T) {
		prov := &recordingProvider{Provider: script(t, `{"provider":"scripted","rules":[{"match":{"equals":"amended prompt"},"steps":[{"text":"saw amendment"}]}]}`)}
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov})
		p := pipeline(t, plugins.Descriptor{ID: "amend", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			BeforeModel: func(_ context.Context, _ plugins.CallContext, req *model.Request, _ map[string]any) (plugins.Outcome, error) {
				req.Messages[len(req.Messages)-1] = userMsg("amended prompt")
				return plugins.Amend(req), nil
			},
		}})
		tr := mustTurn(t, newRunner(t, a, RunnerOptions{Plugins: p}), "original prompt")
		if tr.FinalText != "saw amendment" || prov.reqs[0].Messages[0].Text() != "amended prompt" {
			t.Fatalf("final %q request %+v", tr.FinalText, prov.reqs[0].Messages)
		}
	})

	t.Run("before_tool amendment executes with amended args only", func(t *testing.T) {
		calls := &log{}
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: script(t, oneTool), Tools: []Tool{weatherTool(calls)}})
		p := pipeline(t, plugins.Descriptor{ID: "amend", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			BeforeTool: func(_ context.Context, _ plugins.CallContext, inv *plugins.ToolInvocation, _ map[string]any) (plugins.Outcome, error) {
				inv.Call.Args = map[string]any{"city": "Oslo"}
				return plugins.Amend(inv), nil
			},
		}})
		mustTurn(t, newRunner(t, a, RunnerOptions{Plugins: p}), "q")
		if got := calls.all(); !reflect.DeepEqual(got, []string{"get_weather:Oslo"}) {
			t.Fatalf("calls %v", got)
		}
	})

	t.Run("before_tool amendment is re-validated", func(t *testing.T) {
		calls := &log{}
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: script(t, oneTool), Tools: []Tool{weatherTool(calls)}})
		p := pipeline(t, plugins.Descriptor{ID: "amend", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			BeforeTool: func(_ context.Context, _ plugins.CallContext, inv *plugins.ToolInvocation, _ map[string]any) (plugins.Outcome, error) {
				inv.Call.Args = map[string]any{"city": 42.0}
				return plugins.Amend(inv), nil
			},
		}})
		tr := mustTurn(t, newRunner(t, a, RunnerOptions{Plugins: p}), "q")
		if len(calls.all()) != 0 || !strings.HasPrefix(tr.ToolCalls[0].Error, CodeInvalidToolArgs) {
			t.Fatalf("calls %v trajectory %+v", calls.all(), tr.ToolCalls)
		}
	})

	t.Run("global before_tool return skips local before_tool and the tool; global after_tool precedes local", func(t *testing.T) {
		l := &log{}
		calls := &log{}
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: script(t, oneTool), Tools: []Tool{weatherTool(calls)}, Callbacks: localLogging(l)})
		p := pipeline(t, plugins.Descriptor{ID: "stub", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			BeforeTool: func(context.Context, plugins.CallContext, *plugins.ToolInvocation, map[string]any) (plugins.Outcome, error) {
				return plugins.Return(map[string]any{"result": "stubbed"}), nil
			},
			AfterTool: func(context.Context, plugins.CallContext, map[string]any, map[string]any) (plugins.Outcome, error) {
				l.add("global:after_tool")
				return plugins.Observe(), nil
			},
		}})
		tr := mustTurn(t, newRunner(t, a, RunnerOptions{Plugins: p}), "q")
		if len(calls.all()) != 0 || tr.ToolCalls[0].Result != "stubbed" {
			t.Fatalf("tool ran %v; trajectory %+v", calls.all(), tr.ToolCalls)
		}
		got := filter(l.all(), "tool")
		if !reflect.DeepEqual(got, []string{"global:after_tool", "local:after_tool"}) {
			t.Fatalf("tool phase %v", got)
		}
	})

	t.Run("on_model_error return recovers the failure", func(t *testing.T) {
		prov := script(t, `{"provider":"scripted","rules":[{"match":{"equals":"never"},"steps":[{"text":"x"}]}]}`)
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov})
		p := pipeline(t, plugins.Descriptor{ID: "fallback", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			OnModelError: func(_ context.Context, _ plugins.CallContext, f *plugins.Failure, _ map[string]any) (plugins.Outcome, error) {
				return plugins.Return(textResp("fallback:" + f.Reason)), nil
			},
		}})
		tr := mustTurn(t, newRunner(t, a, RunnerOptions{Plugins: p}), "q")
		if tr.FinalText != "fallback:no_matching_rule" {
			t.Fatalf("final %q", tr.FinalText)
		}
		// Without the plugin, the typed provider error reaches the caller.
		_, err := turn(t, newRunner(t, a, RunnerOptions{}), "q")
		var me *model.Error
		if !errors.Is(err, ErrModelFailed) || !errors.As(err, &me) || me.Code != "no_matching_rule" {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("halt stops the run with plugin_halted and notifies on_run_error", func(t *testing.T) {
		l := &log{}
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: script(t, oneTool), Tools: []Tool{weatherTool(&log{})}})
		p := pipeline(t, plugins.Descriptor{ID: "guard", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			BeforeTool: func(context.Context, plugins.CallContext, *plugins.ToolInvocation, map[string]any) (plugins.Outcome, error) {
				return plugins.Halt("not allowed"), nil
			},
			OnAgentError: func(context.Context, plugins.CallContext, *plugins.Failure, map[string]any) (plugins.Outcome, error) {
				l.add("on_agent_error")
				return plugins.Observe(), nil
			},
			OnRunError: func(context.Context, plugins.CallContext, *plugins.Failure, map[string]any) (plugins.Outcome, error) {
				l.add("on_run_error")
				return plugins.Observe(), nil
			},
		}})
		_, err := turn(t, newRunner(t, a, RunnerOptions{Plugins: p}), "q")
		if !errors.Is(err, ErrPluginHalted) || !errors.Is(err, plugins.ErrPluginHalted) {
			t.Fatalf("err %v", err)
		}
		if !reflect.DeepEqual(l.all(), []string{"on_agent_error", "on_run_error"}) {
			t.Fatalf("notifications %v", l.all())
		}
	})

	t.Run("before_run return answers without running the agent", func(t *testing.T) {
		prov := &recordingProvider{Provider: script(t, `{"provider":"scripted","default":{"steps":[{"text":"x"}]}}`)}
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov})
		p := pipeline(t, plugins.Descriptor{ID: "gate", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			BeforeRun: func(context.Context, plugins.CallContext, *plugins.Turn, map[string]any) (plugins.Outcome, error) {
				return plugins.Return(&model.Message{Role: model.RoleModel, Parts: []model.Part{{Text: "closed today"}}}), nil
			},
		}})
		tr := mustTurn(t, newRunner(t, a, RunnerOptions{Plugins: p}), "q")
		if tr.FinalText != "closed today" || prov.calls() != 0 {
			t.Fatalf("final %q calls %d", tr.FinalText, prov.calls())
		}
	})
}

func TestRunner_SubAgentsInheritPlugins(t *testing.T) {
	l := &log{}
	child, _ := NewLLMAgent(LLMConfig{Name: "child", Description: "weather expert", Tools: []Tool{weatherTool(&log{})},
		Model: script(t, `{"provider":"scripted","default":{"steps":[{"tool_calls":[{"name":"get_weather","args":{"city":"Pune"}}]},{"text":"child answer"}]}}`)})
	root, err := NewLLMAgent(LLMConfig{Name: "root", SubAgents: []Agent{child},
		Model: script(t, `{"provider":"scripted","default":{"steps":[{"tool_calls":[{"name":"transfer_to_agent","args":{"agent_name":"child"}}]}]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	count := func(_ context.Context, hook plugins.Hook, cc plugins.CallContext, _ any, _ map[string]any) (plugins.Outcome, error) {
		l.add(string(hook))
		l.add(string(hook) + "@" + cc.Agent)
		return plugins.Observe(), nil
	}
	p := pipeline(t, plugins.Descriptor{ID: "counter", Plugin: plugins.Dispatch(count, plugins.HookBeforeAgent, plugins.HookBeforeModel, plugins.HookAfterAgent)})
	tr := mustTurn(t, newRunner(t, root, RunnerOptions{Plugins: p}), "weather?")
	if tr.FinalText != "child answer" {
		t.Fatalf("final %q", tr.FinalText)
	}
	if l.count("before_agent") != 2 || l.count("before_model") != 3 || l.count("after_agent") != 2 {
		t.Fatalf("counts %v", l.all())
	}
	if l.count("before_model@child") != 2 || l.count("before_agent@child") != 1 {
		t.Fatalf("child hooks %v", l.all())
	}
	var transfer *session.Event
	for _, ev := range tr.Events {
		if ev.Actions.TransferToAgent != "" {
			transfer = ev
		}
	}
	if transfer == nil || transfer.Actions.TransferToAgent != "child" || transfer.Author != "root" {
		t.Fatalf("no transfer event in %v", texts(tr.Events))
	}
}

func TestRunner_OnEventIdentity(t *testing.T) {
	prov := func() *recordingProvider {
		return &recordingProvider{Provider: script(t, `{"provider":"scripted","default":{"steps":[{"text":"{\"a\":\"b\"}"}]}}`)}
	}
	amend := func(f func(ev *session.Event)) *plugins.Pipeline {
		return pipeline(t, plugins.Descriptor{ID: "e", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
			OnEvent: func(_ context.Context, _ plugins.CallContext, ev *session.Event, _ map[string]any) (plugins.Outcome, error) {
				f(ev)
				return plugins.Amend(ev), nil
			},
		}})
	}
	t.Run("text rewrite keeps identity and is persisted", func(t *testing.T) {
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov()})
		r := newRunner(t, a, RunnerOptions{Plugins: amend(func(ev *session.Event) { ev.Content.Parts[0].Text = "redacted" })})
		tr := mustTurn(t, r, "q")
		sess, _ := r.Sessions().Get("s1")
		if tr.FinalText != "redacted" || sess.Events[1].Content.Text() != "redacted" || sess.Events[1].ID != tr.Events[0].ID {
			t.Fatalf("final %q session %v", tr.FinalText, sess.Events)
		}
	})
	for name, f := range map[string]func(ev *session.Event){
		"id":          func(ev *session.Event) { ev.ID = "other" },
		"author":      func(ev *session.Event) { ev.Author = "mallory" },
		"final flag":  func(ev *session.Event) { ev.Final = false },
		"state delta": func(ev *session.Event) { ev.Actions.StateDelta = map[string]any{"x": 1.0} },
		"content kind": func(ev *session.Event) {
			ev.Content.Parts = append(ev.Content.Parts, model.Part{ToolCall: &model.ToolCall{ID: "c", Name: "t"}})
		},
	} {
		t.Run("changing "+name+" is rejected", func(t *testing.T) {
			a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov()})
			r := newRunner(t, a, RunnerOptions{Plugins: amend(f)})
			_, err := turn(t, r, "q")
			if !errors.Is(err, ErrInvalidEventIdentity) {
				t.Fatalf("err %v", err)
			}
			if sess, _ := r.Sessions().Get("s1"); len(sess.Events) != 1 {
				t.Fatalf("rejected event persisted: %d events", len(sess.Events))
			}
		})
	}
	t.Run("schema-validated final content cannot be rewritten", func(t *testing.T) {
		sch, _ := CompileSchema(map[string]any{"type": "object"})
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov(), OutputSchema: sch})
		r := newRunner(t, a, RunnerOptions{Plugins: amend(func(ev *session.Event) { ev.Content.Parts[0].Text = `{"a":"evil"}` })})
		if _, err := turn(t, r, "q"); !errors.Is(err, ErrInvalidEventIdentity) {
			t.Fatalf("err %v", err)
		}
	})
}
