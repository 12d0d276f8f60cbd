package gemini

import (
	"context"
	"encoding/json"
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

const plantedKey = "AIza-planted-SECRET-4242"

func server(t *testing.T, handle func(w http.ResponseWriter, body map[string]any, attempt int)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(attempts.Add(1))
		if r.URL.Path != "/v1beta/models/gemini-test:generateContent" || r.Header.Get("x-goog-api-key") != plantedKey || r.URL.RawQuery != "" {
			w.WriteHeader(404)
			return
		}
		var body map[string]any
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &body)
		handle(w, body, n)
	}))
	t.Cleanup(func() {
		srv.Close()
		httpx.CloseIdleConnections()
	})
	return srv, &attempts
}

func provider(t *testing.T, srv *httptest.Server, extra func(*Config)) *Provider {
	t.Helper()
	t.Setenv("TEST_GEMINI_KEY", plantedKey)
	cfg := Config{Provider: "gemini", Model: "gemini-test", HTTPConfig: model.HTTPConfig{BaseURL: srv.URL + "/v1beta", APIKeyEnv: "TEST_GEMINI_KEY", BaseBackoffMS: 1}}
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
			{Role: model.RoleTool, Parts: []model.Part{{ToolResult: &model.ToolResult{ID: "c1", Name: "get_weather", Error: "no data"}}}},
		},
		Tools: []model.ToolDeclaration{{Name: "get_weather", Parameters: map[string]any{"type": "object"}}},
	}
}

func TestGemini_FunctionCallingUsageAndSchema(t *testing.T) {
	var seen map[string]any
	srv, _ := server(t, func(w http.ResponseWriter, body map[string]any, _ int) {
		seen = body
		_, _ = io.WriteString(w, `{"candidates":[{"finishReason":"STOP","content":{"role":"model","parts":[
			{"text":"checking"},{"functionCall":{"name":"get_weather","args":{"city":"Oslo"}}},{"functionCall":{"id":"g2","name":"get_time"}}]}}],
			"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":3,"cachedContentTokenCount":2},"modelVersion":"gemini-test-001","responseId":"rid"}`)
	})
	req := request()
	req.OutputSchema = map[string]any{"type": "OBJECT"}
	resp, err := provider(t, srv, nil).Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls()
	if resp.Message.Text() != "checking" || len(calls) != 2 || calls[0].Args["city"] != "Oslo" || calls[0].ID == "" || calls[1].ID != "g2" || calls[1].Args == nil {
		t.Fatalf("resp %+v calls %+v", resp, calls)
	}
	if resp.Usage != (model.Usage{InputTokens: 9, OutputTokens: 3, CacheReadTokens: 2}) || resp.Model != "gemini-test-001" || resp.ID != "rid" {
		t.Fatalf("resp %+v", resp)
	}
	if si := seen["systemInstruction"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"]; si != "sys" {
		t.Fatalf("system instruction %v", si)
	}
	contents := seen["contents"].([]any)
	if len(contents) != 3 {
		t.Fatalf("contents %v", contents)
	}
	fc := contents[1].(map[string]any)["parts"].([]any)[0].(map[string]any)["functionCall"].(map[string]any)
	fr := contents[2].(map[string]any)["parts"].([]any)[0].(map[string]any)["functionResponse"].(map[string]any)
	if fc["name"] != "get_weather" || fr["name"] != "get_weather" || fr["response"].(map[string]any)["error"] != "no data" {
		t.Fatalf("function call/response %v %v", fc, fr)
	}
	gc := seen["generationConfig"].(map[string]any)
	if gc["responseMimeType"] != "application/json" || gc["responseSchema"] == nil {
		t.Fatalf("generationConfig %v", gc)
	}
	if decls := seen["tools"].([]any)[0].(map[string]any)["functionDeclarations"].([]any); len(decls) != 1 {
		t.Fatalf("tools %v", seen["tools"])
	}
}

// TestGemini_Conformance runs the suite every remote provider passes
// against a fake generateContent server.
func TestGemini_Conformance(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		Authorized: func(r *http.Request, key string) bool {
			return r.Method == http.MethodPost && r.URL.Path == "/v1beta/models/gemini-test:generateContent" &&
				r.URL.RawQuery == "" && r.Header.Get("x-goog-api-key") == key
		},
		Answer: func(text string) string {
			b, _ := json.Marshal(text)
			return `{"candidates":[{"finishReason":"STOP","content":{"role":"model","parts":[{"text":` + string(b) + `}]}}]}`
		},
		Malformed: `{"candidates":[]}`,
		New: func(serverURL string, cfg model.HTTPConfig) (model.Provider, error) {
			if serverURL != "" {
				cfg.BaseURL = serverURL + "/v1beta"
			}
			return New(Config{Provider: "gemini", Model: "gemini-test", HTTPConfig: cfg}, nil)
		},
	})
}

func TestGemini_Config(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no model":       {},
		"path in model":  {Model: "../x"},
		"other provider": {Provider: "openai", Model: "m"},
	} {
		_, err := New(cfg, nil)
		if err == nil || strings.Contains(err.Error(), plantedKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
