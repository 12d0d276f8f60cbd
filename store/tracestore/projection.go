package tracestore

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/jsonlimit"
	"github.com/fadcedab/adk/observability"
)

// Event kinds.
const (
	KindObservability     = "observability"
	KindWorkflowLifecycle = "workflow_lifecycle"
)

// Identity keys, in their canonical (sorted) order.
var identityKeys = [...]string{"invocation_id", "run_id", "trace_id", "workflow_id"}

const (
	maxTextBytes  = 512
	maxListItems  = 16
	maxInputDepth = 16
)

// Closed projections (CONTRACTS §4).
var (
	v1Measurements = set("count", "duration_ms", "duration", "system_time", "monotonic_time", "bytes", "frames")
	v1MetaText     = set("run_id", "invocation_id", "session", "agent", "model", "tool", "call_id", "trace_id", "span_id", "parent_id", "tracestate")
	usageInts      = set("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.reasoning_tokens")
	// Attribute text keys. run_id, workflow_id and invocation_id are ours:
	// they are identifiers (never content) and make spans selectable.
	attrText = set("phase", "hook", "outcome", "status", "stream", "capture_error", "gen_ai.operation.name",
		"gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model", "gen_ai.response.id",
		"gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.response.finish_reasons",
		observability.MappingVersionKey, "erlang_adk.gen_ai.mapping.version", // ours, and the contract fixtures'
		"error.type", "run_id", "workflow_id", "invocation_id")
	v2Text      = set("signal", "phase", "name", "kind", "trace_id", "span_id", "parent_span_id", "tracestate", "status")
	v2Ints      = set("schema_version", "trace_flags", "start_time_unix_nano", "end_time_unix_nano", "duration_nano")
	wfRequired  = set("type", "workflow_id", "workflow_kind", "invocation_id")
	wfOptText   = set("node_id", "node_type", "outcome", "pause_kind", "parent", "join_id", "from", "to", "fork_id")
	wfOptCounts = set("iteration", "branch_count", "completed_count", "attempt")
)

func set(ks ...string) map[string]bool {
	m := make(map[string]bool, len(ks))
	for _, k := range ks {
		m[k] = true
	}
	return m
}

// contentExact and contentStems recognise content under any casing or
// separator: a key is normalised to lowercase letters and digits, then
// matched exactly, by prefix or by suffix.
var (
	contentExact = set("content", "payload", "prompt", "prompts", "completion", "completions", "input", "inputs",
		"output", "outputs", "arguments", "args", "response", "responses", "request", "requests", "message",
		"messages", "text", "media", "body", "result", "results", "instructions", "query", "contents", "parts")
	contentPrefixes = []string{"prompt", "completion", "payload", "content", "arguments", "requestbody",
		"responsebody", "message", "toolresult", "toolargs", "inputtext", "outputtext", "media"}
	contentSuffixes = []string{"body", "text", "content", "payload", "prompt", "arguments", "completion", "messages"}
)

// isContentKey reports whether a key (outside the projection's own keys)
// names content.
func isContentKey(k string) bool {
	var buf [64]byte
	n, ok := normalizeASCIIKey(buf[:0], k)
	if !ok { // non-ASCII (Unicode case folding) or long: the general path
		var b strings.Builder
		b.Grow(len(k))
		for _, r := range strings.ToLower(k) {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				b.WriteRune(r)
			}
		}
		n = []byte(b.String())
	}
	if contentExact[string(n)] {
		return true
	}
	for _, p := range contentPrefixes {
		if len(n) >= len(p) && string(n[:len(p)]) == p {
			return true
		}
	}
	for _, s := range contentSuffixes {
		if len(n) >= len(s) && string(n[len(n)-len(s):]) == s {
			return true
		}
	}
	return false
}

// normalizeASCIIKey is isContentKey's allocation-free path: an ASCII key
// lowercased with everything but letters and digits removed. ok is false
// when the key is not ASCII (strings.ToLower may map it to ASCII letters,
// as with the Kelvin sign) or does not fit b.
func normalizeASCIIKey(b []byte, k string) ([]byte, bool) {
	if len(k) > cap(b) {
		return nil, false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= utf8.RuneSelf:
			return nil, false
		case c >= 'A' && c <= 'Z':
			b = append(b, c+'a'-'A')
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b = append(b, c)
		}
	}
	return b, true
}

// containsContent walks v for a content key anywhere. allowed names keys
// of the top-level object that belong to the projection.
func containsContent(v any, allowed func(path []string, k string) bool, path []string) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if !allowed(path, k) && isContentKey(k) {
				return true
			}
			if containsContent(c, allowed, append(path, k)) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if containsContent(c, allowed, path) {
				return true
			}
		}
	}
	return false
}

// projected is the result of projecting one input event.
type projected struct {
	event    map[string]any
	identity map[string]string
	tsMS     int64
	pruned   bool
}

// projector applies one content policy.
type projector struct {
	prune bool
	// dropped records that the projection left something out.
	dropped bool
}

// outside handles a field outside the projection: an error under reject,
// a note under prune.
func (p *projector) outside() error {
	if !p.prune {
		return errCode(CodeContentRejected, "field outside the metadata projection")
	}
	p.dropped = true
	return nil
}

// project decodes (bounded) and projects one record.
func project(kind string, data []byte, o Options) (*projected, error) {
	raw, err := jsonlimit.Decode(data, jsonlimit.Limits{MaxDepth: maxInputDepth, MaxBytes: min(4*o.MaxEventBytes, jsonlimit.DefaultMaxBytes)})
	if err != nil {
		code := jsonlimit.ErrorCode(err)
		if strings.HasPrefix(code, "eval_") { // a size or depth bound
			return nil, errCode(CodeInputTooLarge, "input exceeds decode bounds")
		}
		return nil, errCode(invalidCode(kind), "not valid JSON")
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, errCode(invalidCode(kind), "not an object")
	}
	p := &projector{prune: o.ContentPolicy == ContentPrune}
	var out *projected
	switch kind {
	case KindWorkflowLifecycle:
		out, err = p.workflow(obj)
	case KindObservability:
		switch intOf(obj["schema_version"]) {
		case 1:
			out, err = p.envelope(obj)
		case 2:
			out, err = p.span(obj)
		default:
			err = errCode(CodeInvalidObservability, "schema_version")
		}
	default:
		err = errCode(CodeInvalidObservability, "unknown record kind")
	}
	if err != nil {
		return nil, err
	}
	out.pruned = p.dropped
	if len(out.identity) == 0 {
		return nil, errCode(CodeIdentityRequired, "no run_id, trace_id, workflow_id or invocation_id")
	}
	return out, nil
}

func invalidCode(kind string) string {
	if kind == KindWorkflowLifecycle {
		return CodeInvalidLifecycle
	}
	return CodeInvalidObservability
}

// contentCheck rejects (or notes) content anywhere in obj, given which keys
// at which depth belong to the projection.
func (p *projector) contentCheck(obj map[string]any, allowed func(path []string, k string) bool) error {
	var path [maxInputDepth + 1]string
	if containsContent(obj, allowed, path[:0]) {
		if !p.prune {
			return errCode(CodeContentRejected, "content field")
		}
		p.dropped = true
	}
	return nil
}

func (p *projector) envelope(in map[string]any) (*projected, error) {
	allowed := func(path []string, k string) bool {
		switch len(path) {
		case 0:
			return k == "content_captured" || k == "measurements" || k == "metadata" || k == "event" ||
				k == "schema_version" || k == "timestamp_ms"
		case 1:
			return path[0] == "metadata" && (v1MetaText[k] || k == "attributes" || k == "trace_flags") ||
				path[0] == "measurements" && v1Measurements[k]
		case 2:
			return path[1] == "attributes" && (attrText[k] || usageInts[k])
		}
		return false
	}
	if err := p.contentCheck(in, allowed); err != nil {
		return nil, err
	}
	out := map[string]any{"schema_version": int64(1), "content_captured": false}
	for k, v := range in {
		switch k {
		case "schema_version":
		case "event":
			s, ok := text(v)
			if !ok || s == "" || len(s) > 256 {
				return nil, errCode(CodeInvalidObservability, "event")
			}
			out[k] = s
		case "timestamp_ms":
			n, ok := nonNegInt(v)
			if !ok {
				return nil, errCode(CodeInvalidObservability, "timestamp_ms")
			}
			out[k] = n
		case "content_captured":
			if b, ok := v.(bool); !ok || b {
				if err := p.outside(); err != nil {
					return nil, err
				}
			}
		case "measurements":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, errCode(CodeInvalidObservability, "measurements")
			}
			mm := map[string]any{}
			for mk, mv := range m {
				if n, ok := mv.(json.Number); ok && v1Measurements[mk] {
					mm[mk] = n
				}
			}
			out[k] = mm
		case "metadata":
		default:
			if err := p.outside(); err != nil {
				return nil, err
			}
		}
	}
	if _, ok := out["event"]; !ok {
		return nil, errCode(CodeInvalidObservability, "event")
	}
	ts, _ := out["timestamp_ms"].(int64)
	meta, _ := in["metadata"].(map[string]any)
	om := map[string]any{}
	id := map[string]string{}
	for k, v := range meta {
		switch {
		case v1MetaText[k]:
			s, ok := text(v)
			if !ok {
				return nil, errCode(CodeInvalidObservability, "metadata."+k)
			}
			if s != "" {
				om[k] = s
				if k == "run_id" || k == "trace_id" || k == "invocation_id" {
					id[k] = s
				}
			}
		case k == "trace_flags":
			n, ok := nonNegInt(v)
			if !ok || n > 255 {
				return nil, errCode(CodeInvalidObservability, "trace_flags")
			}
			om[k] = n
		case k == "attributes":
			a, ok := v.(map[string]any)
			if !ok && v != nil {
				return nil, errCode(CodeInvalidObservability, "attributes")
			}
			if fa := filterAttributes(a); len(fa) > 0 {
				om[k] = fa
			}
		default:
			if err := p.outside(); err != nil {
				return nil, err
			}
		}
	}
	out["metadata"] = om
	return &projected{event: out, identity: id, tsMS: ts}, nil
}

func (p *projector) span(in map[string]any) (*projected, error) {
	allowed := func(path []string, k string) bool {
		switch len(path) {
		case 0:
			return v2Text[k] || v2Ints[k] || k == "attributes"
		case 1:
			return path[0] == "attributes" && (attrText[k] || usageInts[k])
		}
		return false
	}
	if err := p.contentCheck(in, allowed); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(in))
	for k, v := range in {
		switch {
		case v2Text[k]:
			s, ok := text(v)
			if !ok {
				return nil, errCode(CodeInvalidObservability, k)
			}
			if s != "" {
				out[k] = v // the decoded string, already boxed
			}
		case v2Ints[k]:
			n, ok := nonNegInt(v)
			if !ok {
				return nil, errCode(CodeInvalidObservability, k)
			}
			out[k] = n
		case k == "attributes":
			a, ok := v.(map[string]any)
			if !ok && v != nil {
				return nil, errCode(CodeInvalidObservability, "attributes")
			}
			out[k] = filterAttributes(a)
		default:
			if err := p.outside(); err != nil {
				return nil, err
			}
		}
	}
	if out["signal"] != "span" || out["name"] == nil || out["phase"] == nil {
		return nil, errCode(CodeInvalidObservability, "span shape")
	}
	tid, _ := out["trace_id"].(string)
	if tid == "" {
		return nil, errCode(CodeInvalidObservability, "trace_id")
	}
	id := map[string]string{"trace_id": tid}
	if a, ok := out["attributes"].(map[string]any); ok {
		for _, k := range []string{"run_id", "workflow_id", "invocation_id"} {
			if s, ok := a[k].(string); ok && s != "" {
				id[k] = s
			}
		}
	}
	start, _ := out["start_time_unix_nano"].(int64)
	return &projected{event: out, identity: id, tsMS: start / 1_000_000}, nil
}

func (p *projector) workflow(in map[string]any) (*projected, error) {
	allowed := func(path []string, k string) bool {
		return len(path) == 0 && (wfRequired[k] || wfOptText[k] || wfOptCounts[k] || k == "schema_version" || k == "sequence" || k == "timestamp")
	}
	if err := p.contentCheck(in, allowed); err != nil {
		return nil, err
	}
	bad := func(f string) (*projected, error) { return nil, errCode(CodeInvalidLifecycle, f) }
	if intOf(in["schema_version"]) != 1 {
		return bad("schema_version")
	}
	out := map[string]any{"schema_version": int64(1)}
	for k := range wfRequired {
		s, ok := text(in[k])
		if !ok || s == "" || k == "type" && len(s) > 128 {
			return bad(k)
		}
		out[k] = s
	}
	seq, ok := nonNegInt(in["sequence"])
	if !ok || seq <= 0 {
		return bad("sequence")
	}
	ts, ok := nonNegInt(in["timestamp"])
	if !ok {
		return bad("timestamp")
	}
	out["sequence"], out["timestamp"] = seq, ts
	for k, v := range in {
		switch {
		case wfRequired[k] || k == "schema_version" || k == "sequence" || k == "timestamp":
		case wfOptText[k]:
			s, ok := text(v)
			if !ok {
				return bad(k)
			}
			out[k] = s
		case wfOptCounts[k]:
			n, ok := nonNegInt(v)
			if !ok {
				return bad(k)
			}
			out[k] = n
		default:
			if err := p.outside(); err != nil {
				return nil, err
			}
		}
	}
	id := map[string]string{"workflow_id": out["workflow_id"].(string), "invocation_id": out["invocation_id"].(string)}
	return &projected{event: out, identity: id, tsMS: ts}, nil
}

// filterAttributes keeps the allowlisted attributes with allowed values.
func filterAttributes(a map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		switch {
		case usageInts[k]:
			if n, ok := nonNegInt(v); ok {
				out[k] = n
			}
		case attrText[k]:
			switch x := v.(type) {
			case string:
				if len(x) <= maxTextBytes && utf8.ValidString(x) {
					out[k] = v
				}
			case bool:
				out[k] = x
			case json.Number:
				if n, err := x.Int64(); err == nil {
					out[k] = n
				}
			case []any:
				if len(x) <= maxListItems {
					l := make([]string, 0, len(x))
					for _, e := range x {
						if s, ok := e.(string); ok && len(s) <= maxTextBytes {
							l = append(l, s)
						}
					}
					if len(l) == len(x) {
						out[k] = l
					}
				}
			}
		}
	}
	return out
}

func text(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok && len(s) <= maxTextBytes && utf8.ValidString(s)
}

func nonNegInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil && i >= 0
}

func intOf(v any) int64 {
	i, _ := nonNegInt(v)
	return i
}
