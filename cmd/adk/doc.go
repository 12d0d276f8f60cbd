// Command adk is the one binary of the project: local and distributed eval
// runs, trace queries, and the server roles (serve, coordinator, worker).
//
// Exit codes are part of the interface: 0 success, 2 evaluated but failed or
// regressed, 1 any error, printed as one line on stderr.
//
// It must not import gRPC: adk speaks OTLP over HTTP only, and every
// package a binary links is initialised at each start, `adk eval run`'s
// included (internal/otlpwire holds the OTLP pieces pdata keeps beside
// its gRPC services).
//
// It must not import capnslog: its init takes over the standard log
// package in every process, and with it the default slog logger's output
// (third_party/etcd/ADK-PATCH.md says how raft-wal linked it).
package main
