package plugins

import (
	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
)

// Hook names a Runner lifecycle point at which plugins are called. The
// strings are the contract's hook names.
type Hook string

// The fifteen hooks of the contract, in lifecycle order. HookOnError is the
// deprecated fallback: it is called for HookOnAgentError and HookOnRunError
// when a plugin does not implement the specific hook, and is never passed to
// Pipeline.Run directly.
const (
	HookOnUserMessage Hook = "on_user_message"
	HookBeforeRun     Hook = "before_run"
	HookAfterRun      Hook = "after_run"
	HookBeforeAgent   Hook = "before_agent"
	HookAfterAgent    Hook = "after_agent"
	HookBeforeModel   Hook = "before_model"
	HookAfterModel    Hook = "after_model"
	HookOnModelError  Hook = "on_model_error"
	HookBeforeTool    Hook = "before_tool"
	HookAfterTool     Hook = "after_tool"
	HookOnToolError   Hook = "on_tool_error"
	HookOnEvent       Hook = "on_event"
	HookOnAgentError  Hook = "on_agent_error"
	HookOnRunError    Hook = "on_run_error"
	HookOnError       Hook = "on_error"
)

// AllHooks lists every hook, HookOnError last.
var AllHooks = []Hook{
	HookOnUserMessage, HookBeforeRun, HookAfterRun, HookBeforeAgent, HookAfterAgent,
	HookBeforeModel, HookAfterModel, HookOnModelError, HookBeforeTool, HookAfterTool,
	HookOnToolError, HookOnEvent, HookOnAgentError, HookOnRunError, HookOnError,
}

// hookIndex is a dense index into per-plugin callback tables.
type hookIndex uint8

const (
	hkOnUserMessage hookIndex = iota
	hkBeforeRun
	hkAfterRun
	hkBeforeAgent
	hkAfterAgent
	hkBeforeModel
	hkAfterModel
	hkOnModelError
	hkBeforeTool
	hkAfterTool
	hkOnToolError
	hkOnEvent
	hkOnAgentError
	hkOnRunError
	hkOnError
	numHooks
)

// hookSpec says what a hook carries: the Go type of the value the runtime
// passes (and an amend must keep), the type a Return must carry, and whether
// the hook is a best-effort notification.
type hookSpec struct {
	hook         Hook
	notification bool
	isValue      func(any) bool // the phase value and Amend's type
	isReturn     func(any) bool // Return's type
}

func isPtr[T any](v any) bool {
	p, ok := v.(*T)
	return ok && p != nil
}

func isToolResult(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

var (
	isMessage  = isPtr[model.Message]
	isRequest  = isPtr[model.Request]
	isResponse = isPtr[model.Response]
	isEvent    = isPtr[session.Event]
	isTurn     = isPtr[Turn]
	isFailure  = isPtr[Failure]
	isToolInv  = isPtr[ToolInvocation]
)

var hookSpecs = [numHooks]hookSpec{
	hkOnUserMessage: {HookOnUserMessage, false, isMessage, isMessage},
	hkBeforeRun:     {HookBeforeRun, false, isTurn, isMessage},
	hkAfterRun:      {HookAfterRun, true, isTurn, isMessage},
	hkBeforeAgent:   {HookBeforeAgent, false, isTurn, isMessage},
	hkAfterAgent:    {HookAfterAgent, false, isTurn, isMessage},
	hkBeforeModel:   {HookBeforeModel, false, isRequest, isResponse},
	hkAfterModel:    {HookAfterModel, false, isResponse, isResponse},
	hkOnModelError:  {HookOnModelError, false, isFailure, isResponse},
	hkBeforeTool:    {HookBeforeTool, false, isToolInv, isToolResult},
	hkAfterTool:     {HookAfterTool, false, isToolResult, isToolResult},
	hkOnToolError:   {HookOnToolError, false, isFailure, isToolResult},
	hkOnEvent:       {HookOnEvent, false, isEvent, isEvent},
	hkOnAgentError:  {HookOnAgentError, true, isFailure, isFailure},
	hkOnRunError:    {HookOnRunError, true, isFailure, isFailure},
	hkOnError:       {HookOnError, true, isFailure, isFailure},
}

// lookupHook maps a hook name to its index.
func lookupHook(h Hook) (hookIndex, bool) {
	switch h {
	case HookOnUserMessage:
		return hkOnUserMessage, true
	case HookBeforeRun:
		return hkBeforeRun, true
	case HookAfterRun:
		return hkAfterRun, true
	case HookBeforeAgent:
		return hkBeforeAgent, true
	case HookAfterAgent:
		return hkAfterAgent, true
	case HookBeforeModel:
		return hkBeforeModel, true
	case HookAfterModel:
		return hkAfterModel, true
	case HookOnModelError:
		return hkOnModelError, true
	case HookBeforeTool:
		return hkBeforeTool, true
	case HookAfterTool:
		return hkAfterTool, true
	case HookOnToolError:
		return hkOnToolError, true
	case HookOnEvent:
		return hkOnEvent, true
	case HookOnAgentError:
		return hkOnAgentError, true
	case HookOnRunError:
		return hkOnRunError, true
	case HookOnError:
		return hkOnError, true
	}
	return 0, false
}

// IsNotification reports whether h is a best-effort notification hook
// (after_run, on_agent_error, on_run_error and the legacy on_error): plugin
// failures and intervention results there never change or stop anything.
func (h Hook) IsNotification() bool {
	i, ok := lookupHook(h)
	return ok && hookSpecs[i].notification
}
