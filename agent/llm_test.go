package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/plugins/builtin"
)

var weatherParams = map[string]any{
	"type":                 "object",
	"properties":           map[string]any{"city": map[string]any{"type": "string", "minLength": 1}},
	"required":             []any{"city"},
	"additionalProperties": false,
}

func weatherTool(calls *log) Tool {
	return NewFuncTool("get_weather", "weather", weatherParams, func(_ context.Context, tc *ToolContext, args map[string]any) (any, error) {
		calls.add("get_weather:" + args["city"].(string))
		tc.SetState("last_city", args["city"])
		return map[string]any{"city": args["city"], "temp_c": 20.0}, nil
	})
}

func TestLLMAgent_ToolLoop(t *testing.T) {
	t.Run("several tool calls per step, results fed back in order", func(t *testing.T) {
		calls := &log{}
		prov := &recordingProvider{Provider: script(t, `{"provider":"scripted","usage":{"input_tokens":10,"output_tokens":2},"rules":[{"match":{"contains":"both"},"steps":[
			{"tool_calls":[{"name":"get_weather","args":{"city":"Pune"}},{"name":"get_weather","args":{"city":"Oslo"}}]},
			{"text":"done"}]}]}`)}
		a, err := NewLLMAgent(LLMConfig{Name: "root", Instruction: "be brief", Model: prov, Tools: []Tool{weatherTool(calls)}})
		if err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, a, RunnerOptions{})
		tr := mustTurn(t, r, "weather in both cities")
		if tr.FinalText != "done" {
			t.Fatalf("final %q", tr.FinalText)
		}
		if got := calls.all(); !reflect.DeepEqual(got, []string{"get_weather:Pune", "get_weather:Oslo"}) {
			t.Fatalf("tool calls %v", got)
		}
		if len(tr.ToolCalls) != 2 || tr.ToolCalls[1].Name != "get_weather" || tr.ToolCalls[1].Args["city"] != "Oslo" || tr.ToolCalls[1].Result == nil {
			t.Fatalf("trajectory %+v", tr.ToolCalls)
		}
		if tr.Usage.InputTokens != 20 || tr.Usage.OutputTokens != 4 {
			t.Fatalf("usage %+v", tr.Usage)
		}
		// Second request: system, user, model(tool calls), tool(results).
		req := prov.reqs[1]
		roles := []model.Role{}
		for _, m := range req.Messages {
			roles = append(roles, m.Role)
		}
		if !reflect.DeepEqual(roles, []model.Role{model.RoleSystem, model.RoleUser, model.RoleModel, model.RoleTool}) {
			t.Fatalf("roles %v", roles)
		}
		res := req.Messages[3].Parts
		if len(res) != 2 || res[0].ToolResult.ID != "call_0_0" || res[1].ToolResult.ID != "call_0_1" {
			t.Fatalf("results %+v", res)
		}
		if len(req.Tools) != 1 || req.Tools[0].Name != "get_weather" {
			t.Fatalf("tools %+v", req.Tools)
		}
		sess, _ := r.Sessions().Get("s1")
		if sess.State["last_city"] != "Oslo" {
			t.Fatalf("state %v", sess.State)
		}
		if len(sess.Events) != 4 { // user, model, tool, model
			t.Fatalf("session events %d", len(sess.Events))
		}
	})

	t.Run("max_steps_exceeded", func(t *testing.T) {
		prov := script(t, `{"provider":"scripted","default":{"steps":[
			{"tool_calls":[{"name":"get_weather","args":{"city":"A"}}]},
			{"tool_calls":[{"name":"get_weather","args":{"city":"B"}}]},
			{"text":"late"}]}}`)
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov, Tools: []Tool{weatherTool(&log{})}, MaxSteps: 2})
		_, err := turn(t, newRunner(t, a, RunnerOptions{}), "x")
		if !errors.Is(err, ErrMaxStepsExceeded) || ErrorType(err) != CodeMaxStepsExceeded {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("output schema validated on the final response", func(t *testing.T) {
		sch, err := CompileSchema(map[string]any{"type": "object", "required": []any{"answer"}, "properties": map[string]any{"answer": map[string]any{"type": "string"}}})
		if err != nil {
			t.Fatal(err)
		}
		prov := &recordingProvider{Provider: script(t, `{"provider":"scripted","rules":[
			{"match":{"equals":"good"},"steps":[{"text":"{\"answer\":\"yes\"}"}]},
			{"match":{"equals":"bad"},"steps":[{"text":"{\"answer\":1}"}]},
			{"match":{"equals":"prose"},"steps":[{"text":"just words"}]}]}`)}
		a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: prov, OutputSchema: sch})
		r := newRunner(t, a, RunnerOptions{})
		if tr := mustTurn(t, r, "good"); tr.FinalText != `{"answer":"yes"}` {
			t.Fatalf("final %q", tr.FinalText)
		}
		if prov.reqs[0].OutputSchema == nil {
			t.Fatal("output schema not sent to the provider")
		}
		for _, in := range []string{"bad", "prose"} {
			if _, err := turn(t, r, in); !errors.Is(err, ErrOutputSchemaViolation) {
				t.Fatalf("%s: err %v", in, err)
			}
		}
	})
}

func TestLLMAgent_ToolErrorsAreValues(t *testing.T) {
	prov := script(t, `{"provider":"scripted","default":{"steps":[
		{"tool_calls":[
			{"name":"get_weather","args":{"city":""}},
			{"name":"get_weather","args":{"town":"x"}},
			{"name":"no_such_tool","args":{}},
			{"name":"boom","args":{}},
			{"name":"panics","args":{}},
			{"name":"lookup","args":{"k":"missing"}}]},
		{"text":"ok"}]}}`)
	boom := NewFuncTool("boom", "", nil, func(context.Context, *ToolContext, map[string]any) (any, error) {
		return nil, errors.New("disk on fire")
	})
	panics := NewFuncTool("panics", "", nil, func(context.Context, *ToolContext, map[string]any) (any, error) {
		panic("bad tool")
	})
	errMsg := "unknown key"
	lookup := NewMockTool(model.ToolDeclaration{Name: "lookup"}, MockSpec{Default: &MockDefault{Error: &errMsg}})
	a, err := NewLLMAgent(LLMConfig{Name: "root", Model: prov, Tools: []Tool{weatherTool(&log{}), boom, panics, lookup}})
	if err != nil {
		t.Fatal(err)
	}
	tr := mustTurn(t, newRunner(t, a, RunnerOptions{}), "go")
	if tr.FinalText != "ok" {
		t.Fatalf("final %q", tr.FinalText)
	}
	want := []string{CodeInvalidToolArgs, CodeInvalidToolArgs, CodeUnknownTool, "disk on fire", "tool panicked", "unknown key"}
	for i, w := range want {
		if !strings.HasPrefix(tr.ToolCalls[i].Error, w) {
			t.Errorf("call %d error %q, want prefix %q", i, tr.ToolCalls[i].Error, w)
		}
	}
}

func TestMockTool_FirstDeepEqualResponseWins(t *testing.T) {
	var spec MockSpec
	if err := json.Unmarshal([]byte(`{"responses":[
		{"args":{"city":"Pune","n":1},"result":"first"},
		{"args":{"city":"Pune","n":1},"result":"second"},
		{"args":{"city":"Oslo","tags":["a","b"]},"result":{"snow":true}}],
		"default":{"result":"fallback"}}`), &spec); err != nil {
		t.Fatal(err)
	}
	m := NewMockTool(model.ToolDeclaration{Name: "m"}, spec)
	for _, tc := range []struct {
		args map[string]any
		want any
	}{
		{map[string]any{"city": "Pune", "n": 1}, "first"}, // Go int equals JSON number
		{map[string]any{"city": "Pune", "n": 1.0}, "first"},
		{map[string]any{"city": "Oslo", "tags": []any{"a", "b"}}, map[string]any{"snow": true}},
		{map[string]any{"city": "Oslo", "tags": []any{"b", "a"}}, "fallback"},
		{map[string]any{"city": "Pune"}, "fallback"},
	} {
		got, err := m.Call(context.Background(), &ToolContext{}, tc.args)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("args %v: got %v, %v; want %v", tc.args, got, err, tc.want)
		}
	}
	none := NewMockTool(model.ToolDeclaration{Name: "n"}, MockSpec{})
	if _, err := none.Call(context.Background(), &ToolContext{}, nil); !errors.Is(err, ErrNoMockResponse) {
		t.Fatalf("err %v", err)
	}
}

func TestHTTPTool(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		var args map[string]any
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || json.Unmarshal(body, &args) != nil {
			w.WriteHeader(400)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"echo": args["q"]})
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		_, _ = w.Write([]byte("secret internal detail"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", MaxHTTPToolResponseBytes+10)))
	})
	block := make(chan struct{})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(block)

	mk := func(path string, ms int) *HTTPTool {
		tool, err := NewHTTPTool(model.ToolDeclaration{Name: "h"}, HTTPSpec{URL: srv.URL + path, TimeoutMS: ms})
		if err != nil {
			t.Fatal(err)
		}
		return tool
	}
	ctx := context.Background()
	got, err := mk("/ok", 0).Call(ctx, &ToolContext{}, map[string]any{"q": "hi"})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"echo": "hi"}) {
		t.Fatalf("ok: %v %v", got, err)
	}
	if _, err := mk("/fail", 0).Call(ctx, &ToolContext{}, nil); err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "500") {
		t.Fatalf("fail: %v", err)
	}
	if _, err := mk("/big", 0).Call(ctx, &ToolContext{}, nil); err == nil || err.Error() != CodeToolResultTooLarge {
		t.Fatalf("big: %v", err)
	}
	if _, err := mk("/slow", 50).Call(ctx, &ToolContext{}, nil); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("slow: %v", err)
	}
	if _, err := NewHTTPTool(model.ToolDeclaration{Name: "h"}, HTTPSpec{URL: "file:///etc/passwd"}); err == nil {
		t.Fatal("file URL accepted")
	}
	srv.CloseClientConnections()
}

// TestLLMAgent_ReflectRetrySeesRetryAttempts checks that the runtime counts
// failed executions of a tool, so reflect_retry's guidance stops after
// max_attempts and the model then sees the plain tool error.
func TestLLMAgent_ReflectRetrySeesRetryAttempts(t *testing.T) {
	failing := NewFuncTool("flaky", "always fails", nil, func(context.Context, *ToolContext, map[string]any) (any, error) {
		return nil, errors.New("upstream unavailable")
	})
	call := `{"tool_calls":[{"name":"flaky","args":{}}]}`
	prov := script(t, `{"provider":"scripted","default":{"steps":[`+call+`,`+call+`,`+call+`,{"text":"gave up"}]}}`)
	a, err := NewLLMAgent(LLMConfig{Name: "root", Model: prov, Tools: []Tool{failing}})
	if err != nil {
		t.Fatal(err)
	}
	retry, err := builtin.New("reflect_retry", map[string]any{"max_attempts": 2, "guidance": "try once more"})
	if err != nil {
		t.Fatal(err)
	}
	retry.ID = "retry"
	r := newRunner(t, a, RunnerOptions{Plugins: pipeline(t, retry)})
	tr := mustTurn(t, r, "go")
	if len(tr.ToolCalls) != 3 {
		t.Fatalf("tool calls = %d, want 3", len(tr.ToolCalls))
	}
	for i, want := range []any{1, 2, nil} {
		tc := tr.ToolCalls[i]
		res, _ := tc.Result.(map[string]any)
		guidance, _ := res["adk_retry"].(map[string]any)
		if want == nil {
			if guidance != nil || tc.Error == "" {
				t.Errorf("call %d: want the plain tool error after max_attempts, got result %v error %q", i, tc.Result, tc.Error)
			}
			continue
		}
		if guidance == nil || fmt.Sprint(guidance["attempt"]) != fmt.Sprint(want) {
			t.Errorf("call %d: guidance %v, want attempt %v", i, guidance, want)
		}
	}
}
