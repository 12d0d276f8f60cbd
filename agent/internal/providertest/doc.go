// Package providertest is the conformance suite every remote model
// provider passes (agent/model/openai, agent/model/gemini): a fake server
// on 127.0.0.1 speaking the provider's own protocol drives success, typed
// 4xx errors, 5xx retries, 429 with Retry-After, per-attempt timeouts,
// cancellation, oversized and malformed bodies and the shared configuration
// bounds, and every error is checked for the planted API key and the
// server's body. A provider's own tests keep only what is its protocol's
// alone (tool calling, structured output, its extra settings). The suite
// runs on both of httpx's call paths (net/http's Transport and the lean
// path for http:// endpoints), and fails if an attempt came through the
// other one.
//
// It imports only agent/model, agent/internal/httpx and the standard
// library.
package providertest
