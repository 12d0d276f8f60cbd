package plugins

import "strings"

// TEMPORARY: internal/secrets is being written concurrently; these mirror its
// announced API (Prune, IsSensitiveKey) and the contract's rule until it lands.

// isSensitiveKey: lowercase, drop separators "_- .:", then an exact match of
// the short names or a substring match of the long ones.
func isSensitiveKey(k string) bool {
	k = strings.ToLower(k)
	k = strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', ' ', '.', ':':
			return -1
		}
		return r
	}, k)
	switch k {
	case "apikey", "privatekey", "signingkey", "clientassertion", "bearer", "cookie", "setcookie", "otp", "pin":
		return true
	}
	for _, s := range []string{"token", "credential", "authorization", "password", "passwd", "secret"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// prune removes sensitive map entries recursively from JSON-like data.
func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			if !isSensitiveKey(k) {
				c[k] = prune(e)
			}
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = prune(e)
		}
		return c
	}
	return v
}
