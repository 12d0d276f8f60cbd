package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/fadcedab/adk/agent/internal/httpx"
	"github.com/fadcedab/adk/agent/model"
)

// ProviderName is the provider's gen_ai.provider.name.
const ProviderName = "openai"

// DefaultBaseURL is used when the config names none.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config is the openai model configuration from AGENT.json.
type Config struct {
	Provider        string   `json:"provider"`
	Model           string   `json:"model"`
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxOutputTokens int      `json:"max_output_tokens,omitempty"`
	// HTTPConfig is the endpoint, key variable, timeout, retry and
	// response bounds every remote provider shares; its keys sit at the
	// top level of the JSON.
	model.HTTPConfig
	// MaxTokensParam names the request field of the output bound:
	// "max_tokens" (what most OpenAI-compatible servers know),
	// "max_completion_tokens" (what OpenAI's reasoning models require and
	// its newer models accept), or "" for auto: max_completion_tokens for
	// the o-series and gpt-5 model families, max_tokens otherwise.
	MaxTokensParam string `json:"max_tokens_param,omitempty"`
	// APIVersion, when set, is sent as the api-version query parameter
	// (Azure OpenAI: base_url https://RESOURCE.openai.azure.com/openai/
	// deployments/DEPLOYMENT, api_version 2024-10-21).
	APIVersion string `json:"api_version,omitempty"`
	// APIKeyHeader is how the key is sent: "authorization" (Authorization:
	// Bearer KEY) or "api-key" (api-key: KEY, Azure). Default: api-key
	// when api_version is set, else authorization.
	APIKeyHeader string `json:"api_key_header,omitempty"`
}

// Values of Config.MaxTokensParam and Config.APIKeyHeader.
const (
	ParamMaxTokens           = "max_tokens"
	ParamMaxCompletionTokens = "max_completion_tokens"
	HeaderAuthorization      = "authorization"
	HeaderAPIKey             = "api-key"
)

// needsMaxCompletionTokens reports whether a model family refuses
// max_tokens (OpenAI's reasoning models: o1, o3, o4-mini, gpt-5, ...).
func needsMaxCompletionTokens(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:] // "openai/o3-mini" on a router
	}
	if strings.HasPrefix(m, "gpt-5") {
		return true
	}
	return len(m) >= 2 && m[0] == 'o' && m[1] >= '1' && m[1] <= '9'
}

// Provider is the OpenAI-compatible model.Provider.
type Provider struct {
	cfg      Config
	base     string
	endpoint string
	header   http.Header
	client   httpx.Client
	// ep is endpoint with header, prepared once for every call.
	ep *httpx.Endpoint
}

// Parse decodes an openai model configuration (unknown keys are errors) and
// builds the provider.
func Parse(raw []byte) (*Provider, error) {
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("openai config: %w", err)
	}
	return New(cfg, nil)
}

// New validates cfg and builds the provider. hc may be nil (the shared
// tuned transport). A named api_key_env that is unset or empty is an error:
// a missing key should fail the build, not every call.
func New(cfg Config, hc *http.Client) (*Provider, error) {
	if cfg.Provider != "" && cfg.Provider != ProviderName {
		return nil, fmt.Errorf("openai config: provider %q", cfg.Provider)
	}
	if cfg.Model == "" {
		return nil, fmt.Errorf("openai config: model is required")
	}
	base, key, client, err := httpx.Setup("openai config", ProviderName, DefaultBaseURL, hc, cfg.HTTPConfig)
	if err != nil {
		return nil, err
	}
	switch cfg.MaxTokensParam {
	case "", ParamMaxTokens, ParamMaxCompletionTokens:
	default:
		return nil, fmt.Errorf("openai config: max_tokens_param %q is not one of %s, %s", cfg.MaxTokensParam, ParamMaxTokens, ParamMaxCompletionTokens)
	}
	header := cfg.APIKeyHeader
	switch {
	case header == "" && cfg.APIVersion != "":
		header = HeaderAPIKey
	case header == "":
		header = HeaderAuthorization
	case header != HeaderAuthorization && header != HeaderAPIKey:
		return nil, fmt.Errorf("openai config: api_key_header %q is not one of %s, %s", cfg.APIKeyHeader, HeaderAuthorization, HeaderAPIKey)
	}
	endpoint := base + "/chat/completions"
	if cfg.APIVersion != "" {
		if strings.ContainsAny(cfg.APIVersion, "&?#/ ") || len(cfg.APIVersion) > 64 {
			return nil, fmt.Errorf("openai config: api_version must be a version such as 2024-10-21")
		}
		endpoint += "?api-version=" + url.QueryEscape(cfg.APIVersion)
	}
	p := &Provider{cfg: cfg, base: base, endpoint: endpoint, header: http.Header{}, client: client}
	if key != "" {
		if header == HeaderAPIKey {
			p.header.Set("api-key", key)
		} else {
			p.header.Set("Authorization", "Bearer "+key)
		}
	}
	p.ep = p.client.NewEndpoint(p.endpoint, p.header)
	return p, nil
}

// completionTokens reports whether the output bound goes in
// max_completion_tokens for this model.
func (p *Provider) completionTokens(model string) bool {
	switch p.cfg.MaxTokensParam {
	case ParamMaxCompletionTokens:
		return true
	case ParamMaxTokens:
		return false
	}
	return needsMaxCompletionTokens(model)
}

// LeaveRateLimitsToCaller makes a 429 return at once with its
// Retry-After (ratelimit.CallerRetries): a rate limiter retries it.
func (p *Provider) LeaveRateLimitsToCaller() { p.client.CallerRetries429 = true }

// Endpoint is the base URL the provider calls (ratelimit's endpoint
// label; it holds no credential).
func (p *Provider) Endpoint() string { return p.base }

// Name reports "openai".
func (p *Provider) Name() string { return ProviderName }

// Wire shapes of the chat completions API (only what we use). encode
// writes chatRequest's encoding without building one (encode.go).
type (
	chatRequest struct {
		Model          string          `json:"model"`
		Messages       []chatMessage   `json:"messages"`
		Tools          []chatTool      `json:"tools,omitempty"`
		ResponseFormat *responseFormat `json:"response_format,omitempty"`
		Temperature    *float64        `json:"temperature,omitempty"`
		MaxTokens      int             `json:"max_tokens,omitempty"`
		// MaxCompletionTokens replaces MaxTokens where the model needs it.
		MaxCompletionTokens int `json:"max_completion_tokens,omitempty"`
	}
	chatMessage struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	chatTool struct {
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  map[string]any `json:"parameters,omitempty"`
	}
	responseFormat struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string         `json:"name"`
			Schema map[string]any `json:"schema"`
		} `json:"json_schema"`
	}
	// chatResponse and the types below it are what decodeResponse
	// reads (decode.go decodes them without encoding/json too).
	chatResponse struct {
		ID      string       `json:"id"`
		Model   string       `json:"model"`
		Choices []chatChoice `json:"choices"`
		Usage   *chatUsage   `json:"usage"`
	}
	chatChoice struct {
		Message      chatChoiceMessage `json:"message"`
		FinishReason string            `json:"finish_reason"`
	}
	chatChoiceMessage struct {
		Content   *string        `json:"content"`
		ToolCalls []chatToolCall `json:"tool_calls"`
	}
	chatUsage struct {
		PromptTokens        int64              `json:"prompt_tokens"`
		CompletionTokens    int64              `json:"completion_tokens"`
		PromptTokensDetails *chatTokensDetails `json:"prompt_tokens_details"`
	}
	chatTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	}
)

// Generate performs one chat completion.
func (p *Provider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	body, err := p.encode(req)
	if err != nil {
		return nil, p.client.Fail(model.ClassClient)
	}
	// The answer is decoded where it was read (the decoder copies what
	// it keeps), then its connection is handed back.
	data, done, err := p.client.PostBorrow(ctx, p.ep, body)
	if err != nil {
		return nil, err
	}
	defer done()
	return p.decode(data)
}

func toolContent(r *model.ToolResult) (string, error) {
	v := map[string]any{"result": r.Result}
	if r.Error != "" {
		v = map[string]any{"error": r.Error}
	}
	b, err := json.Marshal(v)
	return string(b), err
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func (p *Provider) decode(data []byte) (*model.Response, error) {
	var cr chatResponse
	if err := decodeResponse(data, &cr); err != nil || len(cr.Choices) == 0 {
		return nil, p.client.Fail(model.ClassBadResponse)
	}
	ch := cr.Choices[0]
	resp := &model.Response{
		Message:      model.Message{Role: model.RoleModel},
		FinishReason: ch.FinishReason,
		Model:        cr.Model,
		ID:           cr.ID,
	}
	if ch.Message.Content != nil && *ch.Message.Content != "" {
		resp.Message.Parts = append(resp.Message.Parts, model.Part{Text: *ch.Message.Content})
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Function.Name == "" {
			return nil, p.client.Fail(model.ClassBadResponse)
		}
		args := map[string]any{}
		if s := strings.TrimSpace(tc.Function.Arguments); s != "" {
			if err := json.Unmarshal([]byte(s), &args); err != nil {
				return nil, p.client.Fail(model.ClassBadResponse)
			}
		}
		resp.Message.Parts = append(resp.Message.Parts, model.Part{ToolCall: &model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: args}})
	}
	if cr.Usage != nil {
		resp.Usage.InputTokens = cr.Usage.PromptTokens
		resp.Usage.OutputTokens = cr.Usage.CompletionTokens
		if cr.Usage.PromptTokensDetails != nil {
			resp.Usage.CacheReadTokens = cr.Usage.PromptTokensDetails.CachedTokens
		}
	}
	return resp, nil
}
