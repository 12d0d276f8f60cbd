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
	for _, pruned := range []bool{false, true} {
		pj := &projected{event: map[string]any{"name": "x\"y", "n": int64(3), "attributes": map[string]any{"run_id": "r"}},
			identity: map[string]string{"trace_id": "t", "run_id": "r"}, tsMS: -5, pruned: pruned}
		doc := map[string]any{"cursor": Cursor(7, 2), "kind": KindObservability, "timestamp_ms": pj.tsMS, "identity": pj.identity, "event": pj.event}
		if pruned {
			doc["content_pruned"] = true
		}
		if got, want := string(appendRecord(nil, Cursor(7, 2), KindObservability, pj.tsMS, pj)), string(appendJSON(nil, doc)); got != want {
			t.Errorf("pruned=%v:\n got %s\nwant %s", pruned, got, want)
		}
	}
}
