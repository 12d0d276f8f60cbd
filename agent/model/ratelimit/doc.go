// Package ratelimit keeps model calls under a provider endpoint's declared
// limits (requests per minute, tokens per minute, concurrent requests):
// token buckets (golang.org/x/time/rate) and a concurrency semaphore
// wrapped around a model.Provider, with additive-increase /
// multiplicative-decrease when the provider answers 429 anyway.
//
// A Limiter runs in one of two modes. Local (adk eval run): it enforces
// the declared limits itself and cuts them on a 429. Managed (adk worker):
// it runs at the share of the limits the coordinator leader grants it in
// heartbeat answers, and reports its throttling back; the leader runs the
// AIMD for the whole fleet, so N workers together stay under the limit
// and back off together. A managed limiter with no live grant admits
// nothing.
//
// A call the provider throttles is retried by Provider (after the
// Retry-After, shared by every caller of the limiter) until the caller's
// context ends: a throttled call is waiting, not a failure.
//
// It imports agent/model and golang.org/x/time/rate. It must not import
// agent, evalengine, worker or coordinator.
package ratelimit
