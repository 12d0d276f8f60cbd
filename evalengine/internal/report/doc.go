// Package report renders evaluation results for people and tools: the
// canonical exports of Render (json, jsonl, markdown, junit, sarif,
// annotations) and the self-contained HTML page (RenderHTML, with its
// word diffs), the failure reasons every renderer takes from Failures, and
// the `adk eval compare` and `adk eval stats` reports. Reports of any
// size are written a case at a time: a streamed result's (stream.go) and
// a comparison's (comparestream.go), whose json and markdown past one
// document's bound are the same document whole. evalengine
// re-exports every name a caller uses; callers outside evalengine never
// import this package.
//
// It is a package of its own because rendering is the largest part of the
// engine that only reads results: it works on a finished (or decoded)
// evalcore.Result or Comparison and never runs a case. It imports only
// evalengine/internal/evalcore, internal and the standard library. It
// must not import evalengine, agent, bus, coordinator, worker, store or
// devapi: a report never calls a model, and the same bytes come from the
// library, the API and the CLI.
package report
