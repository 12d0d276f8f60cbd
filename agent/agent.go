package agent

import (
	"context"

	"github.com/fadcedab/adk/agent/model"
)

// Agent is a node of an agent tree: an LLM agent or a workflow agent
// (sequential, parallel). The set is closed: only this package implements
// Agent, so the Runner can give every kind the same lifecycle (plugins,
// callbacks, observations).
type Agent interface {
	// Name is unique within the tree; events are authored by it.
	Name() string
	// Description tells a parent LLM agent what the agent is for.
	Description() string
	// SubAgents are the agent's children (delegation targets of an LLM
	// agent, nodes of a workflow).
	SubAgents() []Agent

	kind() string
	callbacks() *Callbacks
	// body runs the agent's own logic and returns its output message.
	body(ctx context.Context, ic *invocation) (*model.Message, error)
}

// CallbackContext identifies the call an agent-local callback runs in.
type CallbackContext struct {
	RunID        string
	InvocationID string
	SessionID    string
	UserID       string
	Agent        string
}

// Callbacks are an agent's local callbacks: plain Go functions run after
// the Runner's global plugins for the same phase (CONTRACTS §1.4). A nil
// field is skipped. An error from a callback fails the agent with
// callback_failed.
type Callbacks struct {
	// BeforeAgent may return a message: it becomes the agent's response and
	// the agent's own logic is skipped.
	BeforeAgent func(ctx context.Context, cc *CallbackContext) (*model.Message, error)
	// AfterAgent may return a message: it replaces the agent's response (a
	// new final event carries it).
	AfterAgent func(ctx context.Context, cc *CallbackContext, output *model.Message) (*model.Message, error)
	// BeforeModel may modify req in place (the provider receives the
	// change) or return a response, which skips the provider.
	BeforeModel func(ctx context.Context, cc *CallbackContext, req *model.Request) (*model.Response, error)
	// AfterModel may return a response that replaces resp.
	AfterModel func(ctx context.Context, cc *CallbackContext, resp *model.Response) (*model.Response, error)
	// BeforeTool may modify call.Args in place (re-validated before the tool
	// runs) or return a result, which skips the tool.
	BeforeTool func(ctx context.Context, cc *CallbackContext, call *model.ToolCall) (*model.ToolResult, error)
	// AfterTool may return a result that replaces result.
	AfterTool func(ctx context.Context, cc *CallbackContext, call *model.ToolCall, result *model.ToolResult) (*model.ToolResult, error)
}

// base holds what every agent kind has.
type base struct {
	name        string
	description string
	subAgents   []Agent
	cb          Callbacks
}

func (b *base) Name() string          { return b.name }
func (b *base) Description() string   { return b.description }
func (b *base) SubAgents() []Agent    { return b.subAgents }
func (b *base) callbacks() *Callbacks { return &b.cb }
