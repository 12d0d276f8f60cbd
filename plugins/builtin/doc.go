// Package builtin holds the four opt-in Runner plugins of the contract —
// global_instruction, context_filter, reflect_retry and metadata_logger — and
// New, the registry that builds one as an ordinary plugins.Descriptor from
// its name and a JSON config (how AGENT.json names built-ins). They obey the
// same ordering, limits and failure policy as application plugins; each
// config is validated with the contract's bounds and unknown keys are
// rejected.
//
// It imports only plugins and agent/model (leaf types; agent/session comes
// with plugins). It must not import agent (the runtime), evalengine, bus,
// store, coordinator or worker.
package builtin
