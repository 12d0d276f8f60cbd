// Package ui is adk's web UI: a few static files (index.html, app.css,
// app.js; plain DOM, no front-end toolchain, no CDN) embedded with
// the go:embed directive and served by Handler. `adk serve` and `adk api` mount it at /
// on the developer API's listener (devapi.Options.UI), so it uses the same
// tokens and routes as any client of /dev/v1.
//
// It imports only the standard library: it is assets and a file server.
//
// # Decisions where issue 15 is silent
//
//   - Login: the token is typed into a password field and kept in
//     sessionStorage (one tab, gone when it closes), sent only as an
//     Authorization header, never in a URL or a cookie. A 403 on the probe
//     call still logs in (a token with trace scopes but no eval scope).
//   - Live status: EventSource cannot send a bearer header, so the page
//     reads the job's text/event-stream with fetch; a dropped stream is
//     said on the page and reconnects after a second. The jobs list
//     follows at most 8 running jobs live and shows the pass rate of at
//     most 25 completed ones (one result fetch each).
//   - Everything from the server is written as text (text nodes and
//     setAttribute with a fixed attribute allowlist); links are only to
//     the page's own #/ routes. The CSP below forbids inline script, any
//     other origin and framing.
//   - Compare posts both results to /dev/v1/evaluation/compare, so it is
//     bound by the API's 64 KiB request body; larger results get the
//     API's typed 413 on the page (a compare-by-job-id route is the fix).
//   - Trend: each run's interval is the result's own pass_rate_interval;
//     the gate is the pass-rate part of `adk eval stats` (last run against
//     the earlier runs pooled, 95 %, significance required), computed in
//     the page by a mirror of evalengine.LongitudinalGate that the browser
//     test holds to the Go verdict. Per-metric gates are not drawn.
//   - Traces: a replay gap (409 trace_replay_gap) is shown as a notice
//     naming the evicted range, and the search resumes at the oldest
//     available event; the live tail polls once a second from the last
//     cursor.
package ui
