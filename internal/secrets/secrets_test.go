package secrets

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestIsSensitiveKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		// equals
		{"API-Key", true}, {"api_key", true}, {"apiKey", true}, {"APIKEY", true},
		{"private.key", true}, {"Private Key", true}, {"signing:key", true},
		{"client_assertion", true}, {"Bearer", true}, {"cookie", true},
		{"Set-Cookie", true}, {"set-cookie", true}, {"OTP", true}, {"PIN", true}, {"p_i_n", true},
		// contains
		{"x_auth_token", true}, {"access_token", true}, {"tokens", true}, {"clientSecret", true},
		{"client_secret", true}, {"Authorization", true}, {"proxy-authorization", true},
		{"password", true}, {"db.passwd", true}, {"credentials", true}, {"aws:Credential:Id", true},
		{"gen_ai.usage.input_tokens", true}, {"SECRET", true}, {"to-ken", true},
		// not sensitive
		{"model", false}, {"pinned", false}, {"spin", false}, {"keyboard", false},
		{"key", false}, {"api", false}, {"cookies", false}, {"otp_enabled", false},
		{"passport", false}, {"author", false}, {"", false}, {"private", false},
		{"apikeys", false}, {"bearer_type", false},
	}
	for _, tt := range tests {
		if got := IsSensitiveKey(tt.key); got != tt.want {
			t.Errorf("IsSensitiveKey(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}

func TestIsSensitiveKeyExcept(t *testing.T) {
	allow := UsageCounterKeys()
	for _, k := range allow {
		if !IsSensitiveKey(k) {
			t.Errorf("%q is not sensitive, so it needs no allowlist entry", k)
		}
		if IsSensitiveKeyExcept(k, allow...) {
			t.Errorf("IsSensitiveKeyExcept(%q, usage keys) = true", k)
		}
	}
	// The allowlist is exact: a respelling of an allowed key is still pruned.
	if !IsSensitiveKeyExcept("gen_ai.usage.INPUT_TOKENS", allow...) || !IsSensitiveKeyExcept("api_key", allow...) {
		t.Error("allowlist matched more than its exact keys")
	}
}

func TestPrune(t *testing.T) {
	in := map[string]any{
		"model":    "gemini",
		"API-Key":  "sk-123",
		"pinned":   true,
		"keyboard": "qwerty",
		"config": map[string]any{
			"clientSecret": "s",
			"endpoint":     "https://x",
			"nested":       map[string]any{"x_auth_token": "t", "keep": []any{1, "two"}},
		},
		"tools": []any{
			map[string]any{"name": "a", "Authorization": "Bearer x"},
			map[string]any{"name": "b", "private.key": "k", "OTP": "123456"},
			"plain",
			[]any{map[string]any{"set-cookie": "c", "ok": 1}},
		},
		"headers": map[string]string{"Cookie": "c", "Accept": "json"},
		"multi":   map[string][]string{"Authorization": {"x"}, "Accept": {"a", "b"}},
		"list":    []string{"a"},
		"nilmap":  map[string]any(nil),
	}
	want := map[string]any{
		"model":    "gemini",
		"pinned":   true,
		"keyboard": "qwerty",
		"config": map[string]any{
			"endpoint": "https://x",
			"nested":   map[string]any{"keep": []any{1, "two"}},
		},
		"tools": []any{
			map[string]any{"name": "a"},
			map[string]any{"name": "b"},
			"plain",
			[]any{map[string]any{"ok": 1}},
		},
		"headers": map[string]string{"Accept": "json"},
		"multi":   map[string][]string{"Accept": {"a", "b"}},
		"list":    []string{"a"},
		"nilmap":  map[string]any(nil),
	}
	before := deepCopy(in)
	got := Prune(in)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Prune =\n%#v\nwant\n%#v", got, want)
	}
	if !reflect.DeepEqual(in, before) {
		t.Fatal("Prune mutated its input")
	}
	// The copy shares nothing mutable with the input.
	got.(map[string]any)["config"].(map[string]any)["endpoint"] = "changed"
	got.(map[string]any)["list"].([]string)[0] = "changed"
	if !reflect.DeepEqual(in, before) {
		t.Fatal("Prune's result aliases its input")
	}
	for _, scalar := range []any{nil, "s", 1.5, true, struct{ Token string }{"t"}} {
		if got := Prune(scalar); !reflect.DeepEqual(got, scalar) {
			t.Errorf("Prune(%#v) = %#v", scalar, got)
		}
	}
}

func TestPruner_AllowKeys(t *testing.T) {
	attrs := map[string]any{"gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 3, "api_token": "x"}
	got := NewPruner(UsageCounterKeys()...).Prune(attrs)
	want := map[string]any{"gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 3}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	if got := Prune(attrs); len(got.(map[string]any)) != 0 {
		t.Fatalf("plain Prune kept %#v", got)
	}
}

func TestPrune_Cycle(t *testing.T) {
	m := map[string]any{"a": 1}
	m["self"] = m
	l := []any{1}
	l = append(l, nil)
	l[1] = l
	// Must terminate without overflowing the stack.
	_ = Prune(m)
	_ = Prune(l)
	_ = NewRedactor("secret-value").Value(m)
}

func TestRedactor_String(t *testing.T) {
	r := NewRedactor("sk-live-123456", "", "abc", "abcdef", "defghi", "sk-live-123456", "tok_ABCD")
	tests := []struct{ in, want string }{
		{"no secrets here", "no secrets here"},
		{"key=sk-live-123456;", "key=[REDACTED];"},
		{"sk-live-123456sk-live-123456", "[REDACTED]"},
		{"Bearer tok_ABCD and tok_ABCD", "Bearer [REDACTED] and [REDACTED]"},
		{"xabcdefghiy", "x[REDACTED]y"},          // overlapping secrets redact as one run
		{"abc is too short", "abc is too short"}, // under MinSecretLen: ignored
		{"", ""},
		{"\u00e9tok_ABCD\u00e9", "\u00e9[REDACTED]\u00e9"},
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var nilR *Redactor
	if nilR.String("sk-live-123456") != "sk-live-123456" {
		t.Error("nil Redactor changed a string")
	}
	if got := NewRedactor("aaaa").String(strings.Repeat("a", 10)); got != Redacted {
		t.Errorf("self-overlapping secret: %q", got)
	}
}

func TestRedactor_Value(t *testing.T) {
	r := NewRedactor("hunter2-xyz")
	in := map[string]any{
		"password":    "hunter2-xyz",
		"note":        "the password is hunter2-xyz",
		"list":        []any{"hunter2-xyz", map[string]any{"msg": "x hunter2-xyz", "token": "t"}, 7},
		"headers":     map[string]string{"X-Debug": "hunter2-xyz"},
		"hunter2-xyz": "keys are pruned by rule, not rewritten",
	}
	before := deepCopy(in)
	want := map[string]any{
		"note":        "the password is [REDACTED]",
		"list":        []any{"[REDACTED]", map[string]any{"msg": "x [REDACTED]"}, 7},
		"headers":     map[string]string{"X-Debug": "[REDACTED]"},
		"hunter2-xyz": "keys are pruned by rule, not rewritten",
	}
	if got := r.Value(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("Value =\n%#v\nwant\n%#v", got, want)
	}
	if !reflect.DeepEqual(in, before) {
		t.Fatal("Value mutated its input")
	}
	if got := r.Value("a hunter2-xyz"); got != "a [REDACTED]" {
		t.Fatalf("Value(string) = %#v", got)
	}
	usage := map[string]any{"gen_ai.usage.input_tokens": 5, "api_key": "k"}
	got := r.WithAllowKeys(UsageCounterKeys()...).Value(usage)
	if !reflect.DeepEqual(got, map[string]any{"gen_ai.usage.input_tokens": 5}) {
		t.Fatalf("WithAllowKeys Value = %#v", got)
	}
	var nilR *Redactor
	if got := nilR.Value(map[string]any{"token": "x", "a": "b"}); !reflect.DeepEqual(got, map[string]any{"a": "b"}) {
		t.Fatalf("nil Redactor Value = %#v", got)
	}
}

func TestSecretsFromEnv(t *testing.T) {
	t.Setenv("ADK_TEST_KEY_A", "value-a")
	t.Setenv("ADK_TEST_KEY_EMPTY", "")
	got := SecretsFromEnv("ADK_TEST_KEY_A", "ADK_TEST_KEY_EMPTY", "ADK_TEST_KEY_UNSET")
	if !reflect.DeepEqual(got, []string{"value-a"}) {
		t.Fatalf("SecretsFromEnv = %#v", got)
	}
	if NewRedactor(got...).String("x value-a") != "x [REDACTED]" {
		t.Fatal("Redactor from env does not redact")
	}
}

// deepCopy copies the generic values the tests use, independently of Prune.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := map[string]any{}
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	case map[string]string:
		out := map[string]string{}
		for k, e := range v {
			out[k] = e
		}
		return out
	case map[string][]string:
		out := map[string][]string{}
		for k, e := range v {
			out[k] = append([]string(nil), e...)
		}
		return out
	case []string:
		return append([]string(nil), v...)
	default:
		return v
	}
}

// TestIsSensitiveKey_ASCIIPathAgreesWithNormalize checks the stack-buffer
// path against the rule applied to normalize's output, for keys of every
// shape: separators, case, non-ASCII, and longer than the buffer.
func TestIsSensitiveKey_ASCIIPathAgreesWithNormalize(t *testing.T) {
	keys := []string{"", "api_key", "API-Key", "apiKey", "x.Token:y", "expected_count", "runtime_latency_ms",
		"gen_ai.usage.input_tokens", "Set-Cookie", "PIN", "pin_code", "ŞECRET", "pässword", "K" + strings.Repeat("a", 70) + "_secret",
		strings.Repeat("b", 64), "Authorization", "normalization", "otp", "o t p", "İ", "\xff"}
	for _, k := range keys {
		want := exactOrContained(normalize(k))
		if got := IsSensitiveKey(k); got != want {
			t.Errorf("IsSensitiveKey(%q) = %v, want %v", k, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { IsSensitiveKey("runtime_latency_ms") }); n != 0 {
		t.Errorf("IsSensitiveKey allocates %v times for a short ASCII key, want 0", n)
	}
}

// TestIsSensitiveKey_KnownKeysAreTheRules holds the table of known keys
// to the rule as the contract states it, and shows the table is used.
func TestIsSensitiveKey_KnownKeysAreTheRules(t *testing.T) {
	if len(knownKeys) < 20 || !knownKeys["input_tokens"] || knownKeys["invocation_id"] {
		t.Fatalf("knownKeys = %v: not the rule's verdicts on adk's sample keys", knownKeys)
	}
	for k, v := range knownKeys {
		if want := exactOrContained(normalize(k)); v != want || IsSensitiveKey(k) != want {
			t.Errorf("known key %q: table %v, IsSensitiveKey %v, the rule %v", k, v, IsSensitiveKey(k), want)
		}
	}
}

// exactOrContained is the rule as the contract states it, on a
// normalized key.
func exactOrContained(n string) bool {
	if exactKeys[n] {
		return true
	}
	for _, c := range containedKeys {
		if strings.Contains(n, c) {
			return true
		}
	}
	return false
}

// TestPruneShared_EqualsPrune holds PruneShared to Prune's result on
// values with and without secrets at every depth, checks that it never
// modifies its input, returns a value without secrets as it is, and copies
// only the path to what it removes.
func TestPruneShared_EqualsPrune(t *testing.T) {
	usage := map[string]any{"input_tokens": int64(3), "output_tokens": int64(1)}
	clean := map[string]any{
		"id": "evt-1", "final": true, "n": 1.5,
		"content": map[string]any{"type": "text", "text": "ok", "parts": []any{"a", map[string]any{"b": nil}}},
		"list":    []any{[]any{}, map[string]any{}},
		"headers": map[string]string{"Accept": "json"},
		"multi":   map[string][]string{"Accept": {"json"}},
		"strs":    []string{"x"},
	}
	withSecret := deepCopy(clean).(map[string]any)
	withSecret["content"].(map[string]any)["parts"].([]any)[1].(map[string]any)["api_key"] = "sk-1"
	withSecret["headers"] = map[string]string{"Authorization": "Bearer x", "Accept": "json"}
	withSecret["multi"] = map[string][]string{"Cookie": {"c"}}
	deep := any("leaf")
	for range maxDepth + 5 {
		deep = []any{deep}
	}
	cyclic := map[string]any{"a": 1}
	cyclic["self"] = cyclic
	tests := []struct {
		name      string
		p         *Pruner
		in        any
		unchanged bool // PruneShared returns in itself
	}{
		{"clean object", nil, clean, true},
		{"clean array", nil, []any{clean, "x", 2.0}, true},
		{"secret deep in an array", nil, withSecret, false},
		{"secret at the top", nil, map[string]any{"token": "t", "keep": clean}, false},
		{"secret in an array's object", nil, []any{"x", map[string]any{"password": "p"}, clean}, false},
		{"usage pruned without allowlist", nil, map[string]any{"usage": usage}, false},
		{"usage kept with allowlist", NewPruner("input_tokens", "output_tokens"), map[string]any{"usage": usage}, true},
		{"deeper than the bound", nil, deep, false},
		{"cycle", nil, cyclic, false},
		{"nil object", nil, map[string]any(nil), true},
		{"scalar", nil, "s", true},
		{"nil", nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before any
			if tt.name != "cycle" {
				before = deepCopy(tt.in)
			}
			got := tt.p.PruneShared(tt.in)
			if want := tt.p.Prune(tt.in); !reflect.DeepEqual(got, want) {
				t.Fatalf("PruneShared =\n%#v\nPrune =\n%#v", got, want)
			}
			if tt.name != "cycle" && !reflect.DeepEqual(tt.in, before) {
				t.Fatal("PruneShared modified its input")
			}
			if same := sameValue(got, tt.in); same != tt.unchanged {
				t.Fatalf("PruneShared returned its input itself: %v, want %v", same, tt.unchanged)
			}
		})
	}
	// What the removal does not touch is shared, not copied.
	got := PruneShared(withSecret).(map[string]any)
	if !sameValue(got["strs"], withSecret["strs"]) || !sameValue(got["list"], withSecret["list"]) {
		t.Fatal("an untouched subtree was copied")
	}
	if sameValue(got["content"], withSecret["content"]) {
		t.Fatal("the path to a removed entry was not copied")
	}
}

// sameValue reports whether a and b are the same map or slice (or equal
// scalars).
func sameValue(a, b any) bool {
	ra, rb := reflect.ValueOf(a), reflect.ValueOf(b)
	if !ra.IsValid() || !rb.IsValid() {
		return ra.IsValid() == rb.IsValid()
	}
	switch ra.Kind() {
	case reflect.Map, reflect.Slice:
		return rb.Kind() == ra.Kind() && ra.Pointer() == rb.Pointer() && ra.Len() == rb.Len()
	}
	return a == b
}

// TestPruneShared_Allocs holds PruneShared of a value without secrets to
// no allocation at all (the eval engine prunes every captured event).
func TestPruneShared_Allocs(t *testing.T) {
	ev := map[string]any{"id": "evt-1", "author": "bench", "final": true,
		"content": map[string]any{"type": "text", "role": "model", "text": "ok"}}
	if n := testing.AllocsPerRun(100, func() { _ = PruneShared(ev) }); n != 0 {
		t.Fatalf("PruneShared of a clean event: %v allocations, want 0", n)
	}
}

// BenchmarkPruneShared_Sample is what an eval sample against the openai
// fake prunes: its captured event, its criterion's metadata and its
// turn's adapter metadata (evalcore's turnResult and metricResult).
func BenchmarkPruneShared_Sample(b *testing.B) {
	ev := map[string]any{"id": "evt-2", "invocation_id": "inv-1", "author": "bench", "final": true,
		"content": map[string]any{"role": "model", "text": "ok", "type": "text"}}
	meta := map[string]any{"criterion": "exact_response", "expected_count": 1, "matched_count": 1, "normalization": "exact"}
	am := map[string]any{"invocation_id": "inv-1", "usage": map[string]any{"input_tokens": 12, "output_tokens": 1}}
	p := NewPruner("input_tokens", "output_tokens")
	b.ReportAllocs()
	for b.Loop() {
		PruneShared(ev)
		PruneShared(meta)
		p.PruneShared(am)
	}
}
