// Package httpx is the HTTP call path the remote model providers (openai,
// gemini) share: one tuned transport, per-attempt timeouts, bounded response
// bodies, and retries only on 429 and 5xx with exponential backoff that
// honours Retry-After. Every failure is a structural *model.Error: no
// response body, URL or header ever reaches an error.
//
// Calls to a cleartext http:// URL that no proxy applies to (local model
// servers, the benchmarks' fake) take the lean path (lean.go) instead of
// net/http's Transport, whose two goroutines per connection cost a
// hand-off to each on every call: a pool of HTTP/1.1 connections on which
// the calling goroutine writes the request and reads the answer (a plain
// answer's head, 2xx with one Content-Length, in place from the
// connection's buffer; any other by http.ReadResponse). A provider prepares its endpoint once (Endpoint):
// its headers, and on the lean path the request's bytes as
// http.Request.Write writes them, cut around the Content-Length value, so
// a call writes those, its length and its body without building an
// http.Request. A done context or the attempt's deadline (a timer the
// connection keeps, armed per call: no context per attempt) ends the call
// at once through the connection's deadline and closes the connection. A
// context's end reaches the call through context.AfterFunc, or, for an
// eval sample's context whose scope is free (internal/samplescope), through
// the scope, with the sample's deadline on the attempt's timer when it
// comes first, so a sample's call registers nothing with its context; only a
// connection whose answer was read to its end and not marked
// "Connection: close" goes back to the pool, which checks an idle one is
// still open and silent before reusing it and closes idle ones after
// Transport's idle timeout, within its idle bounds (the idle check's raw
// connection is taken once per connection). PostBorrow lends a caller a
// plain answer's body where it lies in the connection's buffer, when it
// fits there, instead of copying it: the connection goes back to the pool
// when the caller says it is done reading (the openai provider decodes
// there). The pool counts each host's connections in a call, so that
// KeepIdle can bound those and the idle ones together while a process
// knows how many calls can still be in flight at once (an eval run's
// workers still running): the connections beyond them are closed as the
// run's workers stop, not by the kernel at the process's exit, where
// closing 256 of them took ~5.5 ms after the report. The pool owns no
// goroutine. On Linux both dialers start a loopback connect in their
// control function (dialnow_linux.go): the handshake completes inside it,
// so the dial returns without waiting for Go's network poller, which busy
// run queues (256 workers starting at once) kept from polling for up to
// ~25 ms at a run's start. https:// and proxied URLs keep the Transport
// (and HTTP/2), as does a provider given an http.Client of its caller's. Unlike the
// Transport, the lean path asks for no compression and follows no
// redirect (a 3xx is a client error; model APIs do not redirect). LeanEnv
// ("off") sends every call through the Transport.
//
// It imports only agent/model, internal/samplescope and the standard
// library.
package httpx
