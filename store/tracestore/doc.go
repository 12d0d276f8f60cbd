// Package tracestore is the principal-scoped trace store (CONTRACTS §4) on
// Badger: closed metadata projections of v1 envelopes, v2 spans and
// workflow-lifecycle events, indexed by every subset of their identity
// (run_id, trace_id, workflow_id, invocation_id), paged by cursor, bounded
// by global and per-principal quotas and by retention in stream time.
//
// The store is applied in JetStream stream order by one owner (a store
// node); its state is a pure function of the stream, so every node that
// applied the same sequence answers every query with the same bytes. The
// cursor of a record is seq<<16 | index-in-message (Cursor).
//
// Key layout and trade-offs: store/DESIGN.md.
//
// tracestore must not import bus, coordinator, worker, store/tracenode or
// nats (nothing that talks to the network); it may import internal.
package tracestore
