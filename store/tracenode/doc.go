// Package tracenode runs a trace store node: a durable JetStream consumer
// of ADK_SIGNALS that applies batches to a tracestore.Store in stream
// order, and the adk.trace.v1.query NATS micro service (queue group
// "adk-trace") authenticated by bearer tokens kept as SHA-256 hashes.
// Every node also answers adk.trace.v1.status (no queue group) with its
// own counters, aggregates only, so one request gathers the fleet's view
// (GatherStatus).
//
// The node skips nothing the stream holds: a delivery its NATS client
// lost shows as a jump in the consumer's delivery sequence, and the node
// counts it (delivery_gaps) and restarts the consumer at its applied
// sequence + 1 (store/DESIGN.md, "Delivery gaps"). A lost last delivery
// has no later one to show the jump: once the node has applied nothing
// for a second, and then every PullExpiry while it stays idle, it asks
// its consumer for the last delivery sent, and one it never got is
// pulled again the same way (idle_checks counts the requests).
//
// It may import bus, bus/wire, store/tracestore and internal; nothing in
// store/tracestore imports it.
package tracenode
