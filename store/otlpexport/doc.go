// Package otlpexport forwards the ADK_SIGNALS stream to any OTLP/HTTP
// trace backend (Jaeger, Langfuse, Phoenix, a collector): `adk export
// otlp`. It is the asynchronous exporter of ../../DESIGN.md "Signals"
// point 6, the mirror image of otlpreceiver.
//
// # Delivery
//
// One durable JetStream consumer ("adk-export-<name>", explicit acks,
// MaxAckPending = one batch) feeds one loop. The loop takes up to
// MaxBatchMessages stream messages (and at most MaxBatchSpans spans: the
// bounded in-flight batch), maps every completed v2 span record to an OTLP
// span with pdata, and POSTs one ExportTraceServiceRequest in protobuf.
// The batch's messages are acked only after the backend accepted it (2xx)
// or after its spans were dropped and counted: a permanent refusal (a 4xx
// other than 408 and 429, a 3xx: redirects are not followed, a 5xx other
// than 502, 503 and 504), a request over MaxRequestBytes, or MaxAttempts
// transient failures. Transient failures (connect errors, timeouts, 408,
// 429, 502, 503, 504) are retried with exponential backoff and equal
// jitter; a Retry-After (seconds or an HTTP date, capped at MaxRetryAfter)
// on 429 or 503 delays the next attempt at least that long. While it
// retries, the loop tells JetStream the batch is in progress, so the
// batch is not redelivered behind its back.
//
// Stop (SIGINT/SIGTERM in the command) cancels an attempt in flight and
// naks the unacked batch, so the next run of the same name resumes with
// it at once; a killed process's batch comes back after AckWait. Start
// and restart never skip: the durable consumer's ack floor is the cursor.
//
// # Idempotency
//
// Delivery is at least once: a batch the backend accepted but whose ack
// was lost is sent again. The spans of a redelivered message are the same
// records with the same trace and span ids (the ids are in the record,
// never generated here), so a backend that keys spans by (trace id, span
// id), as Jaeger, Langfuse and Phoenix do, stores them once.
//
// # What is sent
//
// Only completed v2 spans (phase "end"); start phases, v1 envelopes and
// workflow-lifecycle records are skipped and counted as such. The span
// record's attributes are already metadata only (the store's allowlist
// applies to what the receiver and the workers publish). The attributes
// named by observability.ResourceAttributeKeys (service.name, ...) are
// lifted onto the OTLP resource, and spans are grouped by resource; a
// span without service.name gets Config.ServiceName. Header values (the
// OTEL_EXPORTER_OTLP_HEADERS of the command) are never logged or counted.
//
// It may import bus, observability and internal; it must not import
// store/tracestore or store/tracenode.
package otlpexport
