// Package httpadapter is the evalengine Adapter for agents written in any
// language: each turn is one HTTP POST.
//
// Protocol. For every turn the adapter POSTs a JSON object
//
//	{"case_id": "...", "sample_id": "sample-...", "turn_id": "turn-1",
//	 "turn_index": 0, "input": <the turn's input, any JSON>,
//	 "session_id": "<stable per (case, sample)>"}
//
// with Content-Type application/json, and expects a 2xx answer whose body
// is a JSON object
//
//	{"output": <final response, any JSON, required>,
//	 "events": [<event>, ...],     optional
//	 "metadata": {...}}            optional
//
// Unknown keys are refused. Tool calls are read from the events in the
// contract's shape: {"content": {"type": "tool_calls", "calls": [{"name",
// "args", "call_id"}]}} and {"content": {"type": "tool_response", "name",
// "result", "call_id"}}. The session id is the sample id, so a server keeps
// conversation state per session id and every sample starts fresh. The
// response is bounded (MaxResponseBytes) and the request is bounded in
// time (the sample's deadline, and Timeout per request).
//
// Failures become stable sample error tags, never raw transport text:
// http_adapter_unavailable (connection failed), http_adapter_status (non-2xx),
// http_adapter_response_too_large, invalid_adapter_result (bad JSON or
// shape), invalid_adapter_events, and timeout from the engine's deadline.
//
// It must not import any adk package but evalengine and internal.
package httpadapter
