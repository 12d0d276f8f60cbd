package agent

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
)

// The JSON Schema library compiles its draft metaschemas on the first
// schema a program compiles, not in its package init (third_party/jsonschema
// is a patched copy): every adk process links it, and most never compile a
// schema. Upstream's init made 21,000 allocations (1.7 MB).
func TestSchemaLibraryInitCompilesNothing(t *testing.T) {
	if os.Getenv("ADK_SCHEMA_INIT_CHILD") != "" {
		return
	}
	// This test binary links the library; GODEBUG=inittrace=1 makes the
	// runtime print each package's init allocations.
	cmd := exec.Command(os.Args[0], "-test.run=^TestSchemaLibraryInitCompilesNothing$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "ADK_SCHEMA_INIT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`init github\.com/santhosh-tekuri/jsonschema/v6 @[^,]+, [^,]+, (\d+) bytes, (\d+) allocs`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no init line for the jsonschema package in:\n%s", out)
	}
	bytes, _ := strconv.Atoi(string(m[1]))
	allocs, _ := strconv.Atoi(string(m[2]))
	if allocs > 500 || bytes > 64<<10 {
		t.Fatalf("jsonschema init: %d bytes, %d allocs; want the metaschemas compiled lazily (upstream: ~1.7 MB, ~21,000 allocs)", bytes, allocs)
	}
}

// The first compiles race to the lazy metaschema compilation; each must
// see it finished (run under -race).
func TestCompileSchema_ConcurrentFirstUse(t *testing.T) {
	doc := func() map[string]any {
		return map[string]any{"type": "object", "required": []any{"city"},
			"properties": map[string]any{"city": map[string]any{"type": "string", "minLength": 1}}}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := CompileSchema(doc())
			if err != nil {
				errs <- err
				return
			}
			if err := s.Validate(map[string]any{"city": "Pune"}); err != nil {
				errs <- err
			}
			if err := s.Validate(map[string]any{"city": ""}); err == nil {
				t.Error("an empty city passed minLength 1")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A schema that breaks its metaschema is still refused: the
	// metaschemas are in force after the lazy compile.
	if _, err := CompileSchema(map[string]any{"type": 12}); err == nil {
		t.Fatal(`{"type": 12} compiled`)
	}
}
