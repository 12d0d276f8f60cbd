// Package observability turns the runtime's observation points into
// correlated, metadata-only signals: schema-v1 lifecycle envelopes and
// schema-v2 operation spans with W3C trace context, gen-ai semantic
// conventions, a bounded metrics catalog, sync exporters and the OTLP/HTTP
// JSON exporter.
//
// Design notes and the decisions taken where the contract was silent live
// in DESIGN.md beside this file.
//
// It must not import agent, plugins, evalengine, bus, store, coordinator,
// worker or devapi: the runtime calls it through the Observer interface.
package observability
