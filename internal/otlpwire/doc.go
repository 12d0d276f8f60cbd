// Package otlpwire is the part of OTLP/HTTP that the collector's pdata
// package offers only beside its gRPC services: the export responses
// (ExportTraceServiceResponse, ExportLogsServiceResponse) in protobuf and
// JSON, and an ExportTraceServiceRequest decoded as ptraceotlp decodes it.
//
// pdata's ptraceotlp and plogotlp hold both the OTLP messages and their
// gRPC service definitions, so importing them links google.golang.org/grpc
// (65 packages and their init work) into adk, which speaks OTLP over
// HTTP only. A request is ptrace.Traces itself on the wire (TracesData and
// ExportTraceServiceRequest are both field 1, repeated ResourceSpans), so
// ptrace's own marshalers encode and decode it; a response is two fields,
// encoded and decoded here. The tests hold every encoding and decoding
// here to ptraceotlp's and plogotlp's, byte for byte and error for error
// (FuzzResponseMatchesPdata, FuzzDecodeTracesMatchesPdata), with one
// documented difference (DecodeTraces).
//
// It must not import any adk package outside internal. It must not import
// gRPC.
package otlpwire
