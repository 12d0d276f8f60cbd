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
// Two limits of the idle check, both accepted:
//   - The prepare loop makes the request itself and takes no delivery
//     until it is answered, at most deliveryWait (2 s) after the check
//     began. A server that answers takes milliseconds; the full 2 s is
//     spent only when the request is lost or JetStream's API does not
//     answer (a request made while the client reconnects is buffered
//     and answered if it reconnects within the 2 s; one written to the
//     dying connection is lost). Meanwhile nothing is lost: the iterator
//     holds what its pulls asked for (FetchBatch) and pulls no more,
//     and Stop ends the request at once. But a reconnect's restart of
//     the consumer (watch stops the iterator) begins only when the
//     request ends: up to 2 s late, at most once at the start of a
//     quiet period and once per PullExpiry while it lasts.
//   - A delivery the consumer reported sent must reach the loop within
//     deliveryWait. A process stalled (or the loop left unscheduled)
//     across the end of that wait, with the delivery in the client's
//     buffer when it resumes, can have the wait's timer win Next's
//     select (Go picks among ready cases at random): one false delivery
//     gap is counted and logged, and the node restarts the consumer at
//     applied+1 (the resync's 1 s pause). Nothing is skipped or applied
//     twice.
//
// Not made asynchronous: the answer would have to wake Next from another
// goroutine, ordered against watch's wake-up and tagged with the
// consumer's incarnation (an answer about the consumer before a restart
// must be ignored), for a gain of at most 2 s, only while the server
// does not answer; and no test with real parts makes the info request
// hang while deliveries still flow. The iterator has no non-blocking
// receive that would tell a buffered delivery from a lost one after a
// stall.
//
// It may import bus, bus/wire, store/tracestore and internal; nothing in
// store/tracestore imports it.
package tracenode
