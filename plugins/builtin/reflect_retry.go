package builtin

import (
	"context"

	"github.com/fadcedab/adk/plugins"
)

// DefaultRetryGuidance is reflect_retry's guidance when the config has none.
const DefaultRetryGuidance = "The tool call failed. Reflect on the error, correct the arguments, and call the tool again."

// ReflectRetry turns a tool failure into model-visible retry guidance
// (on_tool_error, return). Config: enabled (default true), max_attempts
// 1..16 (default 1), guidance 1..4096 bytes.
//
// While CallContext.RetryAttempt < max_attempts it returns the tool result
// {"adk_retry": {"retryable": true, "attempt", "max_attempts", "guidance",
// "error": {"component", "operation", "class", "reason"}}} — only the
// Failure's scalar fields, never a raw error body — where attempt is
// RetryAttempt+1 (the retry this guidance asks for). Afterwards it observes,
// so the error stands. It never re-runs a tool itself.
type ReflectRetry struct {
	enabled     bool
	maxAttempts int
	guidance    string
}

// NewReflectRetry validates config and returns the plugin.
func NewReflectRetry(config map[string]any) (*ReflectRetry, error) {
	c := newConfig(ReflectRetryName, config, "enabled", "max_attempts", "guidance")
	r := &ReflectRetry{
		enabled:     c.boolean("enabled", true),
		maxAttempts: c.integer("max_attempts", 1, 1, 16),
		guidance:    c.str("guidance", DefaultRetryGuidance, 1, 4096),
	}
	return r, c.err
}

// Hooks implements plugins.Plugin.
func (r *ReflectRetry) Hooks() plugins.Hooks {
	return plugins.Hooks{OnToolError: r.onToolError}
}

func (r *ReflectRetry) onToolError(_ context.Context, cc plugins.CallContext, f *plugins.Failure, _ map[string]any) (plugins.Outcome, error) {
	if !r.enabled || cc.RetryAttempt >= r.maxAttempts {
		return plugins.Observe(), nil
	}
	return plugins.Return(map[string]any{"adk_retry": map[string]any{
		"retryable":    true,
		"attempt":      cc.RetryAttempt + 1,
		"max_attempts": r.maxAttempts,
		"guidance":     r.guidance,
		"error": map[string]any{
			"component": f.Component,
			"operation": f.Operation,
			"class":     f.Class,
			"reason":    f.Reason,
		},
	}}), nil
}
