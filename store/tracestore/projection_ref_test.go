package tracestore

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// This is the projection as it was before it decoded straight into the
// closed projection: jsonlimit.Decode into map[string]any, then project the
// maps. It is kept as the reference the tape projection must agree with
// (FuzzProjectMatchesReference); map iteration order makes the code of a
// record with several faults vary here, which the fuzz target allows.

// containsContent walks v for a content key anywhere. allowed names keys
// of the top-level object that belong to the projection.
func refContainsContent(v any, allowed func(path []string, k string) bool, path []string) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if !allowed(path, k) && isContentKey(k) {
				return true
			}
			if refContainsContent(c, allowed, append(path, k)) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if refContainsContent(c, allowed, path) {
				return true
			}
		}
	}
	return false
}

// projected is the result of projecting one input event.
type refProjected struct {
	event    map[string]any
	identity map[string]string
	tsMS     int64
	pruned   bool
}

// projector applies one content policy.
type refProjector struct {
	prune bool
	// dropped records that the projection left something out.
	dropped bool
}

// outside handles a field outside the projection: an error under reject,
// a note under prune.
func (p *refProjector) outside() error {
	if !p.prune {
		return errCode(CodeContentRejected, "field outside the metadata projection")
	}
	p.dropped = true
	return nil
}

// project decodes (bounded) and projects one record.
func projectRef(kind string, data []byte, o Options) (*refProjected, error) {
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
	p := &refProjector{prune: o.ContentPolicy == ContentPrune}
	var out *refProjected
	switch kind {
	case KindWorkflowLifecycle:
		out, err = p.workflow(obj)
	case KindObservability:
		switch refIntOf(obj["schema_version"]) {
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

// contentCheck rejects (or notes) content anywhere in obj, given which keys
// at which depth belong to the projection.
func (p *refProjector) contentCheck(obj map[string]any, allowed func(path []string, k string) bool) error {
	var path [maxInputDepth + 1]string
	if refContainsContent(obj, allowed, path[:0]) {
		if !p.prune {
			return errCode(CodeContentRejected, "content field")
		}
		p.dropped = true
	}
	return nil
}

func (p *refProjector) envelope(in map[string]any) (*refProjected, error) {
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
			s, ok := refText(v)
			if !ok || s == "" || len(s) > 256 {
				return nil, errCode(CodeInvalidObservability, "event")
			}
			out[k] = s
		case "timestamp_ms":
			n, ok := refNonNegInt(v)
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
			s, ok := refText(v)
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
			n, ok := refNonNegInt(v)
			if !ok || n > 255 {
				return nil, errCode(CodeInvalidObservability, "trace_flags")
			}
			om[k] = n
		case k == "attributes":
			a, ok := v.(map[string]any)
			if !ok && v != nil {
				return nil, errCode(CodeInvalidObservability, "attributes")
			}
			if fa := refFilterAttributes(a); len(fa) > 0 {
				om[k] = fa
			}
		default:
			if err := p.outside(); err != nil {
				return nil, err
			}
		}
	}
	out["metadata"] = om
	return &refProjected{event: out, identity: id, tsMS: ts}, nil
}

func (p *refProjector) span(in map[string]any) (*refProjected, error) {
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
			s, ok := refText(v)
			if !ok {
				return nil, errCode(CodeInvalidObservability, k)
			}
			if s != "" {
				out[k] = v // the decoded string, already boxed
			}
		case v2Ints[k]:
			n, ok := refNonNegInt(v)
			if !ok {
				return nil, errCode(CodeInvalidObservability, k)
			}
			out[k] = n
		case k == "attributes":
			a, ok := v.(map[string]any)
			if !ok && v != nil {
				return nil, errCode(CodeInvalidObservability, "attributes")
			}
			out[k] = refFilterAttributes(a)
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
	return &refProjected{event: out, identity: id, tsMS: start / 1_000_000}, nil
}

func (p *refProjector) workflow(in map[string]any) (*refProjected, error) {
	allowed := func(path []string, k string) bool {
		return len(path) == 0 && (wfRequired[k] || wfOptText[k] || wfOptCounts[k] || k == "schema_version" || k == "sequence" || k == "timestamp")
	}
	if err := p.contentCheck(in, allowed); err != nil {
		return nil, err
	}
	bad := func(f string) (*refProjected, error) { return nil, errCode(CodeInvalidLifecycle, f) }
	if refIntOf(in["schema_version"]) != 1 {
		return bad("schema_version")
	}
	out := map[string]any{"schema_version": int64(1)}
	for k := range wfRequired {
		s, ok := refText(in[k])
		if !ok || s == "" || k == "type" && len(s) > 128 {
			return bad(k)
		}
		out[k] = s
	}
	seq, ok := refNonNegInt(in["sequence"])
	if !ok || seq <= 0 {
		return bad("sequence")
	}
	ts, ok := refNonNegInt(in["timestamp"])
	if !ok {
		return bad("timestamp")
	}
	out["sequence"], out["timestamp"] = seq, ts
	for k, v := range in {
		switch {
		case wfRequired[k] || k == "schema_version" || k == "sequence" || k == "timestamp":
		case wfOptText[k]:
			s, ok := refText(v)
			if !ok {
				return bad(k)
			}
			out[k] = s
		case wfOptCounts[k]:
			n, ok := refNonNegInt(v)
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
	return &refProjected{event: out, identity: id, tsMS: ts}, nil
}

// filterAttributes keeps the allowlisted attributes with allowed values.
func refFilterAttributes(a map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		switch {
		case usageInts[k]:
			if n, ok := refNonNegInt(v); ok {
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

func refText(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok && len(s) <= maxTextBytes && utf8.ValidString(s)
}

func refNonNegInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil && i >= 0
}

func refIntOf(v any) int64 {
	i, _ := refNonNegInt(v)
	return i
}
