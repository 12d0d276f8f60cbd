package agent

import (
	"context"

	"errors"
	"fmt"
	"github.com/fadcedab/adk/agent/model"
)

// Stable error codes of the runtime. They are strings on the wire and in
// observations (error.type).
const (
	CodeMaxStepsExceeded       = "max_steps_exceeded"
	CodeOutputSchemaViolation  = "output_schema_violation"
	CodeInvalidEventIdentity   = "invalid_event_replacement_identity"
	CodePluginHalted           = "plugin_halted"
	CodePluginFailed           = "plugin_failed"
	CodeInvalidPluginValue     = "invalid_plugin_value"
	CodeCallbackFailed         = "callback_failed"
	CodeSessionNotFound        = "session_not_found"
	CodeInvalidAgentConfig     = "invalid_agent_config"
	CodeInvalidRunRequest      = "invalid_run_request"
	CodeUnknownAgent           = "unknown_agent"
	CodeInvalidToolArgs        = "invalid_tool_args"
	CodeUnknownTool            = "unknown_tool"
	CodeToolFailed             = "tool_failed"
	CodeModelFailed            = "model_failed"
	CodeRunCancelled           = "cancelled"
	CodeConfigTooLarge         = "agent_config_too_large"
	CodeUnsupportedSchemaVer   = "unsupported_schema_version"
	CodeWorkflowBranchFailed   = "workflow_branch_failed"
	CodeToolResultTooLarge     = "tool_result_too_large"
	CodeHTTPToolStatus         = "http_tool_status"
	CodeInvalidOutputSchemaCfg = "invalid_output_schema"
)

// Error is the runtime's structured error: a stable Code, the agent (and
// tool, for tool errors) it concerns, a short secret-free detail, and the
// cause when there is one (a *model.Error for model failures, a plugin
// error for plugin failures).
//
// It is not internal/coded's Error: callers read Agent and Tool by name,
// the message puts the agent before the code and prints the cause, and a
// sentinel matches only when bare. A generic type cannot hold the fields,
// and a formatting hook would be as long as Error() below, so the type
// stays its own. Its codes overlap plugins' (plugin_failed, cancelled), yet
// neither package's sentinel matches the other's error: distinct types.
type Error struct {
	Code   string
	Agent  string
	Tool   string
	Detail string
	Err    error
}

func (e *Error) Error() string {
	s := "agent"
	if e.Agent != "" {
		s += " " + e.Agent
	}
	s += ": " + e.Code
	if e.Tool != "" {
		s += " (tool " + e.Tool + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error with the same Code, so the sentinels below work
// with errors.Is.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Agent == "" && t.Tool == "" && t.Detail == "" && t.Err == nil
}

// ErrorType returns the stable error.type of an error: the Code of an
// *Error, the class of a model error, else "unknown".
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		// A model failure reports the provider's class: it is more useful.
		if e.Code == CodeModelFailed && e.Err != nil {
			if t := errorTypeOf(e.Err); t != "" {
				return t
			}
		}
		return e.Code
	}
	if t := errorTypeOf(err); t != "" {
		return t
	}
	return "unknown"
}

// Sentinels for errors.Is; each matches any *Error with its Code.
var (
	// ErrMaxStepsExceeded: the LLM loop made max_steps model calls without
	// reaching a final answer.
	ErrMaxStepsExceeded = &Error{Code: CodeMaxStepsExceeded}
	// ErrOutputSchemaViolation: the final response is not JSON matching the
	// agent's output_schema.
	ErrOutputSchemaViolation = &Error{Code: CodeOutputSchemaViolation}
	// ErrInvalidEventIdentity: an on_event amendment changed identity
	// fields or rewrote schema-validated final content.
	ErrInvalidEventIdentity = &Error{Code: CodeInvalidEventIdentity}
	// ErrPluginHalted: a plugin halted the phase.
	ErrPluginHalted = &Error{Code: CodePluginHalted}
	// ErrPluginFailed: a closed-policy plugin failed.
	ErrPluginFailed = &Error{Code: CodePluginFailed}
	// ErrSessionNotFound: the run names a session the service does not hold.
	ErrSessionNotFound = &Error{Code: CodeSessionNotFound}
	// ErrInvalidAgentConfig: AGENT.json (or an agent built in Go) is invalid.
	ErrInvalidAgentConfig = &Error{Code: CodeInvalidAgentConfig}
	// ErrModelFailed: the provider failed and no plugin recovered; the cause
	// is the *model.Error.
	ErrModelFailed = &Error{Code: CodeModelFailed}
)

func configErr(format string, args ...any) error {
	return &Error{Code: CodeInvalidAgentConfig, Detail: fmt.Sprintf(format, args...)}
}

// errorTypeOf maps causes from other packages to their stable tag.
func errorTypeOf(err error) string {
	var me *model.Error
	if errors.As(err, &me) {
		if me.Code != "" {
			return me.Code
		}
		return string(me.Class)
	}
	if errors.Is(err, context.Canceled) {
		return CodeRunCancelled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return ""
}
