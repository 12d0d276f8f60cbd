package tracenode

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/fadcedab/adk/bus"
)

// Authenticator maps a bearer token to its principal.
type Authenticator interface {
	Principal(token string) (string, bool)
}

// Identity is what a bearer token stands for: the principal (whose traces
// it reads and writes) and the eval scopes it may use.
type Identity struct {
	Principal string
	// Scopes are the eval app scopes of the principal, in file order; a
	// line without scopes= has the one scope named like the principal.
	Scopes []string
}

// HasScope reports whether scope is one of the identity's eval scopes.
func (id Identity) HasScope(scope string) bool { return slices.Contains(id.Scopes, scope) }

// Bounds of a tokens file.
const (
	MaxTokensFileBytes = 4 << 20
	MaxTokenBytes      = 4096
	// MaxScopeBytes bounds one eval scope (CONTRACTS §6: 1..256 B).
	MaxScopeBytes = 256
	// MaxScopesPerToken bounds the scopes= list of one line.
	MaxScopesPerToken = 64
)

type tokenEntry struct {
	hash [32]byte
	id   Identity
}

// Tokens is a set of bearer tokens stored as SHA-256 hashes: the one
// token file format of the trace query service, the OTLP receiver and the
// developer HTTP API. A lookup compares the presented token's hash with
// every entry in constant time, so neither the match nor its position
// shows in the timing.
type Tokens struct {
	entries []tokenEntry
}

// NewTokens builds a token set from plain token → principal pairs (tests,
// embedded use); only the hashes are kept. Each principal's one eval
// scope is its own name.
func NewTokens(plain map[string]string) *Tokens {
	t := &Tokens{}
	keys := make([]string, 0, len(plain))
	for tok := range plain {
		keys = append(keys, tok)
	}
	slices.Sort(keys)
	for _, tok := range keys {
		p := plain[tok]
		t.entries = append(t.entries, tokenEntry{hash: sha256.Sum256([]byte(tok)), id: Identity{Principal: p, Scopes: []string{p}}})
	}
	return t
}

// NewTokenIdentities builds a token set from plain token → identity pairs
// (tests, embedded use); only the hashes are kept.
func NewTokenIdentities(plain map[string]Identity) *Tokens {
	t := &Tokens{}
	keys := make([]string, 0, len(plain))
	for tok := range plain {
		keys = append(keys, tok)
	}
	slices.Sort(keys)
	for _, tok := range keys {
		id := plain[tok]
		if len(id.Scopes) == 0 {
			id.Scopes = []string{id.Principal}
		}
		t.entries = append(t.entries, tokenEntry{hash: sha256.Sum256([]byte(tok)), id: id})
	}
	return t
}

// LoadTokens reads a tokens file: one "<sha256-hex> <principal>
// [scopes=<scope>,<scope>...]" per line, '#' comments and blank lines
// ignored. Principals must be subject tokens (they name the principal's
// signal subject); scopes are 1..256 bytes of UTF-8 without commas or
// spaces. A line without scopes= has the one eval scope named like the
// principal. A hash may appear once.
func LoadTokens(path string) (*Tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tracenode: tokens file: %w", err)
	}
	if len(data) > MaxTokensFileBytes {
		return nil, errors.New("tracenode: tokens file larger than 4 MiB")
	}
	return ParseTokens(data)
}

// ParseTokens parses the content of a tokens file (see LoadTokens).
func ParseTokens(data []byte) (*Tokens, error) {
	t := &Tokens{}
	seen := map[[32]byte]bool{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		var h [32]byte
		if len(f) < 2 || len(f) > 3 || len(f[0]) != 64 {
			return nil, fmt.Errorf("tracenode: tokens file line %d: want \"<sha256-hex> <principal> [scopes=a,b]\"", i+1)
		}
		if _, err := hex.Decode(h[:], []byte(f[0])); err != nil {
			return nil, fmt.Errorf("tracenode: tokens file line %d: bad hash", i+1)
		}
		if seen[h] {
			return nil, fmt.Errorf("tracenode: tokens file line %d: hash listed twice", i+1)
		}
		seen[h] = true
		if err := bus.ValidToken(f[1]); err != nil {
			return nil, fmt.Errorf("tracenode: tokens file line %d: principal: %w", i+1, err)
		}
		id := Identity{Principal: f[1], Scopes: []string{f[1]}}
		if len(f) == 3 {
			list, ok := strings.CutPrefix(f[2], "scopes=")
			if !ok {
				return nil, fmt.Errorf("tracenode: tokens file line %d: third field must be scopes=<scope>[,<scope>]", i+1)
			}
			scopes := strings.Split(list, ",")
			if len(scopes) > MaxScopesPerToken {
				return nil, fmt.Errorf("tracenode: tokens file line %d: more than %d scopes", i+1, MaxScopesPerToken)
			}
			for _, s := range scopes {
				if s == "" || len(s) > MaxScopeBytes || !utf8.ValidString(s) {
					return nil, fmt.Errorf("tracenode: tokens file line %d: scope must be 1..%d bytes of UTF-8", i+1, MaxScopeBytes)
				}
			}
			id.Scopes = scopes
		}
		t.entries = append(t.entries, tokenEntry{hash: h, id: id})
	}
	return t, nil
}

// Lookup returns the identity of token. Every entry is compared (in
// constant time each), whatever matches.
func (t *Tokens) Lookup(token string) (Identity, bool) {
	if token == "" || len(token) > MaxTokenBytes {
		return Identity{}, false
	}
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(h[:], t.entries[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, false
	}
	return t.entries[found].id, true
}

// Principal implements Authenticator.
func (t *Tokens) Principal(token string) (string, bool) {
	id, ok := t.Lookup(token)
	return id.Principal, ok
}

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.entries) }

// HashToken returns the tokens-file hash of a bearer token.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}
