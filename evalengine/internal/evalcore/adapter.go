package evalcore

import (
	"context"
)

// Adapter connects the engine to the system under evaluation. The engine
// calls NewSession once per (case, sample), runs the case's turns through
// the Session in order, and closes it, so every sample starts from a fresh
// conversation (the default agent adapter builds a fresh agent, Runner and
// session here).
//
// An adapter must be safe for concurrent NewSession calls; one Session is
// used by one goroutine at a time. Every method must return promptly once
// ctx is done: the engine stops a sample at its deadline by cancelling ctx
// and records it as "timeout" (or "cancelled"), but it never abandons a
// goroutine, so an adapter that ignores ctx delays the run.
type Adapter interface {
	NewSession(ctx context.Context, info SampleInfo) (Session, error)
}

// Session is one sample's conversation.
type Session interface {
	// Turn runs one user turn and returns what the system answered.
	Turn(ctx context.Context, in TurnInput) (TurnOutput, error)
	// Close tears the session down. Its error turns the sample into an
	// error (tag adapter_terminate_failed unless it is an AdapterError).
	Close() error
}

// SampleInfo identifies the sample a session is for. Indices are 0-based.
type SampleInfo struct {
	SetID       string
	SetVersion  string
	Case        *Case // read-only
	CaseIndex   int
	SampleID    string
	SampleIndex int
}

// TurnInput is one turn handed to a Session. Indices are 0-based.
type TurnInput struct {
	CaseID      string
	CaseIndex   int
	SampleID    string
	SampleIndex int
	TurnID      string
	TurnIndex   int
	Input       any   // the turn's input, any JSON value (usually a string)
	Turn        *Turn // read-only; the full turn, expectation included
}

// TurnOutput is what a Session answered for one turn. It is read-only once
// returned, for the Session and for metrics alike: the sample's result
// keeps its values (events, tool args and results, metadata values) as
// they are wherever secret pruning leaves them unchanged, rather than
// copying them.
type TurnOutput struct {
	// Output is the final response, any JSON value (usually the text).
	Output any
	// Trajectory lists the tool calls and responses of the turn in order.
	Trajectory []ToolStep
	// Events are the raw events (JSON values), kept when capture_events.
	Events []any
	// Metadata is adapter metadata (JSON object); the engine adds
	// runtime_latency_ms and prunes secrets.
	Metadata map[string]any
}

// Tool step kinds.
const (
	KindToolCall     = "tool_call"
	KindToolResponse = "tool_response"
)

// ToolStep is one entry of a trajectory.
type ToolStep struct {
	Kind   string // KindToolCall or KindToolResponse; "" counts as a call
	Tool   string
	CallID string // "" when unknown
	Args   any    // for calls; usually map[string]any
	Result any    // for responses
}

// TrajectoryFromEvents extracts tool steps from events in the contract's
// shape (CONTRACTS §5.2): an event whose content (or the event itself) is
// {type:"tool_calls", calls:[{name, args, call_id}]} or {type:
// "tool_response", name, result, call_id}. Other events are skipped; a
// malformed tool event is an error (tag invalid_adapter_events).
func TrajectoryFromEvents(events []any) ([]ToolStep, error) {
	var steps []ToolStep
	bad := &AdapterError{Tag: TagInvalidAdapterEvents}
	for _, ev := range events {
		m, ok := ev.(map[string]any)
		if !ok {
			return nil, bad
		}
		content := m
		if c, ok := m["content"].(map[string]any); ok {
			content = c
		}
		switch content["type"] {
		case "tool_calls":
			calls, ok := content["calls"].([]any)
			if !ok {
				return nil, bad
			}
			for _, cv := range calls {
				c, ok := cv.(map[string]any)
				if !ok {
					return nil, bad
				}
				name, ok := c["name"].(string)
				if !ok || name == "" {
					return nil, bad
				}
				id, _ := c["call_id"].(string)
				args, present := c["args"]
				if !present {
					args = map[string]any{}
				}
				steps = append(steps, ToolStep{Kind: KindToolCall, Tool: name, CallID: id, Args: args})
			}
		case "tool_response":
			name, ok := content["name"].(string)
			if !ok || name == "" {
				return nil, bad
			}
			id, _ := content["call_id"].(string)
			steps = append(steps, ToolStep{Kind: KindToolResponse, Tool: name, CallID: id, Result: content["result"]})
		}
	}
	return steps, nil
}
