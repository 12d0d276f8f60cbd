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
//   - Compare names both sides by reference (baseline_job_id or
//     baseline_name, current_job_id): the server reads the stored results,
//     so results of any size compare. The two Wilson intervals come from
//     /dev/v1/evaluation/stats over the two jobs (a named baseline's job
//     is read from the baseline row). The case table shows 100 rows at a
//     time, regressions first, with Previous/Next: a comparison of a
//     100,000-case set is one document (devapi/DESIGN.md), but the page
//     never builds a row per case.
//   - A job whose result is past one document (over 16 MiB of samples,
//     the 413 eval_report_too_large of /result and the json report) is
//     shown from the cases route: its summary (pass rate, interval,
//     counts, metrics) and its case rows 100 at a time, failures first,
//     with Previous/Next (the route reads the stream's case lines, never
//     its samples). A row opens its case's page. The page offers
//     downloads of the report route's JSON Lines stream, markdown and
//     html, fetched with the bearer token and saved from a blob, and says
//     what it saved.
//   - A case's page, of a result of any size, reads the case route
//     (/dev/v1/evaluation/jobs/{job_id}/cases/{case_index}): the case and
//     its samples, never the whole result, so a row of a big result opens
//     it as a row of a small one does. The route pages samples in sample
//     order and its default page is the whole case (at most 100 samples)
//     unless they pass its byte bound; each page shows its failed samples
//     first, as the page always did, and Previous/Next appear only when
//     the case takes more than one page. A sample too large for any
//     answer says so, and the job page's JSON Lines download has it.
//   - Trend: the last 30 completed runs of the set, through
//     /dev/v1/evaluation/stats, which is `adk eval stats` itself (no
//     mirror of its arithmetic in the page): the pass rate with its
//     Wilson band and one chart per gated metric (mean score with its
//     confidence band), the pooled earlier mean drawn as a dashed line,
//     and a table of every gate's verdict, drop, lower bound and margin.
//   - Keyboard: native links, buttons, <details> and form controls, a
//     skip link and visible focus outlines; after a navigation focus moves
//     to <main>, so Tab continues in the new content. The jobs list shows
//     the job's agent (agent_name of the job JSON).
//   - Traces: a replay gap (409 trace_replay_gap) is shown as a notice
//     naming the evicted range, and the search resumes at the oldest
//     available event; the live tail polls once a second from the last
//     cursor.
//
// # Decisions where issue 17 is silent
//
//   - Submitting: each submission draws an Idempotency-Key (32 hex digits
//     from crypto.getRandomValues) and sends it on every attempt of that
//     submission: two automatic retries (after 1 s and 2 s) when the
//     network failed, no answer came within 60 s or the answer was a 5xx;
//     then the Retry button; or Submit pressed again on the same content.
//     So a retry whose earlier attempt did reach the server answers the job
//     that attempt made (devapi/DESIGN.md "Idempotency-Key"). Other content
//     (the JSON sent, not the text areas' spacing) is a new submission with
//     a new key, and so is a submission after the last one made its job: a
//     deliberate re-run. The key is kept in the tab's memory only (a
//     reload forgets it, with the form). The button is disabled while a
//     submission is in flight and, once it made a job, until the page
//     leaves. A 422 idempotency_key_reused says no job was made and offers
//     a new submission, which draws a new key.
//   - Cancelling: each press of Cancel job draws a key and sends it on
//     every attempt of that cancel, with the same retries as a submission
//     (then a Retry button), so a retry whose earlier attempt did cancel
//     the job answers 202 as that attempt did, not 409. The button is
//     disabled while the cancel is in flight and, once the server took
//     it, until the job ends. The page says where the cancel stands:
//     requested, then "The job was cancelled." (or the other end the job
//     reached first) as the live status reports it; a 409 says the job
//     had already ended and nothing was cancelled.
package ui
