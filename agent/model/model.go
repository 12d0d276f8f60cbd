package model

import (
	"context"
	"fmt"
	"time"
)

// Role is the author role of a message.
type Role string

// Message roles.
const (
	RoleSystem Role = "system"
	RoleUser   Role = "user"
	RoleModel  Role = "model"
	RoleTool   Role = "tool"
)

// Message is one entry of a conversation: a role and its parts.
type Message struct {
	Role  Role   `json:"role"`
	Parts []Part `json:"parts"`
}

// Text returns the concatenation of the message's text parts.
func (m *Message) Text() string {
	if m == nil {
		return ""
	}
	var s string
	for _, p := range m.Parts {
		s += p.Text
	}
	return s
}

// ToolCalls returns the tool calls the message requests, in order.
func (m *Message) ToolCalls() []ToolCall {
	if m == nil {
		return nil
	}
	var calls []ToolCall
	for _, p := range m.Parts {
		if p.ToolCall != nil {
			calls = append(calls, *p.ToolCall)
		}
	}
	return calls
}

// Part is exactly one of text, a tool call or a tool result.
type Part struct {
	Text       string      `json:"text,omitempty"`
	ToolCall   *ToolCall   `json:"tool_call,omitempty"`
	ToolResult *ToolResult `json:"tool_result,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID   string         `json:"id"`
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// ToolResult is a tool's answer to a ToolCall. Error is set when the tool
// failed; the model sees it as a value, never as a crash.
type ToolResult struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Result any    `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// ToolDeclaration describes a tool to the model: its name, purpose and JSON
// Schema parameters.
type ToolDeclaration struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
}

// Request is one model call.
type Request struct {
	Model    string            `json:"model,omitempty"`
	Messages []Message         `json:"messages"`
	Tools    []ToolDeclaration `json:"tools,omitempty"`
	// OutputSchema, when set, asks for structured JSON output matching it.
	OutputSchema    map[string]any `json:"output_schema,omitempty"`
	Temperature     *float64       `json:"temperature,omitempty"`
	MaxOutputTokens int            `json:"max_output_tokens,omitempty"`
}

// Usage counts tokens of one model call.
type Usage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_input_tokens,omitempty"`
	CacheCreationTokens int64 `json:"cache_creation_input_tokens,omitempty"`
}

// Response is a model's answer: a message with text and/or tool calls.
type Response struct {
	Message      Message `json:"message"`
	Usage        Usage   `json:"usage"`
	FinishReason string  `json:"finish_reason,omitempty"`
	Model        string  `json:"model,omitempty"`
	ID           string  `json:"id,omitempty"`
}

// Provider is a model client.
type Provider interface {
	// Name is the provider's name as used in semantic conventions
	// (gen_ai.provider.name), e.g. "openai", "gcp.gemini", "scripted".
	Name() string
	// Generate performs one model call. Errors are *Error values.
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// ErrorClass classifies a provider failure without echoing its body.
type ErrorClass string

// Provider error classes.
const (
	ClassTimeout      ErrorClass = "timeout"
	ClassCancelled    ErrorClass = "cancelled"
	ClassTransport    ErrorClass = "transport"
	ClassRateLimited  ErrorClass = "rate_limited"
	ClassServer       ErrorClass = "server_error"
	ClassClient       ErrorClass = "client_error"
	ClassAuth         ErrorClass = "auth_error"
	ClassBadResponse  ErrorClass = "invalid_response"
	ClassTooLarge     ErrorClass = "response_too_large"
	ClassConfig       ErrorClass = "invalid_config"
	ClassScript       ErrorClass = "script_error"
	ClassOutputSchema ErrorClass = "output_schema_violation"
)

// Error is the structural error every provider returns: a class, the HTTP
// status if any, and whether a retry may succeed. It never carries a raw
// response body or a credential.
type Error struct {
	Provider  string     `json:"provider"`
	Class     ErrorClass `json:"class"`
	Code      string     `json:"code,omitempty"` // stable detail, e.g. "script_exhausted"
	Status    int        `json:"status,omitempty"`
	Retryable bool       `json:"retryable"`
	// RetryAfter is the server's Retry-After on a 429 or 5xx (0: none).
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string {
	s := fmt.Sprintf("model %s: %s", e.Provider, e.Class)
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Status != 0 {
		s += fmt.Sprintf(" status %d", e.Status)
	}
	return s
}
