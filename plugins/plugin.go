package plugins

import (
	"context"
	"errors"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
)

// Plugin is what a Descriptor runs: anything that can say which hooks it
// implements. A Hooks value is itself a Plugin, so the simplest plugin is a
// Hooks literal with the fields it needs.
type Plugin interface {
	// Hooks returns the plugin's callbacks. It is called once, by Compile;
	// nil fields are hooks the plugin does not implement (traced "skipped").
	Hooks() Hooks
}

// HookFunc is one typed callback. ctx carries the hook's deadline and is
// cancelled when the caller goes away; cc is a secret-pruned copy of the call
// context; value is a private deep copy of the phase value, so mutating it in
// place has no effect: return Amend or Return instead. cfg is the
// descriptor's Config, shared by every call and read-only.
//
// A non-nil error is a plugin failure (traced "exception") handled by the
// descriptor's failure policy, exactly like a panic.
type HookFunc[T any] func(ctx context.Context, cc CallContext, value T, cfg map[string]any) (Outcome, error)

// Hooks holds a plugin's callbacks, one typed field per hook. The comment on
// each field gives the value's type, what an Amend must carry (always the
// value's type) and what a Return must carry.
type Hooks struct {
	// OnUserMessage: the user message; Return replaces it and ends the phase.
	OnUserMessage HookFunc[*model.Message]
	// BeforeRun: Turn{Agent, Input}; Return *model.Message is the run's
	// answer and the run is skipped.
	BeforeRun HookFunc[*Turn]
	// AfterRun (notification): Turn{Agent, Input, Output}.
	AfterRun HookFunc[*Turn]
	// BeforeAgent: Turn{Agent, Input}; Return *model.Message is the agent's
	// response and the agent is skipped.
	BeforeAgent HookFunc[*Turn]
	// AfterAgent: Turn{Agent, Input, Output}; Return *model.Message replaces
	// the agent's response.
	AfterAgent HookFunc[*Turn]
	// BeforeModel: the request; Amend changes what the provider receives,
	// Return *model.Response skips the provider (cache pattern).
	BeforeModel HookFunc[*model.Request]
	// AfterModel: the response; Amend or Return replaces it.
	AfterModel HookFunc[*model.Response]
	// OnModelError: the structural failure; Return *model.Response
	// suppresses the error.
	OnModelError HookFunc[*Failure]
	// BeforeTool: the call; Amend changes the arguments (re-validated by the
	// runtime), Return map[string]any is the tool result and the tool is not
	// executed.
	BeforeTool HookFunc[*ToolInvocation]
	// AfterTool: the tool result; Amend or Return replaces it.
	AfterTool HookFunc[map[string]any]
	// OnToolError: the structural failure; Return map[string]any becomes the
	// tool result.
	OnToolError HookFunc[*Failure]
	// OnEvent: the event before persistence; Amend or Return replaces it,
	// subject to CheckEventReplacement.
	OnEvent HookFunc[*session.Event]
	// OnAgentError (notification): the agent's structural failure.
	OnAgentError HookFunc[*Failure]
	// OnRunError (notification): the run's structural failure.
	OnRunError HookFunc[*Failure]
	// OnError (deprecated notification fallback) is called for on_agent_error
	// and on_run_error when the specific field is nil.
	OnError HookFunc[*Failure]
}

// Hooks returns h, so a Hooks literal can be used as a Plugin.
func (h Hooks) Hooks() Hooks { return h }

// AnyHookFunc is an untyped callback: hook says which phase is running and
// value has that phase's type (see Hooks).
type AnyHookFunc func(ctx context.Context, hook Hook, cc CallContext, value any, cfg map[string]any) (Outcome, error)

// Dispatch returns Hooks whose listed fields (all fifteen when hooks is empty)
// call f. It is how generic plugins (loggers, the stateful adapter) cover many
// hooks with one function.
func Dispatch(f AnyHookFunc, hooks ...Hook) Hooks {
	if len(hooks) == 0 {
		hooks = AllHooks
	}
	var h Hooks
	for _, hook := range hooks {
		i, ok := lookupHook(hook)
		if !ok {
			continue
		}
		h.set(i, func(ctx context.Context, cc *CallContext, v any, cfg map[string]any) (Outcome, error) {
			return f(ctx, hook, *cc, v, cfg)
		})
	}
	return h
}

// callFunc is the untyped form every callback is compiled to. It takes the
// call context by pointer: hook goroutines start with small stacks, and
// copying the context through every frame made most of them grow.
type callFunc func(ctx context.Context, cc *CallContext, v any, cfg map[string]any) (Outcome, error)

func untyped[T any](f HookFunc[T]) callFunc {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, cc *CallContext, v any, cfg map[string]any) (Outcome, error) {
		return f(ctx, *cc, v.(T), cfg)
	}
}

func typed[T any](f callFunc) HookFunc[T] {
	return func(ctx context.Context, cc CallContext, v T, cfg map[string]any) (Outcome, error) {
		return f(ctx, &cc, v, cfg)
	}
}

// table compiles h into a dense callback table.
func (h Hooks) table() [numHooks]callFunc {
	return [numHooks]callFunc{
		hkOnUserMessage: untyped(h.OnUserMessage),
		hkBeforeRun:     untyped(h.BeforeRun),
		hkAfterRun:      untyped(h.AfterRun),
		hkBeforeAgent:   untyped(h.BeforeAgent),
		hkAfterAgent:    untyped(h.AfterAgent),
		hkBeforeModel:   untyped(h.BeforeModel),
		hkAfterModel:    untyped(h.AfterModel),
		hkOnModelError:  untyped(h.OnModelError),
		hkBeforeTool:    untyped(h.BeforeTool),
		hkAfterTool:     untyped(h.AfterTool),
		hkOnToolError:   untyped(h.OnToolError),
		hkOnEvent:       untyped(h.OnEvent),
		hkOnAgentError:  untyped(h.OnAgentError),
		hkOnRunError:    untyped(h.OnRunError),
		hkOnError:       untyped(h.OnError),
	}
}

func (h *Hooks) set(i hookIndex, f callFunc) {
	switch i {
	case hkOnUserMessage:
		h.OnUserMessage = typed[*model.Message](f)
	case hkBeforeRun:
		h.BeforeRun = typed[*Turn](f)
	case hkAfterRun:
		h.AfterRun = typed[*Turn](f)
	case hkBeforeAgent:
		h.BeforeAgent = typed[*Turn](f)
	case hkAfterAgent:
		h.AfterAgent = typed[*Turn](f)
	case hkBeforeModel:
		h.BeforeModel = typed[*model.Request](f)
	case hkAfterModel:
		h.AfterModel = typed[*model.Response](f)
	case hkOnModelError:
		h.OnModelError = typed[*Failure](f)
	case hkBeforeTool:
		h.BeforeTool = typed[*ToolInvocation](f)
	case hkAfterTool:
		h.AfterTool = typed[map[string]any](f)
	case hkOnToolError:
		h.OnToolError = typed[*Failure](f)
	case hkOnEvent:
		h.OnEvent = typed[*session.Event](f)
	case hkOnAgentError:
		h.OnAgentError = typed[*Failure](f)
	case hkOnRunError:
		h.OnRunError = typed[*Failure](f)
	case hkOnError:
		h.OnError = typed[*Failure](f)
	}
}

// Turn is the value of the run and agent hooks: which agent, the input that
// started it and, on the after hooks, its output.
type Turn struct {
	Agent  string         `json:"agent"`
	Input  *model.Message `json:"input,omitempty"`
	Output *model.Message `json:"output,omitempty"`
}

// ToolInvocation is the value of before_tool: the call about to run.
type ToolInvocation struct {
	Call model.ToolCall `json:"call"`
}

// Failure is the structural, secret-free description of an error handed to
// the error hooks (on_model_error, on_tool_error, on_agent_error,
// on_run_error). It never carries a raw provider body or a credential.
type Failure struct {
	Component string `json:"component"`           // "model", "tool", "agent" or "run"
	Operation string `json:"operation,omitempty"` // model, tool or agent name
	Class     string `json:"class"`               // e.g. model.ErrorClass, "tool_error"
	Reason    string `json:"reason,omitempty"`    // a stable code, e.g. "script_exhausted"
	Status    int    `json:"status,omitempty"`    // HTTP status, if any
	Retryable bool   `json:"retryable"`
}

// FailureOf builds a Failure from err without echoing its text: a
// *model.Error contributes its class, code, status and retryability, a
// *Error its code and reason, anything else only the class "error" (or
// "timeout"/"cancelled" for context errors).
func FailureOf(component, operation string, err error) *Failure {
	f := &Failure{Component: component, Operation: operation, Class: "error"}
	var me *model.Error
	var pe *Error
	switch {
	case errors.As(err, &me):
		f.Class, f.Reason, f.Status, f.Retryable = string(me.Class), me.Code, me.Status, me.Retryable
	case errors.As(err, &pe):
		f.Class, f.Reason = pe.Code, pe.Reason
	case errors.Is(err, context.DeadlineExceeded):
		f.Class, f.Retryable = "timeout", true
	case errors.Is(err, context.Canceled):
		f.Class = "cancelled"
	}
	return f
}

// outcomeKind says what a plugin asked for.
type outcomeKind uint8

const (
	kindObserve outcomeKind = iota
	kindAmend
	kindReturn
	kindReplace
	kindHalt
)

// Outcome is what a hook returns. The zero Outcome is Observe. Build one with
// Observe, Continue, OK, Amend, Return, Replace or Halt.
type Outcome struct {
	kind   outcomeKind
	value  any
	reason string
}

// Observe keeps the current value and continues (trace "observed").
func Observe() Outcome { return Outcome{} }

// Continue is Observe.
func Continue() Outcome { return Outcome{} }

// OK is Observe.
func OK() Outcome { return Outcome{} }

// Amend replaces the phase value with v and continues with the next plugin,
// the local callback and the operation (intervene mode only). v must have the
// phase value's type.
func Amend(v any) Outcome { return Outcome{kind: kindAmend, value: v} }

// Return ends the phase now with v: remaining plugins, the local callback and
// the operation are skipped (intervene mode only). v must have the phase's
// return type (see Hooks).
func Return(v any) Outcome { return Outcome{kind: kindReturn, value: v} }

// Replace is the legacy alias of Return: an early exit, not an amendment.
func Replace(v any) Outcome { return Outcome{kind: kindReplace, value: v} }

// Halt stops the run with a typed plugin_halted error (intervene mode only).
// The reason is secret-redacted and bounded before anyone sees it.
func Halt(reason string) Outcome { return Outcome{kind: kindHalt, reason: reason} }

// IsObserve reports whether o keeps the current value.
func (o Outcome) IsObserve() bool { return o.kind == kindObserve }

// Kind names what o asks for: "observe", "amend", "return", "replace" or
// "halt".
func (o Outcome) Kind() string {
	switch o.kind {
	case kindAmend:
		return "amend"
	case kindReturn:
		return "return"
	case kindReplace:
		return "replace"
	case kindHalt:
		return "halt"
	}
	return "observe"
}

// Value is the value of an Amend, Return or Replace.
func (o Outcome) Value() any { return o.value }

// Reason is the reason of a Halt, as the plugin gave it (the pipeline
// redacts it before anyone else sees it).
func (o Outcome) Reason() string { return o.reason }
