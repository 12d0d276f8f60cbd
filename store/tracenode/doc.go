// Package tracenode runs a trace store node: a durable JetStream consumer
// of ADK_SIGNALS that applies batches to a tracestore.Store in stream
// order, and the adk.trace.v1.query NATS micro service (queue group
// "adk-trace") authenticated by bearer tokens kept as SHA-256 hashes.
// Every node also answers adk.trace.v1.status (no queue group) with its
// own counters, aggregates only, so one request gathers the fleet's view
// (GatherStatus).
//
// It may import bus, bus/wire, store/tracestore and internal; nothing in
// store/tracestore imports it.
package tracenode
