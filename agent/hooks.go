package agent

import (
	"context"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/plugins"
)

// runHook runs a Runner-global hook. With no plugins it costs nothing: the
// value passes through as Continue.
func (ic *invocation) runHook(ctx context.Context, hook plugins.Hook, cc plugins.CallContext, value any) plugins.Result {
	p := ic.r.pipeline
	if p == nil || p.Len() == 0 {
		return plugins.Result{Disposition: plugins.DispositionContinue, Value: value}
	}
	lo := ic.r.lifecycle
	if lo == nil {
		return p.Run(ctx, hook, cc, value)
	}
	start := time.Now()
	res := p.Run(ctx, hook, cc, value)
	lo.Lifecycle(ctx, observability.Lifecycle{
		Hook:        string(hook),
		Outcome:     lifecycleOutcome(res.Disposition),
		Duration:    time.Since(start),
		PluginTrace: lifecycleTrace(res.Trace),
	})
	return res
}

// turnHook runs a hook whose value is the turn (before/after run and
// agent): the agent's name, the invocation's input and output (nil
// before). The Turn is only made when a plugin will see it.
func (ic *invocation) turnHook(ctx context.Context, hook plugins.Hook, cc plugins.CallContext, agentName string, output *model.Message) plugins.Result {
	if p := ic.r.pipeline; p == nil || p.Len() == 0 {
		return plugins.Result{Disposition: plugins.DispositionContinue}
	}
	return ic.runHook(ctx, hook, cc, &plugins.Turn{Agent: agentName, Input: ic.input, Output: output})
}

// lifecycleOutcome maps a pipeline disposition to the lifecycle envelope's
// outcome word (CONTRACTS §1.4).
func lifecycleOutcome(d plugins.Disposition) string {
	switch d {
	case plugins.DispositionAmend:
		return "amended"
	case plugins.DispositionReturn:
		return "returned"
	case plugins.DispositionHalt:
		return "halt"
	case plugins.DispositionError:
		return "error"
	}
	return "continue"
}

func lifecycleTrace(tr []plugins.TraceEntry) []observability.PluginTraceEntry {
	out := make([]observability.PluginTraceEntry, len(tr))
	for i, e := range tr {
		out[i] = observability.PluginTraceEntry{PluginID: e.PluginID, Hook: string(e.Hook), Mode: string(e.Mode), Outcome: string(e.Outcome)}
	}
	return out
}

// notify runs a notification hook; its result never changes anything.
func (ic *invocation) notify(ctx context.Context, hook plugins.Hook, cc plugins.CallContext, value any) {
	_ = ic.runHook(ctx, hook, cc, value)
}

// hookErr turns a Halt or Error disposition into the runtime error: the
// plugins *Error (plugin_halted, plugin_failed, cancelled) wrapped with the
// agent's name.
func hookErr(agentName string, res plugins.Result) error {
	if res.Err == nil {
		return &Error{Code: CodePluginFailed, Agent: agentName, Detail: string(res.Disposition)}
	}
	code := CodePluginFailed
	if res.Disposition == plugins.DispositionHalt {
		code = CodePluginHalted
	}
	return &Error{Code: code, Agent: agentName, Err: res.Err}
}

// invalidValue is the error for a plugin value of the wrong type; the
// pipeline checks types too, so this only guards the runtime's own casts.
func invalidValue(agentName string, hook plugins.Hook) error {
	return &Error{Code: CodeInvalidPluginValue, Agent: agentName, Detail: string(hook)}
}

// toolResultMap is the plugin-facing form of a tool result (the value of
// after_tool and the return type of before_tool/on_tool_error):
// {"result": R} or {"error": "message"}.
func toolResultMap(r *model.ToolResult) map[string]any {
	if r.Error != "" {
		return map[string]any{"error": r.Error}
	}
	return map[string]any{"result": r.Result}
}

// applyToolResultMap reads a plugin-supplied tool result back: a map that
// is exactly {"result": R} gives R, a map with only a string "error" gives a
// tool error, and any other map is itself the result (as reflect_retry's
// {"adk_retry": ...} guidance is).
func applyToolResultMap(r *model.ToolResult, m map[string]any) {
	r.Result, r.Error = nil, ""
	if len(m) == 1 {
		if v, ok := m["result"]; ok {
			r.Result = v
			return
		}
		if e, ok := m["error"].(string); ok && e != "" {
			r.Error = e
			return
		}
	}
	r.Result = m
}

// checkEventReplacement enforces what an on_event amendment may change
// (plugins.CheckEventReplacement: identity fields, content kind, and no
// rewrite of schema-validated final content).
func checkEventReplacement(orig, repl *session.Event, schemaLocked bool) error {
	if err := plugins.CheckEventReplacement(orig, repl, schemaLocked); err != nil {
		return &Error{Code: CodeInvalidEventIdentity, Agent: orig.Author, Err: err}
	}
	return nil
}
