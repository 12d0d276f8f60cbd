package tracestore

import (
	"strings"
	"testing"
)

// isContentKeyReference is the definition isContentKey's ASCII fast path
// must agree with: Unicode lowercase, keep letters and digits.
func isContentKeyReference(k string) bool {
	var b strings.Builder
	for _, r := range strings.ToLower(k) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	n := b.String()
	if contentExact[n] {
		return true
	}
	for _, p := range contentPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	for _, s := range contentSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

func TestIsContentKey_MatchesUnicodeLowercasing(t *testing.T) {
	keys := []string{"", "prompt", "PROMPT", "user_Prompt", "gen_ai.input.messages", "Request-Body", "trace_id",
		"run_id", "status", "\u212Aey", "PAYLOAD\u212A", "\u0130nput", "İNPUT", "ınput", "x.text", "tool-Args-x",
		"gen_ai.usage.input_tokens", strings.Repeat("a", 70) + "body", strings.Repeat("é", 10) + "prompt", "mes\u200bsages"}
	for _, k := range keys {
		if got, want := isContentKey(k), isContentKeyReference(k); got != want {
			t.Errorf("isContentKey(%q) = %v, want %v", k, got, want)
		}
	}
}

func TestAppendRecord_MatchesTheMapEncoding(t *testing.T) {
	for _, kind := range []string{KindObservability, KindWorkflowLifecycle} {
		for _, pruned := range []bool{false, true} {
			in := envelope("r", "t\"x", map[string]any{"measurements": map[string]any{"duration_ms": 3.50}})
			if kind == KindWorkflowLifecycle {
				in = workflowJSON("w", "i", nil)
			}
			o := Options{ContentPolicy: ContentPrune}
			o, _ = o.resolve()
			pj, err := project(kind, in, o)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := projectRef(kind, in, o)
			if err != nil {
				t.Fatal(err)
			}
			pj.pruned, ref.pruned = pruned, pruned
			doc := map[string]any{"cursor": Cursor(7, 2), "kind": kind, "timestamp_ms": ref.tsMS, "identity": ref.identity, "event": ref.event}
			if pruned {
				doc["content_pruned"] = true
			}
			if got, want := string(appendRecord(nil, Cursor(7, 2), kind, pj.tsMS, pj)), string(appendJSON(nil, doc)); got != want {
				t.Errorf("%s pruned=%v:\n got %s\nwant %s", kind, pruned, got, want)
			}
		}
	}
}
