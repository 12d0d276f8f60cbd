// Package plugins is the Runner plugin pipeline: an ordered list of
// descriptors compiled once per Runner, and Run, which calls every plugin's
// callback for one lifecycle hook in isolation and reports what the phase
// should do next. Stateful plugins (Instance) and the event-identity check
// for on_event amendments live here too; the built-in plugins are in
// plugins/builtin.
//
// It imports only agent/model, agent/session (leaf types) and
// internal/secrets. It must not import agent (the runtime, which calls
// it), evalengine, bus, store, coordinator or worker.
//
// # Writing a plugin
//
// A plugin is any Plugin: a value whose Hooks method returns a Hooks struct
// of typed callbacks, one field per hook, nil for hooks it does not
// implement (traced "skipped"). A Hooks literal is itself a Plugin:
//
//	plugins.Descriptor{ID: "cache", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
//		BeforeModel: func(ctx context.Context, cc plugins.CallContext, req *model.Request, cfg map[string]any) (plugins.Outcome, error) {
//			if resp, ok := lookup(req); ok {
//				return plugins.Return(resp), nil // skip the provider
//			}
//			return plugins.Observe(), nil
//		},
//	}}
//
// Generic plugins cover many hooks with one function through Dispatch. Each
// callback gets a private deep copy of the phase value, so mutating it in
// place changes nothing: return Amend(v) (continue with v) or Return(v) /
// Replace(v) (end the phase with v), or Halt(reason). The value types, and
// what Amend and Return must carry, are listed on the Hooks fields; a wrong
// type is invalid_result.
//
// # How the runtime calls it
//
// For each phase the Runner calls Run(ctx, hook, cc, value) and then, by
// Result.Disposition: Continue — go on with the original value; Amend — go
// on with Result.Value (re-validate amended tool args / requests); Return —
// skip the agent-local callback and the operation and use Result.Value;
// Halt or Error — stop with Result.Err (a *Error: plugin_halted,
// plugin_failed, cancelled). The precedence is the contract's: global
// plugins, then the local callback (skipped after Return), the operation,
// the global after/error plugins, the local after/error callback (skipped if
// a global after plugin returned). For the notification hooks (after_run,
// on_agent_error, on_run_error) the disposition is always Continue. Sub-agents
// use the same *Pipeline. on_event amendments must pass
// CheckEventReplacement. Result.Trace is the plugin_trace of the lifecycle
// signal.
//
// # Isolation, and what Go cannot do
//
// Every hook call runs in its own goroutine under the descriptor's deadline
// (timeout_ms, default 1000, 1..120 000), with panic recovery (exception),
// the caller's cancellation propagated to its context, and a size check on
// the JSON encoding of any Amend/Return value (max_result_bytes, default
// 262 144, ≤ 1 MiB; result_too_large; values JSON cannot carry, such as
// funcs and channels, are invalid_result_type). Run returns at the deadline
// even if the hook ignores its context; the straggler's result, and any
// result completed after the deadline, is discarded as timeout.
//
// The Erlang contract also bounds each hook's heap (max_heap_words) and
// kills the worker process past it (worker_down). Go has no per-goroutine
// memory limit and cannot kill a goroutine, so that bound is not offered:
// descriptors have no heap field, a hook that allocates without limit can
// exhaust the process, and a straggler keeps running (and keeps
// Pipeline.Close waiting) until it returns. What Go can enforce is enforced:
// the deadline for the caller, the result size, panic isolation and private
// copies of every value. worker_down is used for a crashed stateful
// instance.
//
// # Stateful plugins
//
// Instance runs a Stateful plugin behind one actor goroutine: callbacks are
// serialised through a bounded queue (queue_full), state is kept
// JSON-encoded (state_too_large past max_state_bytes) and commits only when
// the callback finished within its deadline and its caller was still
// waiting. A panicking callback crashes the instance, which then answers
// instance_unavailable until Recreate. An *Instance is a Plugin and an
// io.Closer: put it in a Descriptor and Pipeline.Close stops it.
package plugins
