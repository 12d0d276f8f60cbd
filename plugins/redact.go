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

// keyValue matches "key=value" and "key: value" pairs, with the value quoted
// or running to the next separator.
var keyValue = regexp.MustCompile(`([A-Za-z0-9_.:-]+)(\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&]+)`)

// bearer matches an HTTP bearer credential.
var bearer = regexp.MustCompile(`(?i)\bbearer\s+[^\s,;]+`)

// redactReason makes a halt reason safe to return and record: values of
// sensitive keys (by the shared secret-key rule) and bearer credentials are
// replaced with [REDACTED], and the result is bounded to 512 bytes of valid
// UTF-8.
func redactReason(s string) string {
	s = bearer.ReplaceAllString(s, "Bearer [REDACTED]")
	s = keyValue.ReplaceAllStringFunc(s, func(m string) string {
		sub := keyValue.FindStringSubmatch(m)
		if isSensitiveKey(sub[1]) {
			return sub[1] + sub[2] + "[REDACTED]"
		}
		return m
	})
	if len(s) > maxReasonBytes {
		cut := maxReasonBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
