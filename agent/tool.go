package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"time"

	"github.com/fadcedab/adk/agent/internal/httpx"
	"github.com/fadcedab/adk/agent/model"
)

// Tool bounds.
const (
	// MaxToolErrorBytes bounds the error text a model sees for a failed tool.
	MaxToolErrorBytes = 1024
	// DefaultHTTPToolTimeout and MaxHTTPToolTimeout bound an http tool call.
	DefaultHTTPToolTimeout = 10 * time.Second
	MaxHTTPToolTimeout     = 2 * time.Minute
	// MaxHTTPToolResponseBytes bounds an http tool's response body.
	MaxHTTPToolResponseBytes = 1 << 20
)

// Tool is a callable the model can request. The runtime validates the
// call's arguments against Declaration().Parameters before Call, and turns
// any error Call returns into a tool result the model sees.
type Tool interface {
	Declaration() model.ToolDeclaration
	Call(ctx context.Context, tc *ToolContext, args map[string]any) (any, error)
}

// ToolContext is what a tool call knows about its surroundings, and how a
// Go tool records session state changes.
type ToolContext struct {
	InvocationID string
	SessionID    string
	Agent        string
	CallID       string

	stateDelta map[string]any
}

// SetState records a session state change; it is applied when the tool's
// result event is appended to the session.
func (tc *ToolContext) SetState(key string, value any) {
	if tc.stateDelta == nil {
		tc.stateDelta = map[string]any{}
	}
	tc.stateDelta[key] = value
}

// FuncTool adapts a Go function to a Tool.
type FuncTool struct {
	decl model.ToolDeclaration
	fn   func(ctx context.Context, tc *ToolContext, args map[string]any) (any, error)
}

// NewFuncTool declares a Go function as a tool. parameters is a JSON Schema
// (nil: no arguments are validated).
func NewFuncTool(name, description string, parameters map[string]any, fn func(ctx context.Context, tc *ToolContext, args map[string]any) (any, error)) *FuncTool {
	return &FuncTool{decl: model.ToolDeclaration{Name: name, Description: description, Parameters: parameters}, fn: fn}
}

// Declaration returns the tool's declaration.
func (t *FuncTool) Declaration() model.ToolDeclaration { return t.decl }

// Call runs the function.
func (t *FuncTool) Call(ctx context.Context, tc *ToolContext, args map[string]any) (any, error) {
	return t.fn(ctx, tc, args)
}

// MockResponse is one canned answer of a mock tool.
type MockResponse struct {
	Args   map[string]any `json:"args"`
	Result any            `json:"result"`
}

// MockDefault is a mock tool's answer when no response matches: a result or
// an error message.
type MockDefault struct {
	Result any     `json:"result,omitempty"`
	Error  *string `json:"error,omitempty"`
}

// MockSpec is the "mock" implementation block of a tool in AGENT.json.
type MockSpec struct {
	Responses []MockResponse `json:"responses,omitempty"`
	Default   *MockDefault   `json:"default,omitempty"`
}

// MockTool answers from canned responses: the first whose args deep-equal
// the call's args (compared as JSON values) wins, else the default.
type MockTool struct {
	decl model.ToolDeclaration
	spec MockSpec
}

// ErrNoMockResponse is the tool error of a mock with no matching response
// and no default.
var ErrNoMockResponse = errors.New("no mock response matches the arguments")

// NewMockTool builds a mock tool.
func NewMockTool(decl model.ToolDeclaration, spec MockSpec) *MockTool {
	return &MockTool{decl: decl, spec: spec}
}

// Declaration returns the tool's declaration.
func (t *MockTool) Declaration() model.ToolDeclaration { return t.decl }

// Call returns the matching canned result.
func (t *MockTool) Call(_ context.Context, _ *ToolContext, args map[string]any) (any, error) {
	var norm map[string]any
	for _, r := range t.spec.Responses {
		if reflect.DeepEqual(nonNilArgs(r.Args), nonNilArgs(args)) {
			return r.Result, nil
		}
		if norm == nil {
			norm = normalizeJSON(args)
		}
		if reflect.DeepEqual(normalizeJSON(r.Args), norm) {
			return r.Result, nil
		}
	}
	if d := t.spec.Default; d != nil {
		if d.Error != nil {
			return nil, errors.New(*d.Error)
		}
		return d.Result, nil
	}
	return nil, ErrNoMockResponse
}

func nonNilArgs(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// normalizeJSON maps Go values to their JSON-decoded form (float64 numbers,
// []any, map[string]any) so that ints from Go callers equal numbers from
// JSON.
func normalizeJSON(m map[string]any) map[string]any {
	b, err := json.Marshal(nonNilArgs(m))
	if err != nil {
		return m
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return m
	}
	return out
}

// HTTPSpec is the "http" implementation block of a tool in AGENT.json.
type HTTPSpec struct {
	URL       string `json:"url"`
	TimeoutMS int    `json:"timeout_ms,omitempty"`
}

// HTTPTool POSTs the call's args as JSON to a URL and returns the decoded
// JSON response (or the body as a string when it is not JSON). Non-2xx
// statuses and transport failures are tool errors; responses are bounded.
type HTTPTool struct {
	decl    model.ToolDeclaration
	url     string
	timeout time.Duration
	client  *http.Client
}

var httpToolClient = &http.Client{Transport: httpx.Transport}

// NewHTTPTool validates spec and builds the tool.
func NewHTTPTool(decl model.ToolDeclaration, spec HTTPSpec) (*HTTPTool, error) {
	u, err := url.Parse(spec.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("http tool %s: url must be an absolute http(s) URL", decl.Name)
	}
	timeout := time.Duration(spec.TimeoutMS) * time.Millisecond
	if spec.TimeoutMS == 0 {
		timeout = DefaultHTTPToolTimeout
	}
	if spec.TimeoutMS < 0 || timeout > MaxHTTPToolTimeout {
		return nil, fmt.Errorf("http tool %s: timeout_ms %d out of range 1..%d", decl.Name, spec.TimeoutMS, MaxHTTPToolTimeout.Milliseconds())
	}
	return &HTTPTool{decl: decl, url: spec.URL, timeout: timeout, client: httpToolClient}, nil
}

// Declaration returns the tool's declaration.
func (t *HTTPTool) Declaration() model.ToolDeclaration { return t.decl }

// Call performs the POST. Error texts are fixed strings: neither the URL
// nor the response body reaches the model through an error.
func (t *HTTPTool) Call(ctx context.Context, _ *ToolContext, args map[string]any) (any, error) {
	body, err := json.Marshal(nonNilArgs(args))
	if err != nil {
		return nil, errors.New("arguments are not JSON")
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, errors.New("bad request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errors.New("http tool timed out")
		}
		return nil, errors.New("http tool transport error")
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPToolResponseBytes+1))
	if err != nil {
		return nil, errors.New("http tool transport error")
	}
	if len(data) > MaxHTTPToolResponseBytes {
		return nil, errors.New(CodeToolResultTooLarge)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("%s %d", CodeHTTPToolStatus, resp.StatusCode)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var v any
	if json.Unmarshal(data, &v) != nil {
		return string(data), nil
	}
	return v, nil
}
