package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fadcedab/adk/agent/internal/httpx"
	"github.com/fadcedab/adk/agent/internal/providertest"
	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

const plantedKey = "sk-planted-SECRET-4242"

// server is a fake chat completions endpoint; handle answers each attempt.
func server(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body map[string]any, attempt int)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(attempts.Add(1))
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+plantedKey {
			w.WriteHeader(404)
			return
		}
		var body map[string]any
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &body)
		handle(w, r, body, n)
	}))
	t.Cleanup(func() {
		srv.Close()
		httpx.CloseIdleConnections()
	})
	return srv, &attempts
}

func provider(t *testing.T, srv *httptest.Server, extra func(*Config)) *Provider {
	t.Helper()
	t.Setenv("TEST_OPENAI_KEY", plantedKey)
	cfg := Config{Provider: "openai", Model: "gpt-test", HTTPConfig: model.HTTPConfig{BaseURL: srv.URL + "/v1", APIKeyEnv: "TEST_OPENAI_KEY", BaseBackoffMS: 1, MaxBackoffMS: 2000}}
	if extra != nil {
		extra(&cfg)
	}
	p, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request() *model.Request {
	return &model.Request{
		Messages: []model.Message{
			{Role: model.RoleSystem, Parts: []model.Part{{Text: "sys"}}},
			{Role: model.RoleUser, Parts: []model.Part{{Text: "weather?"}}},
			{Role: model.RoleModel, Parts: []model.Part{{ToolCall: &model.ToolCall{ID: "c1", Name: "get_weather", Args: map[string]any{"city": "Pune"}}}}},
			{Role: model.RoleTool, Parts: []model.Part{{ToolResult: &model.ToolResult{ID: "c1", Name: "get_weather", Result: map[string]any{"t": 31.0}}}}},
		},
		Tools: []model.ToolDeclaration{{Name: "get_weather", Description: "w", Parameters: map[string]any{"type": "object"}}},
	}
}

func assertNoKey(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		if strings.Contains(s, plantedKey) || strings.Contains(s, "upstream body") {
			t.Fatalf("error leaks key or body: %s", s)
		}
	}
}

func TestOpenAI_ToolCallingAndUsage(t *testing.T) {
	var seen map[string]any
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, _ int) {
		seen = body
		_, _ = io.WriteString(w, `{"id":"r1","model":"gpt-test-0613","choices":[{"finish_reason":"tool_calls","message":{"content":null,
			"tool_calls":[{"id":"a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}},
			              {"id":"b","type":"function","function":{"name":"get_time","arguments":""}}]}}],
			"usage":{"prompt_tokens":12,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}}`)
	})
	resp, err := provider(t, srv, nil).Generate(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls()
	if len(calls) != 2 || calls[0].ID != "a" || calls[0].Args["city"] != "Oslo" || calls[1].Name != "get_time" || len(calls[1].Args) != 0 {
		t.Fatalf("calls %+v", calls)
	}
	if resp.Usage != (model.Usage{InputTokens: 12, OutputTokens: 5, CacheReadTokens: 4}) || resp.ID != "r1" || resp.Model != "gpt-test-0613" || resp.FinishReason != "tool_calls" {
		t.Fatalf("resp %+v", resp)
	}
	msgs := seen["messages"].([]any)
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool" {
		t.Fatalf("roles %v", roles)
	}
	asst := msgs[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	if asst["id"] != "c1" || asst["function"].(map[string]any)["arguments"] != `{"city":"Pune"}` {
		t.Fatalf("assistant tool call %v", asst)
	}
	if tool := msgs[3].(map[string]any); tool["tool_call_id"] != "c1" || tool["content"] != `{"result":{"t":31}}` {
		t.Fatalf("tool message %v", tool)
	}
	if seen["model"] != "gpt-test" || seen["tools"].([]any)[0].(map[string]any)["type"] != "function" {
		t.Fatalf("request %v", seen)
	}
}

func TestOpenAI_StructuredOutput(t *testing.T) {
	var seen map[string]any
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, _ int) {
		seen = body
		_, _ = io.WriteString(w, `{"choices":[{"finish_reason":"stop","message":{"content":"{\"a\":1}"}}]}`)
	})
	req := &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Text: "x"}}}}, OutputSchema: map[string]any{"type": "object"}}
	resp, err := provider(t, srv, nil).Generate(context.Background(), req)
	if err != nil || resp.Message.Text() != `{"a":1}` {
		t.Fatalf("%+v %v", resp, err)
	}
	rf := seen["response_format"].(map[string]any)
	if rf["type"] != "json_schema" || rf["json_schema"].(map[string]any)["schema"] == nil {
		t.Fatalf("response_format %v", rf)
	}
}

// TestOpenAI_Conformance runs the suite every remote provider passes
// against a fake chat completions server.
func TestOpenAI_Conformance(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		Authorized: func(r *http.Request, key string) bool {
			return r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions" && r.Header.Get("Authorization") == "Bearer "+key
		},
		Answer: func(text string) string {
			b, _ := json.Marshal(text)
			return `{"id":"r1","model":"gpt-test","choices":[{"finish_reason":"stop","message":{"content":` + string(b) + `}}]}`
		},
		Malformed: `{"choices":[{"message":{"tool_calls":[{"function":{"name":"x","arguments":"{not json"}}]}}]}`,
		New: func(serverURL string, cfg model.HTTPConfig) (model.Provider, error) {
			if serverURL != "" {
				cfg.BaseURL = serverURL + "/v1"
			}
			return New(Config{Provider: "openai", Model: "gpt-test", HTTPConfig: cfg}, nil)
		},
	})
}

func TestOpenAI_Config(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no model":     {HTTPConfig: model.HTTPConfig{BaseURL: "http://127.0.0.1:1"}},
		"other":        {Provider: "gemini", Model: "m"},
		"tokens param": {Model: "m", MaxTokensParam: "max_output_tokens"},
		"key header":   {Model: "m", APIKeyHeader: "x-api-key"},
		"api version":  {Model: "m", APIVersion: "2024-10-21&x=1"},
	} {
		_, err := New(cfg, nil)
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
		assertNoKey(t, err)
	}
	if _, err := Parse([]byte(`{"provider":"openai","model":"m","colour":1}`)); err == nil {
		t.Error("unknown key accepted")
	}
}

const okAnswer = `{"id":"r1","model":"m","choices":[{"finish_reason":"stop","message":{"content":"hi"}}]}`

// TestOpenAI_MaxCompletionTokens: reasoning models refuse max_tokens, so the
// output bound goes in max_completion_tokens for them (auto) or whenever the
// config says so; other models keep max_tokens.
func TestOpenAI_MaxCompletionTokens(t *testing.T) {
	var seen map[string]any
	srv, _ := server(t, func(w http.ResponseWriter, _ *http.Request, body map[string]any, _ int) {
		if _, both := body["max_tokens"]; both {
			if _, ok := body["max_completion_tokens"]; ok {
				w.WriteHeader(400) // a real server refuses both
				return
			}
		}
		seen = body
		_, _ = io.WriteString(w, okAnswer)
	})
	for _, tc := range []struct {
		model, param, want string
	}{
		{"gpt-test", "", "max_tokens"},
		{"gpt-4o", "", "max_tokens"},
		{"o3-mini", "", "max_completion_tokens"},
		{"o1", "", "max_completion_tokens"},
		{"gpt-5-mini", "", "max_completion_tokens"},
		{"openai/o4-mini", "", "max_completion_tokens"},
		{"gpt-test", ParamMaxCompletionTokens, "max_completion_tokens"},
		{"o3", ParamMaxTokens, "max_tokens"},
	} {
		p := provider(t, srv, func(c *Config) { c.Model, c.MaxTokensParam, c.MaxOutputTokens = tc.model, tc.param, 77 })
		if _, err := p.Generate(context.Background(), request()); err != nil {
			t.Fatalf("%s/%q: %v", tc.model, tc.param, err)
		}
		other := "max_tokens"
		if tc.want == other {
			other = "max_completion_tokens"
		}
		if seen[tc.want] != 77.0 || seen[other] != nil {
			t.Errorf("%s/%q: sent %v=%v %v=%v, want %s", tc.model, tc.param, tc.want, seen[tc.want], other, seen[other], tc.want)
		}
	}
}

// TestOpenAI_AzureDeployment talks to a fake Azure OpenAI deployment: the
// api-version query parameter on every call and the key in the api-key
// header, never in Authorization.
func TestOpenAI_AzureDeployment(t *testing.T) {
	const version = "2024-10-21"
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/openai/deployments/chat-dep/chat/completions" || r.URL.Query().Get("api-version") != version ||
			r.Header.Get("api-key") != plantedKey || r.Header.Get("Authorization") != "" {
			w.WriteHeader(401)
			return
		}
		_, _ = io.WriteString(w, okAnswer)
	}))
	t.Cleanup(func() {
		srv.Close()
		httpx.CloseIdleConnections()
	})
	t.Setenv("TEST_AZURE_KEY", plantedKey)
	p, err := Parse([]byte(`{"provider":"openai","base_url":"` + srv.URL + `/openai/deployments/chat-dep","model":"gpt-4o",
		"api_key_env":"TEST_AZURE_KEY","api_version":"` + version + `","max_attempts":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Generate(context.Background(), request())
	if err != nil || resp.Message.Text() != "hi" || calls.Load() != 1 {
		t.Fatalf("azure call: %v (calls %d)", err, calls.Load())
	}
	// api_key_header "authorization" keeps the bearer form for a proxy
	// that wants api-version but not Azure's header: refused here.
	p2 := provider(t, srv, func(c *Config) {
		c.BaseURL, c.APIVersion, c.APIKeyHeader, c.MaxAttempts = srv.URL+"/openai/deployments/chat-dep", version, HeaderAuthorization, 1
	})
	if _, err := p2.Generate(context.Background(), request()); err == nil {
		t.Fatal("bearer auth accepted by the fake Azure deployment")
	} else {
		assertNoKey(t, err)
	}
}

// TestOpenAI_AnswersOutliveTheirConnection: an answer is decoded where the
// connection read it (httpx.PostBorrow), so what it keeps must be its own:
// answers read one after another on one connection (the same buffer)
// stay as they were, tool call arguments and escaped text included.
func TestOpenAI_AnswersOutliveTheirConnection(t *testing.T) {
	srv, attempts := server(t, func(w http.ResponseWriter, _ *http.Request, _ map[string]any, n int) {
		body := fmt.Sprintf(`{"id":"id-%03d","model":"m-%03d","choices":[{"index":0,"finish_reason":"stop-%03d","message":{"role":"assistant","content":"answer \"%03d\"","tool_calls":[{"id":"call-%03d","type":"function","function":{"name":"tool_%03d","arguments":"{\"n\":%d}"}}]}}],"usage":{"prompt_tokens":%d,"completion_tokens":1}}`, n, n, n, n, n, n, n, n)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = io.WriteString(w, body)
	})
	p := provider(t, srv, nil)
	var got []*model.Response
	for range 5 {
		resp, err := p.Generate(context.Background(), request())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp)
	}
	if attempts.Load() != 5 {
		t.Fatalf("%d attempts, want 5", attempts.Load())
	}
	for i, r := range got {
		n := i + 1
		want := fmt.Sprintf("id-%03d m-%03d stop-%03d answer \"%03d\" call-%03d tool_%03d %v %d", n, n, n, n, n, n, float64(n), n)
		if len(r.Message.Parts) != 2 || r.Message.Parts[1].ToolCall == nil {
			t.Fatalf("answer %d: %+v", n, r.Message.Parts)
		}
		tc := r.Message.Parts[1].ToolCall
		have := fmt.Sprintf("%s %s %s %s %s %s %v %d", r.ID, r.Model, r.FinishReason, r.Message.Parts[0].Text, tc.ID, tc.Name, tc.Args["n"], r.Usage.InputTokens)
		if have != want {
			t.Fatalf("answer %d after later ones: %s, want %s", n, have, want)
		}
	}
}
