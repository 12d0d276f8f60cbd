// Package settings is the one configuration schema of adk's long-running
// commands (serve, coordinator, worker, store, and the HTTP API gateway):
// a JSON file given with --config, flags for the common keys, and the
// defaults, in that order of precedence (flag > file > default). The same
// file may configure every role: each command reads the sections it needs
// and ignores the others.
//
// Every key is checked against the contract's bounds (CONTRACTS §4 for the
// trace store, §6 for admission and the eval store) and its
// cross-constraints; a bad value is an *Error naming the key and what is
// valid, and nothing starts. `adk config defaults` prints the full default
// file and `adk config validate FILE` checks one.
//
// It maps a checked File to each component's own configuration
// (coordinator.Limits, evalstore.Limits, tracestore.Options,
// bus.SignalStreamConfig, a log/slog logger). It must not import cmd.
package settings
