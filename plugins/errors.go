package plugins

import (
	"fmt"
	"strconv"
)

// Stable error codes (the contract's strings). They appear in Error.Code and
// on the wire.
const (
	CodeInvalidPluginDescriptor = "invalid_plugin_descriptor"
	CodeDuplicatePluginID       = "duplicate_plugin_id"
	CodePluginLimit             = "plugin_limit"
	CodePluginFailed            = "plugin_failed"
	CodePluginHalted            = "plugin_halted"
	CodeInvalidHook             = "invalid_hook"
	CodeInvalidHookValue        = "invalid_hook_value"
	CodePipelineClosed          = "pipeline_closed"
	CodeCancelled               = "cancelled"
	CodeInvalidEventReplacement = "invalid_event_replacement_identity"
	CodeInvalidPluginConfig     = "invalid_plugin_config"
	CodeUnknownBuiltinPlugin    = "unknown_builtin_plugin"

	CodeQueueFull                 = "queue_full"
	CodeTimeout                   = "timeout"
	CodeStateTooLarge             = "state_too_large"
	CodeInitialStateTooLarge      = "initial_state_too_large"
	CodeInitTimeout               = "stateful_plugin_init_timeout"
	CodeInitFailed                = "stateful_plugin_init_failed"
	CodeInvalidInstanceSpec       = "invalid_plugin_instance_spec"
	CodeInvalidInstanceInvocation = "invalid_plugin_instance_invocation"
	CodeInstanceUnavailable       = "instance_unavailable"
	CodeInstanceStopped           = "instance_stopped"
	CodeStatefulPluginFailed      = "stateful_plugin_failed"
	CodeInvalidStatefulResult     = "invalid_stateful_plugin_result"
)

// Reasons carried by invalid_plugin_descriptor errors.
const (
	ReasonInvalidID            = "invalid_id"
	ReasonInvalidPlugin        = "invalid_plugin" // the contract's invalid_module: a nil Plugin
	ReasonNoCallbacks          = "no_plugin_callbacks"
	ReasonInvalidMode          = "invalid_mode"
	ReasonInvalidFailurePolicy = "invalid_failure_policy"
	ReasonInvalidTimeoutMs     = "invalid_timeout_ms"
	ReasonInvalidMaxResultSize = "invalid_max_result_bytes"
	ReasonInvalidPluginConfig  = CodeInvalidPluginConfig
)

// Contract bounds (defaults and maxima).
const (
	PluginLimit           = 128
	MaxIDBytes            = 256
	MaxConfigBytes        = 1 << 20
	DefaultTimeoutMs      = 1000
	MaxTimeoutMs          = 120_000
	DefaultMaxResultBytes = 262_144
	MaxMaxResultBytes     = 1 << 20

	DefaultMaxQueue      = 64
	MaxMaxQueue          = 4096
	DefaultInitTimeoutMs = 1000
	MaxInitTimeoutMs     = 30_000
	DefaultMaxStateBytes = 1 << 20
	MaxMaxStateBytes     = 64 << 20

	maxReasonBytes = 512
)

// Error is the package's one structured error. Code is a stable contract
// string; the other fields say where, when they apply. It never carries
// plugin content, a raw error text or a secret.
//
// It is not internal/coded's Error: callers read Index, PluginID, Hook and
// Limit by name, it has a JSON shape of its own, and its message depends on
// the code (" at index N", " 128"). A generic type cannot hold those fields
// and a formatting hook would be as long as Error() below, so the type
// stays its own.
type Error struct {
	Code     string `json:"code"`
	Index    int    `json:"index,omitempty"`     // descriptor index (invalid_plugin_descriptor)
	PluginID string `json:"plugin_id,omitempty"` // plugin_failed, plugin_halted, duplicate_plugin_id
	Hook     Hook   `json:"hook,omitempty"`
	Reason   string `json:"reason,omitempty"` // failure tag, validation reason or redacted halt reason
	Limit    int    `json:"limit,omitempty"`  // plugin_limit
}

func (e *Error) Error() string {
	s := "plugins: " + e.Code
	switch e.Code {
	case CodeInvalidPluginDescriptor:
		s += " at index " + strconv.Itoa(e.Index)
	case CodePluginLimit:
		s += " " + strconv.Itoa(e.Limit)
	}
	if e.PluginID != "" {
		s += fmt.Sprintf(" plugin %q", e.PluginID)
	}
	if e.Hook != "" {
		s += " hook " + string(e.Hook)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is makes errors.Is(err, ErrPluginFailed) and the other sentinels match any
// *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.PluginID == "" && t.Hook == "" && t.Reason == ""
}

// Retryable reports whether trying the same call again may succeed: true for
// a stateful queue_full or timeout, false otherwise.
func (e *Error) Retryable() bool {
	return e.Code == CodeQueueFull || e.Code == CodeTimeout
}

// Sentinels for errors.Is; each matches every *Error with its Code.
var (
	// ErrInvalidDescriptor: a descriptor broke a bound (Index, Reason say which).
	ErrInvalidDescriptor = &Error{Code: CodeInvalidPluginDescriptor}
	// ErrDuplicateID: two descriptors share an id.
	ErrDuplicateID = &Error{Code: CodeDuplicatePluginID}
	// ErrPluginLimit: more than 128 descriptors.
	ErrPluginLimit = &Error{Code: CodePluginLimit}
	// ErrPluginFailed: a closed-policy plugin failed (Reason is the trace outcome).
	ErrPluginFailed = &Error{Code: CodePluginFailed}
	// ErrPluginHalted: an intervening plugin halted the phase.
	ErrPluginHalted = &Error{Code: CodePluginHalted}
	// ErrInvalidHook: Run was called with an unknown hook or with on_error.
	ErrInvalidHook = &Error{Code: CodeInvalidHook}
	// ErrInvalidHookValue: Run was called with a value of the wrong type.
	ErrInvalidHookValue = &Error{Code: CodeInvalidHookValue}
	// ErrPipelineClosed: Run after Close.
	ErrPipelineClosed = &Error{Code: CodePipelineClosed}
	// ErrCancelled: the caller's context ended during the pipeline.
	ErrCancelled = &Error{Code: CodeCancelled}
	// ErrInvalidEventReplacement: an on_event amendment changed the event's identity.
	ErrInvalidEventReplacement = &Error{Code: CodeInvalidEventReplacement}
	// ErrQueueFull: a stateful instance's queue is full.
	ErrQueueFull = &Error{Code: CodeQueueFull}
	// ErrTimeout: a stateful callback missed its deadline; its state was discarded.
	ErrTimeout = &Error{Code: CodeTimeout}
	// ErrStateTooLarge: a stateful callback's new state exceeded the bound; discarded.
	ErrStateTooLarge = &Error{Code: CodeStateTooLarge}
	// ErrInstanceUnavailable: the stateful instance crashed or was closed.
	ErrInstanceUnavailable = &Error{Code: CodeInstanceUnavailable}
	// ErrInvalidInstanceSpec: an InstanceSpec broke a bound.
	ErrInvalidInstanceSpec = &Error{Code: CodeInvalidInstanceSpec}
	// ErrInvalidPluginConfig: a built-in's config broke a bound or had an unknown key.
	ErrInvalidPluginConfig = &Error{Code: CodeInvalidPluginConfig}
)

func descriptorError(index int, reason string) *Error {
	return &Error{Code: CodeInvalidPluginDescriptor, Index: index, Reason: reason}
}
