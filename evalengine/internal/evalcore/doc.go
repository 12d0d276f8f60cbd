// Package evalcore is the evaluation engine's core: the eval set and its
// native decoding, run options, the Adapter interface to the system under
// test, the six criteria and the built-in metrics, the run engine and its
// scheduler, the result document with its strict decoding and streaming,
// baseline comparison, statistics, ensembles and human review.
//
// It exists so that the rest of evalengine can share these types without
// an import cycle. The report renderers, the model-calling parts (the LLM
// judge and user simulator with their provider clients), the Google ADK
// import and the user simulation all use the set, the result and the
// errors, and the root package both calls them and offers them as one
// API. So the types live here, below all of them, and evalengine re-exports
// every name a caller uses (its api_*.go files); callers outside evalengine
// never import this package. The contract, the flow and the decisions on
// the contract's quirks are documented once, in evalengine's doc.go.
//
// Names that only evalengine's other parts need (NewErr, KeySet,
// CheckResult, ...) are exported here and not re-exported by the root.
//
// The run engine knows nothing of connections: RunConfig.WorkersRunning
// tells its caller, as each worker stops, how many still run (so how many
// samples can still call a model at once), and the caller decides what to
// release (`adk eval run`: the provider connections beyond them).
//
// It imports only internal, observability and the standard library. It
// must not import evalengine, agent, bus, coordinator, worker, store or
// devapi: the core never calls a model provider, never renders a report
// and never knows how a set was imported.
package evalcore
