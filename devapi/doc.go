// Package devapi is the developer HTTP API: /dev/v1/evaluation/... (CONTRACTS
// §7), /dev/v1/traces (§4), /dev/v1/cluster, server-sent job events, the
// OpenAPI description, and the operational endpoints /healthz, /readyz and
// /metrics every adk process serves.
//
// It is a stateless translation of HTTP into the existing NATS services:
// eval calls go through coordinator/client (writes reach the Raft leader,
// reads any coordinator), trace pages through the store nodes' query
// service. Nothing is kept between requests, so a gateway can be killed
// and another started anywhere; a submission's Idempotency-Key header is
// the coordinator's request id, so a client's retry through any gateway
// answers the job its first attempt created (DESIGN.md).
//
// It calls the services through coordinator/api, coordinator/client,
// store/tracenode and store/evalrecord. It must not import worker,
// cmd/adk, testcluster or Raft.
package devapi
