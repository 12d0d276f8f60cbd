package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/plugins"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func pipeline(t *testing.T, name string, cfg map[string]any, opts ...Option) *plugins.Pipeline {
	t.Helper()
	d, err := New(name, cfg, opts...)
	if err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	p, err := plugins.Compile([]plugins.Descriptor{d})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func msg(role model.Role, text string) model.Message {
	return model.Message{Role: role, Parts: []model.Part{{Text: text}}}
}

func texts(msgs []model.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ":" + m.Text()
	}
	return out
}

func TestGlobalInstruction_AmendsSystemMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		in   []model.Message
		want []string
	}{
		{"prepend merges with separator", map[string]any{"instruction": "Be safe."},
			[]model.Message{msg(model.RoleUser, "hi"), msg(model.RoleSystem, "You help.")},
			[]string{"user:hi", "system:Be safe.\n\nYou help."}},
		{"append with a custom separator", map[string]any{"instruction": "Be safe.", "position": "append", "separator": " | "},
			[]model.Message{msg(model.RoleSystem, "You help."), msg(model.RoleUser, "hi")},
			[]string{"system:You help. | Be safe.", "user:hi"}},
		{"no system message", map[string]any{"instruction": "Be safe."},
			[]model.Message{msg(model.RoleUser, "hi")},
			[]string{"system:Be safe.", "user:hi"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pipeline(t, GlobalInstructionName, tc.cfg)
			req := &model.Request{Messages: tc.in}
			r := p.Run(context.Background(), plugins.HookBeforeModel, plugins.CallContext{}, req)
			if r.Disposition != plugins.DispositionAmend {
				t.Fatalf("disposition = %s (%v)", r.Disposition, r.Err)
			}
			if got := texts(r.Value.(*model.Request).Messages); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("messages = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestContextFilter_PreservesSystemAndLatestUser(t *testing.T) {
	conversation := []model.Message{
		msg(model.RoleSystem, "sys"), msg(model.RoleUser, "u1"), msg(model.RoleModel, "m1"),
		msg(model.RoleUser, "u2"), msg(model.RoleModel, "m2"),
	}
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		want []string
	}{
		{"include agent, max 1", map[string]any{"include_roles": []any{"agent"}, "max_messages": 1.0},
			[]string{"system:sys", "user:u2", "model:m2"}},
		{"max 2 of all roles", map[string]any{"max_messages": 2},
			[]string{"system:sys", "user:u2", "model:m2"}},
		{"exclude model, no preservation", map[string]any{"exclude_roles": []any{"model", "system"}, "preserve_system": false},
			[]string{"user:u1", "user:u2"}},
		{"infinity keeps everything", map[string]any{"max_messages": "infinity"},
			texts(conversation)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pipeline(t, ContextFilterName, tc.cfg)
			r := p.Run(context.Background(), plugins.HookBeforeModel, plugins.CallContext{}, &model.Request{Messages: conversation})
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if got := texts(r.Value.(*model.Request).Messages); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("messages = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("orphaned tool results are dropped", func(t *testing.T) {
		call := model.Message{Role: model.RoleModel, Parts: []model.Part{{ToolCall: &model.ToolCall{ID: "c1", Name: "t"}}}}
		result := model.Message{Role: model.RoleTool, Parts: []model.Part{{ToolResult: &model.ToolResult{ID: "c1", Name: "t"}}}}
		p := pipeline(t, ContextFilterName, map[string]any{"exclude_roles": []any{"model"}})
		r := p.Run(context.Background(), plugins.HookBeforeModel, plugins.CallContext{},
			&model.Request{Messages: []model.Message{msg(model.RoleUser, "u"), call, result}})
		if got := texts(r.Value.(*model.Request).Messages); !reflect.DeepEqual(got, []string{"user:u"}) {
			t.Fatalf("messages = %q", got)
		}
	})
}

func TestReflectRetry_ReturnsBoundedGuidance(t *testing.T) {
	p := pipeline(t, ReflectRetryName, map[string]any{"max_attempts": 2, "guidance": "Fix the city name."})
	f := &plugins.Failure{Component: "tool", Operation: "weather", Class: "tool_error", Reason: "bad_args"}
	r := p.Run(context.Background(), plugins.HookOnToolError, plugins.CallContext{RetryAttempt: 1}, f)
	if r.Disposition != plugins.DispositionReturn {
		t.Fatalf("disposition = %s (%v)", r.Disposition, r.Err)
	}
	b, _ := json.Marshal(r.Value)
	want := `{"adk_retry":{"attempt":2,"error":{"class":"tool_error","component":"tool","operation":"weather","reason":"bad_args"},"guidance":"Fix the city name.","max_attempts":2,"retryable":true}}`
	if string(b) != want {
		t.Fatalf("result = %s\nwant     %s", b, want)
	}
	r = p.Run(context.Background(), plugins.HookOnToolError, plugins.CallContext{RetryAttempt: 2}, f)
	if r.Disposition != plugins.DispositionContinue {
		t.Fatalf("past max_attempts: %s", r.Disposition)
	}
	p = pipeline(t, ReflectRetryName, map[string]any{"enabled": false})
	if r := p.Run(context.Background(), plugins.HookOnToolError, plugins.CallContext{}, f); r.Disposition != plugins.DispositionContinue {
		t.Fatalf("disabled: %s", r.Disposition)
	}
}

func TestMetadataLogger_EmitsNoContent(t *testing.T) {
	var mu sync.Mutex
	var got []Metadata
	sink := func(m Metadata) { mu.Lock(); got = append(got, m); mu.Unlock() }
	p := pipeline(t, MetadataLoggerName, map[string]any{"log_level": "none"}, WithMetadataSink(sink))
	cc := plugins.CallContext{RunID: "r", InvocationID: "i", SessionID: "s", Agent: "root", Model: "m",
		Tool: "weather", CallID: "c", Extra: map[string]any{"phase": "tool", "api_key": "sk-secret"}}
	values := map[plugins.Hook]any{
		plugins.HookOnUserMessage: &model.Message{Role: model.RoleUser, Parts: []model.Part{{Text: "my password is hunter2"}}},
		plugins.HookBeforeRun:     &plugins.Turn{Agent: "root"}, plugins.HookAfterRun: &plugins.Turn{},
		plugins.HookBeforeAgent: &plugins.Turn{}, plugins.HookAfterAgent: &plugins.Turn{},
		plugins.HookBeforeModel:  &model.Request{Messages: []model.Message{msg(model.RoleUser, "hunter2")}},
		plugins.HookAfterModel:   &model.Response{Message: msg(model.RoleModel, "hunter2")},
		plugins.HookOnModelError: &plugins.Failure{}, plugins.HookBeforeTool: &plugins.ToolInvocation{Call: model.ToolCall{Args: map[string]any{"q": "hunter2"}}},
		plugins.HookAfterTool: map[string]any{"r": "hunter2"}, plugins.HookOnToolError: &plugins.Failure{},
		plugins.HookOnEvent:      &session.Event{Content: &model.Message{Parts: []model.Part{{Text: "hunter2"}}}},
		plugins.HookOnAgentError: &plugins.Failure{}, plugins.HookOnRunError: &plugins.Failure{},
	}
	for hook, v := range values {
		r := p.Run(context.Background(), hook, cc, v)
		if r.Disposition != plugins.DispositionContinue || r.Trace[0].Outcome != plugins.OutcomeObserved {
			t.Fatalf("%s: %+v", hook, r)
		}
	}
	if len(got) != len(values) {
		t.Fatalf("%d records for %d hooks", len(got), len(values))
	}
	for _, m := range got {
		b, _ := json.Marshal(m)
		if strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "sk-secret") {
			t.Fatalf("record leaks content: %s", b)
		}
		if m.RunID != "r" || m.PluginID != MetadataLoggerName || m.Phase != "tool" || m.Tool != "weather" {
			t.Fatalf("record = %+v", m)
		}
		if m.ValueType != "map" { // every phase value is a JSON object
			t.Fatalf("%s: value_type %s", m.Hook, m.ValueType)
		}
	}
}

func TestValueType(t *testing.T) {
	for v, want := range map[any]string{"s": "binary", 1: "number", 2.5: "number", true: "atom", struct{}{}: "map"} {
		if got := valueType(v); got != want {
			t.Errorf("valueType(%#v) = %s, want %s", v, got, want)
		}
	}
	if valueType(nil) != "atom" || valueType([]any{}) != "list" || valueType(map[string]any{}) != "map" || valueType(func() {}) != "other" {
		t.Error("valueType of nil/list/map/func")
	}
}

func TestNew_ConfigBounds(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name   string
		plugin string
		cfg    map[string]any
		ok     bool
	}{
		{"instruction required", GlobalInstructionName, map[string]any{}, false},
		{"instruction 65536", GlobalInstructionName, map[string]any{"instruction": long(65_536)}, true},
		{"instruction 65537", GlobalInstructionName, map[string]any{"instruction": long(65_537)}, false},
		{"instruction empty", GlobalInstructionName, map[string]any{"instruction": ""}, false},
		{"instruction invalid utf-8", GlobalInstructionName, map[string]any{"instruction": "\xff"}, false},
		{"separator 16", GlobalInstructionName, map[string]any{"instruction": "i", "separator": long(16)}, true},
		{"separator 17", GlobalInstructionName, map[string]any{"instruction": "i", "separator": long(17)}, false},
		{"bad position", GlobalInstructionName, map[string]any{"instruction": "i", "position": "middle"}, false},
		{"unknown key", GlobalInstructionName, map[string]any{"instruction": "i", "extra": 1}, false},
		{"max_messages 0", ContextFilterName, map[string]any{"max_messages": 0}, false},
		{"max_messages 1", ContextFilterName, map[string]any{"max_messages": 1}, true},
		{"max_messages 1.5", ContextFilterName, map[string]any{"max_messages": 1.5}, false},
		{"max_messages json.Number", ContextFilterName, map[string]any{"max_messages": json.Number("3")}, true},
		{"include all", ContextFilterName, map[string]any{"include_roles": "all"}, true},
		{"include empty", ContextFilterName, map[string]any{"include_roles": []any{}}, false},
		{"unknown role", ContextFilterName, map[string]any{"exclude_roles": []any{"robot"}}, false},
		{"preserve_system not bool", ContextFilterName, map[string]any{"preserve_system": "yes"}, false},
		{"unknown filter key", ContextFilterName, map[string]any{"max": 1}, false},
		{"max_attempts 16", ReflectRetryName, map[string]any{"max_attempts": 16}, true},
		{"max_attempts 17", ReflectRetryName, map[string]any{"max_attempts": 17}, false},
		{"max_attempts 0", ReflectRetryName, map[string]any{"max_attempts": 0}, false},
		{"guidance 4096", ReflectRetryName, map[string]any{"guidance": long(4096)}, true},
		{"guidance 4097", ReflectRetryName, map[string]any{"guidance": long(4097)}, false},
		{"log level notice", MetadataLoggerName, map[string]any{"log_level": "notice"}, true},
		{"log level loud", MetadataLoggerName, map[string]any{"log_level": "loud"}, false},
		{"logger unknown key", MetadataLoggerName, map[string]any{"id": "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.plugin, tc.cfg)
			if tc.ok != (err == nil) {
				t.Fatalf("New = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, plugins.ErrInvalidPluginConfig) {
				t.Fatalf("error %v is not invalid_plugin_config", err)
			}
		})
	}
	var pe *plugins.Error
	if _, err := New("telepathy", nil); !errors.As(err, &pe) || pe.Code != plugins.CodeUnknownBuiltinPlugin {
		t.Fatalf("unknown built-in: %v", err)
	}
}

func TestNew_DescriptorShape(t *testing.T) {
	for _, name := range Names() {
		cfg := map[string]any{}
		if name == GlobalInstructionName {
			cfg["instruction"] = "i"
		}
		d, err := New(name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		wantMode := plugins.ModeIntervene
		if name == MetadataLoggerName {
			wantMode = plugins.ModeObserve
		}
		if d.ID != name || d.Mode != wantMode || d.Plugin == nil {
			t.Fatalf("%s: descriptor %+v", name, d)
		}
	}
}
