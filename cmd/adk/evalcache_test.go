package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/evalengine/respcache"
)

// TestEvalRun_ResponseCache: a cached re-run (200 calls here; `make
// bench-eval` times 1,000) makes no provider call and gives the same
// result (apart from timings and the cache counts); the modes do what they
// say; a damaged cache directory is a typed error or a miss, never a wrong
// answer.
func TestEvalRun_ResponseCache(t *testing.T) {
	t.Parallel()
	const cases = 200
	fake := newFakeOpenAI(t)
	dir := t.TempDir()
	writeFile(t, dir, "set.json", echoSet(cases))
	writeFile(t, dir, "agent.json", `{"schema_version":1,"name":"a","model":{"provider":"openai","model":"m","base_url":"`+fake.srv.URL+`","max_attempts":1}}`)
	args := []string{"eval", "run", "--config", "agent.json", "--eval-set", "set.json", "--concurrency", "32", "--cache", "cache"}

	r := runADK(t, dir, nil, append(args, "--output", "cold.json")...)
	if r.code != exitOK {
		t.Fatalf("cold run: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, total, _ := fake.snapshot(); total != cases {
		t.Fatalf("cold run made %d calls, want %d", total, cases)
	}
	fake.reset(0)
	start := time.Now()
	r = runADK(t, dir, nil, append(args, "--output", "warm.json")...)
	t.Logf("cached re-run of %d calls: %v wall through the binary (race=%v; measured, not asserted)", cases, time.Since(start), raceEnabled)
	if r.code != exitOK {
		t.Fatalf("cached run: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, total, _ := fake.snapshot(); total != 0 {
		t.Fatalf("cached run made %d provider calls, want 0", total)
	}
	cold, warm := cacheMeta(t, filepath.Join(dir, "cold.json")), cacheMeta(t, filepath.Join(dir, "warm.json"))
	if cold["hits"] != "0" || cold["misses"] != "200" || cold["writes"] != "200" || warm["hits"] != "200" || warm["misses"] != "0" || warm["mode"] != "readwrite" {
		t.Fatalf("cache metadata cold %v warm %v", cold, warm)
	}
	if a, b := withoutCacheMeta(t, filepath.Join(dir, "cold.json")), withoutCacheMeta(t, filepath.Join(dir, "warm.json")); a != b {
		t.Fatalf("the cached run's result differs: %s", firstDiff(a, b))
	}
	// The Markdown report counts the hits.
	r = runADK(t, dir, nil, append(args, "--format", "markdown")...)
	if !strings.Contains(r.stdout, "Response cache (readwrite): 200 hits, 0 misses") {
		t.Fatalf("markdown: %q", r.stdout[:min(len(r.stdout), 400)])
	}

	// Modes on a one-case set: write always calls, read never stores, off
	// ignores the directory; ADK_CACHE_DIR is the default directory.
	writeFile(t, dir, "one.json", `{"id":"one","version":"1","cases":[{"id":"x","input":"fresh","expected":"echo: fresh"}]}`)
	one := []string{"eval", "run", "--config", "agent.json", "--eval-set", "one.json"}
	for _, step := range []struct {
		mode  string
		env   bool
		calls int
	}{{"read", false, 1}, {"read", false, 1}, {"write", false, 1}, {"read", false, 0}, {"off", false, 1}, {"", true, 0}} {
		fake.reset(0)
		a := append([]string{}, one...)
		var env []string
		if step.env {
			env = []string{envCacheDir + "=cache"}
		} else {
			a = append(a, "--cache", "cache")
		}
		if step.mode != "" {
			a = append(a, "--cache-mode", step.mode)
		}
		if r := runADK(t, dir, env, a...); r.code != exitOK {
			t.Fatalf("mode %s: exit %d %q", step.mode, r.code, r.stderr)
		}
		if _, total, _ := fake.snapshot(); total != step.calls {
			t.Fatalf("mode %q env %v: %d calls, want %d", step.mode, step.env, total, step.calls)
		}
	}

	// Usage errors.
	oneErrorLine(t, runADK(t, dir, nil, append(one, "--cache", "cache", "--cache-mode", "sometimes")...), respcache.CodeInvalidMode+": cache_mode (valid: read, write, readwrite, off)")
	oneErrorLine(t, runADK(t, dir, nil, append(one, "--cache-mode", "read")...), codeMissingRequired+": cache")
	oneErrorLine(t, runADK(t, dir, nil, "eval", "run", "--agent-url", fake.srv.URL, "--eval-set", "one.json", "--cache", "cache"), codeConflictingOptions+": cache,agent_url")
	writeFile(t, dir, "notadir", "x")
	oneErrorLine(t, runADK(t, dir, nil, append(one, "--cache", "notadir")...), respcache.CodeCacheUnavailable)

	// Damage every file of the cache: a typed error, or misses that the
	// provider answers, never a wrong answer.
	entries, err := os.ReadDir(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, "cache", e.Name())
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		for i := 0; i < len(data); i += 7 {
			data[i] ^= 0xa5
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fake.reset(0)
	r = runADK(t, dir, nil, append(args, "--output", "damaged.json")...)
	switch r.code {
	case exitError:
		oneErrorLine(t, r, respcache.CodeCacheUnavailable)
	case exitOK:
		if a, b := withoutCacheMeta(t, filepath.Join(dir, "cold.json")), withoutCacheMeta(t, filepath.Join(dir, "damaged.json")); a != b {
			t.Fatal("a damaged cache changed the result")
		}
	default:
		t.Fatalf("damaged cache: exit %d (a wrong answer fails the eval), stderr %q", r.code, r.stderr)
	}
}

func cacheMeta(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := evalengine.DecodeResult(data)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := r.Metadata[evalengine.MetadataResponseCache].(map[string]any)
	out := map[string]string{}
	for k, v := range m {
		out[k] = strings.Trim(mustMarshal(t, v), `"`)
	}
	return out
}

// withoutCacheMeta is resultWithoutTimings minus the cache counts.
func withoutCacheMeta(t *testing.T, path string) string {
	t.Helper()
	s := resultWithoutTimings(t, path)
	i := strings.Index(s, `"response_cache":`)
	if i < 0 {
		return s
	}
	j := strings.Index(s[i:], "}")
	return s[:i] + s[i+j+1:]
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
