package secrets

import (
	"os"
	"slices"
	"strings"
)

// Redacted replaces every secret value a Redactor finds.
const Redacted = "[REDACTED]"

// MinSecretLen is the shortest value a Redactor redacts. Shorter values
// ("", "1", "yes") would redact ordinary text everywhere, so they are
// ignored; a secret that short offers no protection anyway.
const MinSecretLen = 4

// Redactor replaces known secret values (API keys read from the
// environment, bearer tokens from configuration) wherever they appear in
// strings. It is safe for concurrent use. A nil *Redactor redacts nothing
// but still prunes in Value.
type Redactor struct {
	secrets []string // unique, at least MinSecretLen bytes, longest first
	pruner  *Pruner
}

// NewRedactor returns a Redactor for the given secret values. Values shorter
// than MinSecretLen bytes are ignored and duplicates are dropped.
func NewRedactor(secrets ...string) *Redactor {
	var keep []string
	for _, s := range secrets {
		if len(s) >= MinSecretLen && !slices.Contains(keep, s) {
			keep = append(keep, s)
		}
	}
	// Longest first, then bytewise, so behaviour does not depend on the
	// order the caller listed them in.
	slices.SortFunc(keep, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return &Redactor{secrets: keep}
}

// WithAllowKeys returns a copy of r whose Value keeps map keys exactly equal
// to one of allow (see IsSensitiveKeyExcept).
func (r *Redactor) WithAllowKeys(allow ...string) *Redactor {
	out := &Redactor{pruner: NewPruner(allow...)}
	if r != nil {
		out.secrets = r.secrets
	}
	return out
}

// String returns s with every occurrence of every secret replaced by
// [REDACTED]. Occurrences that overlap or touch are replaced as one run, so
// no part of any secret survives.
func (r *Redactor) String(s string) string {
	if r == nil || len(r.secrets) == 0 || len(s) < MinSecretLen {
		return s
	}
	// Mark every byte covered by some occurrence, then emit the unmarked
	// bytes and one marker per covered run.
	var covered []bool
	for _, sec := range r.secrets {
		for off := 0; off+len(sec) <= len(s); {
			i := strings.Index(s[off:], sec)
			if i < 0 {
				break
			}
			if covered == nil {
				covered = make([]bool, len(s))
			}
			start := off + i
			for j := start; j < start+len(sec); j++ {
				covered[j] = true
			}
			off = start + 1
		}
	}
	if covered == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if !covered[i] {
			j := i
			for j < len(s) && !covered[j] {
				j++
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		for i < len(s) && covered[i] {
			i++
		}
		b.WriteString(Redacted)
	}
	return b.String()
}

// Value returns a deep copy of v pruned like Prune (with r's allowed keys)
// and with every string value passed through String. Map keys are pruned
// but not rewritten: redacting a key could merge two entries.
func (r *Redactor) Value(v any) any {
	var p *Pruner
	if r != nil {
		p = r.pruner
	}
	return p.walk(v, r.String, 0)
}

// SecretsFromEnv returns the non-empty values of the named environment
// variables, in order, for building a Redactor from api_key_env settings.
func SecretsFromEnv(names ...string) []string {
	var out []string
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			out = append(out, v)
		}
	}
	return out
}
