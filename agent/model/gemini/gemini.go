package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/fadcedab/adk/agent/internal/httpx"
	"github.com/fadcedab/adk/agent/model"
)

// ProviderName is the provider's gen_ai.provider.name.
const ProviderName = "gcp.gemini"

// DefaultBaseURL is used when the config names none.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

// Config is the gemini model configuration from AGENT.json.
type Config struct {
	Provider        string   `json:"provider"`
	Model           string   `json:"model"`
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxOutputTokens int      `json:"max_output_tokens,omitempty"`
	// HTTPConfig is the endpoint, key variable, timeout, retry and
	// response bounds every remote provider shares; its keys sit at the
	// top level of the JSON.
	model.HTTPConfig
}

// Provider is the Gemini model.Provider.
type Provider struct {
	cfg    Config
	base   string
	header http.Header
	client httpx.Client
	// ep is the configured model's endpoint, prepared once; a request
	// naming another model prepares its own.
	ep *httpx.Endpoint
}

// Parse decodes a gemini model configuration (unknown keys are errors) and
// builds the provider.
func Parse(raw []byte) (*Provider, error) {
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("gemini config: %w", err)
	}
	return New(cfg, nil)
}

// New validates cfg and builds the provider; hc may be nil (the shared
// tuned transport).
func New(cfg Config, hc *http.Client) (*Provider, error) {
	if cfg.Provider != "" && cfg.Provider != "gemini" && cfg.Provider != ProviderName {
		return nil, fmt.Errorf("gemini config: provider %q", cfg.Provider)
	}
	if cfg.Model == "" || strings.ContainsAny(cfg.Model, "/?#:") {
		return nil, fmt.Errorf("gemini config: model is required and must be a bare model name")
	}
	base, key, client, err := httpx.Setup("gemini config", ProviderName, DefaultBaseURL, hc, cfg.HTTPConfig)
	if err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, base: base, header: http.Header{}, client: client}
	if key != "" {
		p.header.Set("x-goog-api-key", key)
	}
	p.ep = p.client.NewEndpoint(p.endpointOf(cfg.Model), p.header)
	return p, nil
}

// LeaveRateLimitsToCaller makes a 429 return at once with its
// Retry-After (ratelimit.CallerRetries): a rate limiter retries it.
func (p *Provider) LeaveRateLimitsToCaller() { p.client.CallerRetries429 = true }

// Endpoint is the base URL the provider calls (ratelimit's endpoint
// label; it holds no credential).
func (p *Provider) Endpoint() string { return p.base }

// Name reports "gcp.gemini".
func (p *Provider) Name() string { return ProviderName }

// Wire shapes of generateContent (only what we use).
type (
	genRequest struct {
		Contents          []content         `json:"contents"`
		SystemInstruction *content          `json:"systemInstruction,omitempty"`
		Tools             []genTool         `json:"tools,omitempty"`
		GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
	}
	content struct {
		Role  string    `json:"role,omitempty"`
		Parts []genPart `json:"parts"`
	}
	genPart struct {
		Text             string            `json:"text,omitempty"`
		FunctionCall     *functionCall     `json:"functionCall,omitempty"`
		FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	}
	functionCall struct {
		ID   string         `json:"id,omitempty"`
		Name string         `json:"name"`
		Args map[string]any `json:"args,omitempty"`
	}
	functionResponse struct {
		ID       string         `json:"id,omitempty"`
		Name     string         `json:"name"`
		Response map[string]any `json:"response"`
	}
	genTool struct {
		FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
	}
	functionDeclaration struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  map[string]any `json:"parameters,omitempty"`
	}
	generationConfig struct {
		ResponseMimeType string         `json:"responseMimeType,omitempty"`
		ResponseSchema   map[string]any `json:"responseSchema,omitempty"`
		Temperature      *float64       `json:"temperature,omitempty"`
		MaxOutputTokens  int            `json:"maxOutputTokens,omitempty"`
	}
	genResponse struct {
		Candidates []struct {
			Content      content `json:"content"`
			FinishReason string  `json:"finishReason"`
		} `json:"candidates"`
		UsageMetadata *struct {
			PromptTokenCount        int64 `json:"promptTokenCount"`
			CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
			CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
		} `json:"usageMetadata"`
		ModelVersion string `json:"modelVersion"`
		ResponseID   string `json:"responseId"`
	}
)

// Generate performs one generateContent call.
func (p *Provider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	modelName := p.cfg.Model
	if req.Model != "" {
		if strings.ContainsAny(req.Model, "/?#:") {
			return nil, p.client.Fail(model.ClassClient)
		}
		modelName = req.Model
	}
	body, err := p.encode(req)
	if err != nil {
		return nil, p.client.Fail(model.ClassClient)
	}
	ep := p.ep
	if modelName != p.cfg.Model {
		ep = p.client.NewEndpoint(p.endpointOf(modelName), p.header)
	}
	data, err := p.client.Post(ctx, ep, body)
	if err != nil {
		return nil, err
	}
	return p.decode(data)
}

// endpointOf is the generateContent URL of a model.
func (p *Provider) endpointOf(modelName string) string {
	return p.base + "/models/" + url.PathEscape(modelName) + ":generateContent"
}

func (p *Provider) encode(req *model.Request) ([]byte, error) {
	gr := genRequest{}
	var system []string
	for _, m := range req.Messages {
		switch m.Role {
		case model.RoleSystem:
			system = append(system, m.Text())
		case model.RoleUser:
			gr.Contents = append(gr.Contents, content{Role: "user", Parts: []genPart{{Text: m.Text()}}})
		case model.RoleModel:
			c := content{Role: "model"}
			for _, part := range m.Parts {
				switch {
				case part.ToolCall != nil:
					c.Parts = append(c.Parts, genPart{FunctionCall: &functionCall{ID: part.ToolCall.ID, Name: part.ToolCall.Name, Args: part.ToolCall.Args}})
				case part.Text != "":
					c.Parts = append(c.Parts, genPart{Text: part.Text})
				}
			}
			if len(c.Parts) > 0 {
				gr.Contents = append(gr.Contents, c)
			}
		case model.RoleTool:
			c := content{Role: "user"}
			for _, part := range m.Parts {
				if r := part.ToolResult; r != nil {
					resp := map[string]any{"result": r.Result}
					if r.Error != "" {
						resp = map[string]any{"error": r.Error}
					}
					c.Parts = append(c.Parts, genPart{FunctionResponse: &functionResponse{ID: r.ID, Name: r.Name, Response: resp}})
				}
			}
			if len(c.Parts) > 0 {
				gr.Contents = append(gr.Contents, c)
			}
		}
	}
	if len(system) > 0 {
		gr.SystemInstruction = &content{Parts: []genPart{{Text: strings.Join(system, "\n\n")}}}
	}
	if len(req.Tools) > 0 {
		t := genTool{}
		for _, d := range req.Tools {
			t.FunctionDeclarations = append(t.FunctionDeclarations, functionDeclaration{Name: d.Name, Description: d.Description, Parameters: d.Parameters})
		}
		gr.Tools = []genTool{t}
	}
	gc := &generationConfig{Temperature: p.cfg.Temperature, MaxOutputTokens: p.cfg.MaxOutputTokens}
	if req.Temperature != nil {
		gc.Temperature = req.Temperature
	}
	if req.MaxOutputTokens > 0 {
		gc.MaxOutputTokens = req.MaxOutputTokens
	}
	if req.OutputSchema != nil {
		gc.ResponseMimeType, gc.ResponseSchema = "application/json", req.OutputSchema
	}
	if gc.Temperature != nil || gc.MaxOutputTokens > 0 || gc.ResponseSchema != nil {
		gr.GenerationConfig = gc
	}
	return json.Marshal(gr)
}

func (p *Provider) decode(data []byte) (*model.Response, error) {
	var gr genResponse
	if err := json.Unmarshal(data, &gr); err != nil || len(gr.Candidates) == 0 {
		return nil, p.client.Fail(model.ClassBadResponse)
	}
	cand := gr.Candidates[0]
	resp := &model.Response{
		Message:      model.Message{Role: model.RoleModel},
		FinishReason: cand.FinishReason,
		Model:        gr.ModelVersion,
		ID:           gr.ResponseID,
	}
	for i, part := range cand.Content.Parts {
		switch {
		case part.FunctionCall != nil:
			fc := part.FunctionCall
			if fc.Name == "" {
				return nil, p.client.Fail(model.ClassBadResponse)
			}
			id := fc.ID
			if id == "" {
				// Gemini may omit call ids; positions are unique per response.
				id = "gemini_call_" + strconv.Itoa(i)
			}
			args := fc.Args
			if args == nil {
				args = map[string]any{}
			}
			resp.Message.Parts = append(resp.Message.Parts, model.Part{ToolCall: &model.ToolCall{ID: id, Name: fc.Name, Args: args}})
		case part.Text != "":
			resp.Message.Parts = append(resp.Message.Parts, model.Part{Text: part.Text})
		}
	}
	if u := gr.UsageMetadata; u != nil {
		resp.Usage.InputTokens = u.PromptTokenCount
		resp.Usage.OutputTokens = u.CandidatesTokenCount
		resp.Usage.CacheReadTokens = u.CachedContentTokenCount
	}
	return resp, nil
}
