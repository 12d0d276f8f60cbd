package agent

import (
	"fmt"
	"testing"
)

// TestConfig_CallsAtOnce: one call at a time, but a parallel workflow's
// branches call at once (nested ones summed within, the widest of a
// sequence).
func TestConfig_CallsAtOnce(t *testing.T) {
	llm := func(name string) string {
		return fmt.Sprintf(`{"name":%q,"model":{"provider":"scripted","default":{"steps":[{"text":"x"}]}}}`, name)
	}
	for doc, want := range map[string]int{
		`{"schema_version":1,"name":"a","model":{"provider":"scripted","default":{"steps":[{"text":"x"}]}}}`:                  1,
		`{"schema_version":1,"name":"s","type":"sequential","sub_agents":[` + llm("a") + `,` + llm("b") + `]}`:                1,
		`{"schema_version":1,"name":"p","type":"parallel","sub_agents":[` + llm("a") + `,` + llm("b") + `,` + llm("c") + `]}`: 3,
		// A sequence of one call, then a fan of a parallel pair and a
		// sequence: the fan's 3 at once.
		`{"schema_version":1,"name":"s","type":"sequential","sub_agents":[` + llm("a") +
			`,{"name":"fan","type":"parallel","sub_agents":[{"name":"pair","type":"parallel","sub_agents":[` + llm("b") + `,` + llm("c") + `]},` +
			`{"name":"seq","type":"sequential","sub_agents":[` + llm("d") + `,` + llm("e") + `]}]}]}`: 3,
	} {
		cfg, err := ParseConfig([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if got := cfg.CallsAtOnce(); got != want {
			t.Errorf("%s: CallsAtOnce %d, want %d", doc, got, want)
		}
	}
}
