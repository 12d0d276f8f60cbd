package plugins

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// pruneExtra returns a copy of the call context's Extra with every
// secret-looking key removed at every depth (nil stays nil).
func pruneExtra(extra map[string]any) map[string]any {
	if extra == nil {
		return nil
	}
	pruned, _ := prune(extra).(map[string]any)
	return pruned
}

// keyPrefix matches the "key=" or "key: " before a value.
var keyPrefix = regexp.MustCompile(`([A-Za-z0-9_.-]+)\s*[:=]\s*`)

// bearer matches an HTTP bearer credential.
var bearer = regexp.MustCompile(`(?i)\bbearer\s+[^\s,;]+`)

// redactReason makes a halt reason safe to return and record: values of
// sensitive keys (by the shared secret-key rule) and bearer credentials are
// replaced with [REDACTED], and the result is bounded to 512 bytes of valid
// UTF-8.
func redactReason(s string) string {
	s = bearer.ReplaceAllString(s, "Bearer [REDACTED]")
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
	for _, m := range keyPrefix.FindAllStringSubmatchIndex(s, -1) {
		if m[0] < last || !isSensitiveKey(s[m[2]:m[3]]) {
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
