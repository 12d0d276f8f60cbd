package secrets

import (
	"bytes"
	"strings"
)

// exactKeys are sensitive when the normalized key equals one of them.
var exactKeys = map[string]bool{
	"apikey": true, "privatekey": true, "signingkey": true, "clientassertion": true,
	"bearer": true, "cookie": true, "setcookie": true, "otp": true, "pin": true,
}

// containedKeys are sensitive when the normalized key contains one of them.
var containedKeys = []string{"token", "credential", "authorization", "password", "passwd", "secret"}

// normalize lowercases k and removes the separators _ - space . and :, so
// API-Key, api_key and apiKey all become "apikey".
func normalize(k string) string {
	k = strings.ToLower(k)
	if !strings.ContainsAny(k, "_- .:") {
		return k
	}
	var b strings.Builder
	b.Grow(len(k))
	for i := 0; i < len(k); i++ {
		switch c := k[i]; c {
		case '_', '-', ' ', '.', ':':
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// IsSensitiveKey reports whether a map key names a secret, by the contract's
// rule: the key is lowercased and the separators _ - space . : removed; it is
// sensitive if it then equals apikey, privatekey, signingkey,
// clientassertion, bearer, cookie, setcookie, otp or pin, or contains token,
// credential, authorization, password, passwd or secret.
//
// The rule is deliberately broad: gen_ai.usage.input_tokens contains "token"
// and is sensitive. Callers that must keep such keys (the span boundary's
// integer usage counters) use IsSensitiveKeyExcept or a Pruner with an
// allowlist.
func IsSensitiveKey(k string) bool {
	if v, ok := knownKeys[k]; ok {
		return v
	}
	return sensitiveByRule(k)
}

// knownKeys holds the rule's verdict on the keys adk's own values carry
// in every eval sample (a captured event's, a turn's adapter metadata,
// the built-in criteria's metadata), which pruning checks on every
// sample: one map lookup instead of the rule's normalization and its
// seven comparisons. The verdicts are the rule's, taken at init.
var knownKeys = func() map[string]bool {
	keys := []string{
		// agentadapter's event objects and their content.
		"id", "invocation_id", "author", "final", "content", "transfer_to_agent",
		"type", "role", "text", "workflow", "calls", "name", "args", "call_id", "result", "error",
		// A turn's adapter metadata, its usage counters.
		"usage", "runtime_latency_ms", "input_tokens", "output_tokens", "prompt_tokens",
		"completion_tokens", "total_tokens", "reasoning_tokens",
		// The built-in criteria's metadata.
		"criterion", "expected_count", "matched_count", "normalization",
	}
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = sensitiveByRule(k)
	}
	return m
}()

// sensitiveByRule is IsSensitiveKey without its table of known keys.
func sensitiveByRule(k string) bool {
	// An ASCII key short enough (all of a run's metadata keys) is
	// normalized into a stack buffer: the rule runs on every key of every
	// sample's metadata, and normalize allocates for any key with a
	// separator (expected_count, runtime_latency_ms, ...).
	var buf [64]byte
	if n, ok := normalizeASCII(buf[:0], k); ok {
		return sensitiveNormalized(n)
	}
	return sensitiveNormalized([]byte(normalize(k)))
}

// sensitiveNormalized applies the rule to a normalized key.
func sensitiveNormalized(n []byte) bool {
	if exactKeys[string(n)] {
		return true
	}
	for _, c := range containedKeyBytes {
		if bytes.Contains(n, c) {
			return true
		}
	}
	return false
}

// containedKeyBytes is containedKeys as byte slices, made once.
var containedKeyBytes = func() [][]byte {
	b := make([][]byte, len(containedKeys))
	for i, c := range containedKeys {
		b[i] = []byte(c)
	}
	return b
}()

// normalizeASCII appends normalize(k) to dst when k is ASCII and fits
// dst's capacity; ok is false otherwise (strings.ToLower's Unicode rules
// are normalize's to apply).
func normalizeASCII(dst []byte, k string) ([]byte, bool) {
	if len(k) > cap(dst) {
		return nil, false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 0x80:
			return nil, false
		case c == '_', c == '-', c == ' ', c == '.', c == ':':
		case 'A' <= c && c <= 'Z':
			dst = append(dst, c+'a'-'A')
		default:
			dst = append(dst, c)
		}
	}
	return dst, true
}

// IsSensitiveKeyExcept is IsSensitiveKey with an allowlist: a key equal
// (exactly, case and separators included) to one of allow is never
// sensitive.
func IsSensitiveKeyExcept(k string, allow ...string) bool {
	for _, a := range allow {
		if k == a {
			return false
		}
	}
	return IsSensitiveKey(k)
}

// UsageCounterKeys returns the gen-ai usage counter attribute keys, which
// the sensitive-key rule matches ("token") but which are integer counters
// the span boundary keeps. It returns a new slice on every call.
func UsageCounterKeys() []string {
	return []string{
		"gen_ai.usage.input_tokens",
		"gen_ai.usage.output_tokens",
		"gen_ai.usage.cache_read.input_tokens",
		"gen_ai.usage.reasoning_tokens",
	}
}

// maxDepth bounds the recursion of Prune and Redactor.Value. Values deeper
// than this (which bounded JSON never produces, but a cyclic Go value would)
// are replaced by nil rather than risk a stack overflow or leak a secret.
const maxDepth = 1000

// Pruner removes sensitive entries, keeping the keys of an allowlist.
// The zero value prunes by IsSensitiveKey alone.
type Pruner struct {
	allow map[string]bool
}

// NewPruner returns a Pruner that keeps keys exactly equal to one of allow
// even if they match the sensitive-key rule.
func NewPruner(allow ...string) *Pruner {
	p := &Pruner{allow: make(map[string]bool, len(allow))}
	for _, a := range allow {
		p.allow[a] = true
	}
	return p
}

// Sensitive reports whether p removes the key k.
func (p *Pruner) Sensitive(k string) bool {
	if p != nil && p.allow[k] {
		return false
	}
	return IsSensitiveKey(k)
}

// Prune returns a deep copy of v with every sensitive map entry removed, at
// any depth, through map[string]any, []any, map[string]string, []string and
// map[string][]string. Other values (strings, numbers, bools, nil, and any
// type it does not know) are returned as they are; convert structs to
// generic values first. v is never modified.
func Prune(v any) any { return (*Pruner)(nil).Prune(v) }

// Prune is the package-level Prune with p's allowlist.
func (p *Pruner) Prune(v any) any { return p.walk(v, nil, 0) }

// walk copies v, dropping sensitive entries and, when redact is non-nil,
// passing every string value through it.
func (p *Pruner) walk(v any, redact func(string) string, depth int) any {
	if depth > maxDepth {
		return nil
	}
	str := func(s string) string {
		if redact == nil {
			return s
		}
		return redact(s)
	}
	boxed := v
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			if !p.Sensitive(k) {
				out[k] = p.walk(e, redact, depth+1)
			}
		}
		return out
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = p.walk(e, redact, depth+1)
		}
		return out
	case map[string]string:
		if v == nil {
			return v
		}
		out := make(map[string]string, len(v))
		for k, e := range v {
			if !p.Sensitive(k) {
				out[k] = str(e)
			}
		}
		return out
	case map[string][]string:
		if v == nil {
			return v
		}
		out := make(map[string][]string, len(v))
		for k, e := range v {
			if !p.Sensitive(k) {
				out[k] = copyStrings(e, str)
			}
		}
		return out
	case []string:
		return copyStrings(v, str)
	case string:
		if redact == nil {
			return boxed // as it is: boxing the string again allocates
		}
		return redact(v)
	default:
		return v
	}
}

// PruneShared is Prune without the copies Prune would make of what it
// keeps unchanged: it returns v itself when v holds no sensitive entry (and
// nothing deeper than Prune's bound), else a copy of the maps and slices on
// the way to what it removes, sharing every subtree it keeps as it is. Its
// result is equal to Prune's. The caller must treat v and the result as
// read-only from then on, since they may share parts. v is never modified.
//
// It is for values that are built once and only read afterwards (an eval
// sample's captured events, which are pruned once per sample and almost
// never hold a secret): Prune's copy of them was most of their memory.
func (p *Pruner) PruneShared(v any) any {
	out, _ := p.shared(v, 0)
	return out
}

// PruneShared is the package-level PruneShared, without an allowlist.
func PruneShared(v any) any { return (*Pruner)(nil).PruneShared(v) }

// shared is PruneShared's walk; changed reports that out is not v.
func (p *Pruner) shared(v any, depth int) (out any, changed bool) {
	if depth > maxDepth {
		return nil, v != nil
	}
	switch v := v.(type) {
	case map[string]any:
		var cp map[string]any // nil until the first change
		for k, e := range v {
			if p.Sensitive(k) {
				if cp == nil {
					cp = cloneMap(v)
				}
				delete(cp, k)
				continue
			}
			ne, ch := p.shared(e, depth+1)
			if !ch {
				continue
			}
			if cp == nil {
				cp = cloneMap(v)
			}
			cp[k] = ne
		}
		if cp == nil {
			return v, false
		}
		return cp, true
	case []any:
		var cp []any
		for i, e := range v {
			ne, ch := p.shared(e, depth+1)
			if !ch {
				continue
			}
			if cp == nil {
				cp = append(make([]any, 0, len(v)), v...)
			}
			cp[i] = ne
		}
		if cp == nil {
			return v, false
		}
		return cp, true
	case map[string]string:
		for k := range v {
			if p.Sensitive(k) {
				return p.walk(v, nil, depth), true
			}
		}
		return v, false
	case map[string][]string:
		for k := range v {
			if p.Sensitive(k) {
				return p.walk(v, nil, depth), true
			}
		}
		return v, false
	}
	// Strings, []string and every other value: Prune returns them as
	// they are, or an equal copy ([]string).
	return v, false
}

// cloneMap copies m's entries into a map sized for them. Entries that
// PruneShared then finds sensitive are deleted from the copy; entries not
// yet visited are overwritten as they are.
func cloneMap(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, e := range m {
		c[k] = e
	}
	return c
}

func copyStrings(v []string, str func(string) string) []string {
	if v == nil {
		return nil
	}
	out := make([]string, len(v))
	for i, e := range v {
		out[i] = str(e)
	}
	return out
}
