// Package agent is the agent runtime: the Runner, the LLM agent loop,
// sub-agent delegation, the sequential and parallel workflow agents,
// in-memory sessions, tools (Go functions, mock, http) with JSON Schema
// argument validation, and the AGENT.json loader.
//
// A turn: Runner.Run(ctx, RunRequest) yields the turn's events in session
// order (iter.Seq2[*session.Event, error]); Runner.RunTurn collects them
// into a TurnResult (final text, tool-call trajectory, usage, events).
//
// Every phase follows CONTRACTS §1.4: Runner-global plugins (the plugins
// package), then the agent's local callback unless a global returned early,
// then the operation, then global after/error plugins, then the local
// after callback unless a global after plugin returned early. Sub-agents
// and workflow nodes run under the same Runner and so inherit its plugins.
// The Observer (observability.Nop by default) sees run, agent, workflow,
// model and tool boundaries.
//
// Model providers live in agent/model/{scripted,openai,gemini}.
//
// It may import agent/model, agent/session, plugins (and plugins/builtin,
// the default AGENT.json plugin registry), observability and
// internal; it must not import evalengine, bus, store, coordinator, worker
// or devapi.
package agent
