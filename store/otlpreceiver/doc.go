// Package otlpreceiver is the OTLP/HTTP trace receiver: POST /v1/traces
// with an ExportTraceServiceRequest in protobuf (application/x-protobuf)
// or JSON (application/json), optionally gzip-encoded, decoded with the
// collector pdata package (internal/otlpwire: ptrace's decoders, as
// ptraceotlp decodes a request, without linking gRPC). Each span is mapped to the v2 span signal's
// metadata projection and published to ADK_SIGNALS through a
// bus.PublisherPool under the principal its bearer token maps to, so any
// OpenTelemetry SDK can stream into adk.
//
// # Request path
//
// method → bearer token (401, counted; the token is never logged) →
// Content-Type (415) and Content-Encoding (415) → compressed body limit
// (413) → bounded gzip inflation (413) → pdata decode (400) → mapping and
// encoding → one PublishRecord per span. Responses follow the OTLP/HTTP spec: 200 with an
// ExportTraceServiceResponse (partial_success with rejected_spans and a
// message when spans were rejected), a google.rpc.Status body on errors,
// each encoded in the request's content type, and 503 with Retry-After
// when the principal's publisher queue admits none of the request's
// spans (back-pressure: the client retries the whole request). When the
// queue fills part-way through a request the accepted prefix stays
// published and the rest is reported in partial_success: a retry of the
// whole request would duplicate the prefix.
//
// # Mapping (what a stored span keeps)
//
// Every OTLP span is a completed span: phase "end", trace/span/parent ids
// as lowercase hex, name (1..128 bytes of UTF-8), kind (unspecified is
// internal), start/end nanos and duration, status (unset|ok|error),
// trace flags and a valid tracestate. Attributes are an allowlist of
// metadata: the gen_ai semconv keys the observability package maps
// (operation, provider, request/response model, response id, tool name
// and call id, finish reasons, the four usage counters), error.type, and
// the identity attributes run_id, invocation_id and workflow_id that make
// spans selectable; gen_ai.system is read as gen_ai.provider.name when
// that is absent. Everything else is dropped: content keys (prompts,
// messages, tool arguments and results, ...) and credential-like keys
// (observability.IsForbiddenAttributeKey, internal/secrets) are counted
// as content_attributes_dropped; status messages, events and links are
// never read (they carry exception text and content).
//
// Resource attributes are deployment data and mostly not stored
// (process.command_line can hold secrets). Two kinds apply to a
// resource's spans that do not set their own: the identity attributes
// run_id, invocation_id and workflow_id, so an SDK can put the run
// identity on its resource once; and the bounded service set
// observability.ResourceAttributeKeys (service.name, service.version,
// deployment.environment, telemetry.sdk.*, ...), kept as span attributes
// of the same name so query results show which service a span came from
// and adk export otlp can put them back on a resource. The eval ids
// adk.eval.job_id, case_id, sample_id and worker_id are allowlisted too,
// so an external agent's spans are found with adk trace query --job.
// Scope attributes are never read.
//
// A span that cannot be mapped (zero or malformed ids, bad name, end
// before start, time beyond int64, attributes over 64 KiB encoded) is
// rejected and counted; the others of the request are still published.
//
// # Cost
//
// The mapping enforces what observability.SpanSignal.Validate checks by
// construction (FuzzOTLPDecode holds every published record to Validate)
// and encodes each span with a reflection-free encoder that writes what
// json.Marshal writes, into one buffer per request. PublisherConfig is the
// publisher template adk serve runs the receiver with: batches of up to
// 512 spans per ADK_SIGNALS message and a queue that absorbs bursts of
// exporter requests. BenchmarkDecodeMapEncode measures the per-span CPU
// without HTTP and the bus; BenchmarkOTLPReceiver the handler into
// JetStream; bench/otlpbench the whole of adk serve under telemetrygen.
//
// It may import bus, observability and internal; it must not import
// store/tracestore or store/tracenode (the store's implementation: tokens
// come in through Authenticator, which tracenode.Tokens implements).
package otlpreceiver
