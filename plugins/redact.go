package plugins

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/fadcedab/adk/internal/secrets"
)

// pruneExtra returns a copy of the call context's Extra, JSON-normalised
// (values of other Go types become generic JSON values, values JSON cannot
// carry are dropped) and with every secret-looking key removed at every
// depth. nil stays nil.
func pruneExtra(extra map[string]any) map[string]any {
	if extra == nil {
		return nil
	}
	pruned, _ := secrets.Prune(normalizeJSON(extra)).(map[string]any)
	return pruned
}

// normalizeJSON rewrites anything but generic JSON data through a JSON round
// trip, so that the pruner sees struct fields as map keys.
func normalizeJSON(v any) any {
	switch x := v.(type) {
	case nil, string, bool, float64, int, int64, json.Number:
		return v
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if n := normalizeJSON(e); n != nil || e == nil {
				out[k] = n
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeJSON(e)
		}
		return out
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var g any
	if json.Unmarshal(b, &g) != nil {
		return nil
	}
	return g
}

// keyPrefix matches the "key=" or "key: " before a value. It and bearer
// are compiled on a halt's first redaction, not at every adk start.
var keyPrefix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`([A-Za-z0-9_.-]+)\s*[:=]\s*`) })

// bearer matches an HTTP bearer credential.
var bearer = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)\bbearer\s+[^\s,;]+`) })

// redactReason makes a halt reason safe to return and record: values of
// sensitive keys (by the shared secret-key rule) and bearer credentials are
// replaced with [REDACTED], and the result is bounded to 512 bytes of valid
// UTF-8.
func redactReason(s string) string {
	s = bearer().ReplaceAllString(s, "Bearer [REDACTED]")
	s = redactValues(s)
	if len(s) > maxReasonBytes {
		cut := maxReasonBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// redactValues replaces the value after every sensitive "key=" or "key: "
// (quoted, or up to the next space, comma, semicolon or ampersand).
func redactValues(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range keyPrefix().FindAllStringSubmatchIndex(s, -1) {
		if m[0] < last || !secrets.IsSensitiveKey(s[m[2]:m[3]]) {
			continue
		}
		end := m[1]
		switch {
		case end < len(s) && (s[end] == '"' || s[end] == '\''):
			if i := strings.IndexByte(s[end+1:], s[end]); i >= 0 {
				end += i + 2
			} else {
				end = len(s)
			}
		default:
			for end < len(s) && !strings.ContainsRune(" \t\n,;&", rune(s[end])) {
				end++
			}
		}
		b.WriteString(s[last:m[1]])
		b.WriteString("[REDACTED]")
		last = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
