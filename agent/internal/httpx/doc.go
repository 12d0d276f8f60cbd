// Package httpx is the HTTP call path the remote model providers (openai,
// gemini) share: one tuned transport, per-attempt timeouts, bounded response
// bodies, and retries only on 429 and 5xx with exponential backoff that
// honours Retry-After. Every failure is a structural *model.Error: no
// response body, URL or header ever reaches an error.
//
// It imports only agent/model and the standard library.
package httpx
