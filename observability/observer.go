package observability

import (
	"context"
	"time"
)

// Kind is the kind of operation the runtime observes.
type Kind string

// Observed operation kinds: the real boundaries of a run.
const (
	KindRun      Kind = "run"      // one Runner invocation
	KindAgent    Kind = "agent"    // one agent's turn (gen_ai.invoke_agent)
	KindModel    Kind = "model"    // one model call (gen_ai.generate_content)
	KindTool     Kind = "tool"     // one tool execution (gen_ai.execute_tool)
	KindWorkflow Kind = "workflow" // a workflow agent (sequential, parallel)
)

// Observation describes an operation when it starts. Ids that are empty are
// inherited from the enclosing observation carried in the context.
type Observation struct {
	Kind         Kind
	RunID        string
	InvocationID string
	SessionID    string
	Agent        string
	Provider     string // gen_ai.provider.name, model calls only
	Model        string // requested model, model calls only
	Tool         string // tool name, tool calls only
	CallID       string // tool call id, tool calls only
	WorkflowID   string
	WorkflowKind string // "sequential" | "parallel"
	NodeID       string
	// Start is the wall-clock start; zero means now. Durations are measured
	// with the monotonic clock regardless.
	Start time.Time
	// Stream marks a streaming model call (the "stream" metric label).
	Stream bool
	// Content is the operation's input (prompt, tool arguments). It is
	// only ever captured into a v1 envelope, secret-pruned, when content
	// capture is enabled; it never becomes a span attribute.
	Content any
	// Eval, on a span with no eval ids from its parent, names the eval
	// job, case and sample (KindEval: the sample's root span).
	Eval *EvalIDs
}

// Usage counts tokens of a model call.
type Usage struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64 // not in the pinned semconv mapping: never emitted
	ReasoningTokens     int64
}

// Outcome describes how an observed operation ended. A nil Err is success.
type Outcome struct {
	Err error
	// ErrorType is the stable error tag (error.type); derived from Err when
	// empty ("unknown" for an untyped error).
	ErrorType     string
	Usage         *Usage
	FinishReasons []string
	ResponseModel string
	ResponseID    string
	// Content is the operation's output (response, tool result); captured
	// like Observation.Content, never an attribute.
	Content any
}

// Observer turns the runtime's observation points into signals. Start
// returns a context that carries the new span (so children correlate) and a
// function that ends it exactly once.
type Observer interface {
	Start(ctx context.Context, o Observation) (context.Context, func(Outcome))
}

// Nop is the Observer that records nothing.
var Nop Observer = nopObserver{}

type nopObserver struct{}

func (nopObserver) Start(ctx context.Context, _ Observation) (context.Context, func(Outcome)) {
	return ctx, func(Outcome) {}
}
