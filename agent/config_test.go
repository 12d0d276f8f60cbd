package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/fadcedab/adk/agent/model/ratelimit"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/plugins"
)

func TestConfig_TravelExample(t *testing.T) {
	cfg, err := LoadConfig("../examples/travel/AGENT.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		input, final string
		tools        []string
	}{
		{"What is the weather in Pune?", "It is sunny in Pune, 31°C.", []string{"get_weather"}},
		{"Compare the weather in both cities, Pune and Oslo.", "Pune is sunny at 31°C; Oslo is snowing at -4°C.", []string{"get_weather", "get_weather"}},
		{"Can you order me a pizza?", "Sorry, I can only help with weather and flights.", nil},
	} {
		r, err := cfg.Build(BuildOptions{IDs: SequentialIDs()})
		if err != nil {
			t.Fatal(err)
		}
		tr := mustTurn(t, r, tc.input)
		if tr.FinalText != tc.final || len(tr.ToolCalls) != len(tc.tools) {
			t.Fatalf("%q: final %q calls %+v", tc.input, tr.FinalText, tr.ToolCalls)
		}
		for i, name := range tc.tools {
			if tr.ToolCalls[i].Name != name || tr.ToolCalls[i].Error != "" || tr.ToolCalls[i].Result == nil {
				t.Fatalf("%q: call %d %+v", tc.input, i, tr.ToolCalls[i])
			}
		}
		_ = r.Close()
	}
	t.Run("two turns in one session", func(t *testing.T) {
		r, _ := cfg.Build(BuildOptions{})
		defer r.Close()
		mustTurn(t, r, "Find flights from Bangalore to Pune tomorrow")
		tr := mustTurn(t, r, "Great, book it for Asha Rao")
		if tr.FinalText != "Booked AI-505 for Asha Rao, confirmation PNR7Q2." || tr.ToolCalls[0].Name != "book_flight" {
			t.Fatalf("final %q %+v", tr.FinalText, tr.ToolCalls)
		}
	})
}

func TestConfig_Rejects(t *testing.T) {
	base := `{"schema_version":1,"name":"a","model":{"provider":"scripted","default":{"steps":[{"text":"x"}]}}%s}`
	for name, tc := range map[string]struct {
		doc  string
		code string
	}{
		"unknown top-level key":  {strings.Replace(base, "%s", `,"colour":"red"`, 1), CodeInvalidAgentConfig},
		"unknown model key":      {`{"schema_version":1,"name":"a","model":{"provider":"scripted","colour":1}}`, CodeInvalidAgentConfig},
		"unknown tool key":       {strings.Replace(base, "%s", `,"tools":[{"name":"t","mock":{},"colour":1}]`, 1), CodeInvalidAgentConfig},
		"schema version":         {`{"schema_version":2,"name":"a"}`, CodeUnsupportedSchemaVer},
		"unknown provider":       {`{"schema_version":1,"name":"a","model":{"provider":"hal9000"}}`, CodeInvalidAgentConfig},
		"no model":               {`{"schema_version":1,"name":"a"}`, CodeInvalidAgentConfig},
		"bad output schema":      {strings.Replace(base, "%s", `,"output_schema":{"type":12}`, 1), CodeInvalidOutputSchemaCfg},
		"bad tool schema":        {strings.Replace(base, "%s", `,"tools":[{"name":"t","parameters":{"type":"nope"},"mock":{}}]`, 1), CodeInvalidAgentConfig},
		"both mock and http":     {strings.Replace(base, "%s", `,"tools":[{"name":"t","mock":{},"http":{"url":"http://127.0.0.1:1"}}]`, 1), CodeInvalidAgentConfig},
		"workflow with model":    {`{"schema_version":1,"name":"w","type":"sequential","model":{"provider":"scripted"},"sub_agents":[]}`, CodeInvalidAgentConfig},
		"max_steps out of range": {strings.Replace(base, "%s", `,"max_steps":100000`, 1), CodeInvalidAgentConfig},
		"bad regex":              {`{"schema_version":1,"name":"a","model":{"provider":"scripted","rules":[{"match":{"regex":"("},"steps":[{"text":"x"}]}]}}`, CodeInvalidAgentConfig},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.doc))
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.code {
				t.Fatalf("err %v, want code %s", err, tc.code)
			}
		})
	}
	t.Run("over 1 MiB", func(t *testing.T) {
		big := strings.Replace(base, "%s", `,"instruction":"`+strings.Repeat("x", MaxConfigBytes)+`"`, 1)
		path := filepath.Join(t.TempDir(), "AGENT.json")
		if err := os.WriteFile(path, []byte(big), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(path)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeConfigTooLarge {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("duplicate agent names", func(t *testing.T) {
		cfg, err := ParseConfig([]byte(`{"schema_version":1,"name":"a","model":{"provider":"scripted","default":{"steps":[{"text":"x"}]}},"sub_agents":[{"name":"a"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.Build(BuildOptions{}); !errors.Is(err, ErrInvalidAgentConfig) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("unknown built-in plugin", func(t *testing.T) {
		cfg, err := ParseConfig([]byte(strings.Replace(base, "%s", `,"plugins":[{"id":"p","plugin":"no_such_plugin"}]`, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.Build(BuildOptions{}); !errors.Is(err, ErrInvalidAgentConfig) || !errors.Is(err, &plugins.Error{Code: plugins.CodeUnknownBuiltinPlugin}) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestConfig_WorkflowsSubAgentsFuncsAndPlugins(t *testing.T) {
	doc := []byte(`{
	  "schema_version": 1,
	  "name": "root",
	  "type": "sequential",
	  "sub_agents": [
	    {"name": "fetch", "instruction": "fetch",
	     "model": {"provider":"scripted","default":{"steps":[{"tool_calls":[{"name":"lookup","args":{"id":7}}]},{"text":"fetched"}]}},
	     "tools": [{"name":"lookup","parameters":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}}]},
	    {"name": "fan", "type": "parallel", "sub_agents": [
	      {"name": "left", "model": {"provider":"scripted","default":{"steps":[{"text":"L"}]}}},
	      {"name": "right", "model": {"provider":"scripted","default":{"steps":[{"text":"R"}]}}, "output_key": "right_said"}
	    ]}
	  ],
	  "plugins": [{"id": "tag", "plugin": "tagger", "mode": "intervene", "config": {"suffix": "!"}}]
	}`)
	cfg, err := ParseConfig(doc)
	if err != nil {
		t.Fatal(err)
	}
	builtins := func(name string, _ map[string]any) (plugins.Descriptor, error) {
		if name != "tagger" {
			return plugins.Descriptor{}, errors.New("unknown")
		}
		return plugins.Descriptor{Plugin: plugins.Hooks{AfterModel: func(_ context.Context, _ plugins.CallContext, r *model.Response, cfg map[string]any) (plugins.Outcome, error) {
			if len(r.Message.ToolCalls()) > 0 {
				return plugins.Observe(), nil
			}
			r.Message.Parts[0].Text += cfg["suffix"].(string)
			return plugins.Amend(r), nil
		}}}, nil
	}
	var got any
	funcs := map[string]func(context.Context, *ToolContext, map[string]any) (any, error){
		"lookup": func(_ context.Context, _ *ToolContext, args map[string]any) (any, error) {
			got = args["id"]
			return "record", nil
		},
	}
	for range 2 { // Build is repeatable
		r, err := cfg.Build(BuildOptions{Builtins: builtins, Funcs: funcs})
		if err != nil {
			t.Fatal(err)
		}
		tr := mustTurn(t, r, "go")
		if tr.FinalText != "R!" && tr.FinalText != "L!" {
			t.Fatalf("final %q events %v", tr.FinalText, texts(tr.Events))
		}
		if got != 7.0 || tr.ToolCalls[0].Result != "record" {
			t.Fatalf("lookup got %v, trajectory %+v", got, tr.ToolCalls)
		}
		sess, _ := r.Sessions().Get("s1")
		if sess.State["right_said"] != "R!" {
			t.Fatalf("state %v", sess.State)
		}
		_ = r.Close()
	}
	if _, err := cfg.Build(BuildOptions{Builtins: builtins}); !errors.Is(err, ErrInvalidAgentConfig) {
		t.Fatalf("missing func: %v", err)
	}
}

func TestConfig_RunsAreIndependentAndDeterministic(t *testing.T) {
	data, err := os.ReadFile("../examples/travel/AGENT.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	run := func() string {
		r, err := cfg.Build(BuildOptions{IDs: SequentialIDs()})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		tr := mustTurn(t, r, "Compare the weather in both cities, Pune and Oslo.")
		var b bytes.Buffer
		for _, ev := range tr.Events {
			ev.Time = ev.Time.Truncate(0).UTC().Truncate(1 << 62) // times differ; ids and content must not
			b.WriteString(jsonString(ev))
		}
		return b.String()
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("runs differ:\n%s\n%s", a, b)
	}
}

func TestConfig_BuiltinPluginsFromAgentJSON(t *testing.T) {
	doc := `{"schema_version":1,"name":"a","instruction":"local rules",
	  "model":{"provider":"scripted","default":{"steps":[{"text":"x"}]}},
	  "plugins":[{"id":"gi","plugin":"global_instruction","config":{"instruction":"GLOBAL"}},
	             {"id":"log","plugin":"metadata_logger","config":{"log_level":"none"}}]}`
	cfg, err := ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var seen *model.Request
	r, err := cfg.Build(BuildOptions{Callbacks: map[string]Callbacks{"a": {
		BeforeModel: func(_ context.Context, _ *CallbackContext, req *model.Request) (*model.Response, error) {
			seen = req
			return nil, nil
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mustTurn(t, r, "hi")
	if seen == nil || !strings.HasPrefix(seen.Messages[0].Text(), "GLOBAL") || !strings.Contains(seen.Messages[0].Text(), "local rules") {
		t.Fatalf("global instruction not applied: %+v", seen)
	}
}

func TestConfig_RateLimit(t *testing.T) {
	const mb = `{"provider":"scripted","default":{"steps":[{"text":"x"}]}%s}`
	t.Run("one limiter per endpoint, shared by sub-agents", func(t *testing.T) {
		cfg, err := ParseConfig([]byte(`{"schema_version":1,"name":"root","model":` +
			fmt.Sprintf(mb, `,"rate_limit":{"requests_per_minute":600,"concurrent_requests":2}`) +
			`,"sub_agents":[{"name":"child"},{"name":"other","model":` + fmt.Sprintf(mb, "") + `}]}`))
		if err != nil {
			t.Fatal(err)
		}
		ls := cfg.Limiters()
		if len(ls) != 1 || ls[0].Endpoint() != "scripted" || ls[0].Spec().RequestsPerMinute != 600 {
			t.Fatalf("limiters %+v", ls)
		}
		r, err := cfg.Build(BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for ev, err := range r.Run(context.Background(), RunRequest{SessionID: "s", UserID: "u", Message: userMsg("hi")}) {
			if err != nil {
				t.Fatal(err)
			}
			_ = ev
		}
		if s := ls[0].Stats(); s.Admitted != 1 {
			t.Fatalf("calls through the limiter: %+v", s)
		}
	})
	for name, tc := range map[string]struct{ mb, want string }{
		"zero":       {fmt.Sprintf(mb, `,"rate_limit":{"requests_per_minute":0}`), "rate_limit.requests_per_minute"},
		"too many":   {fmt.Sprintf(mb, `,"rate_limit":{"concurrent_requests":20000}`), "rate_limit.concurrent_requests"},
		"unknown":    {fmt.Sprintf(mb, `,"rate_limit":{"rpm":1}`), "rate_limit.rpm"},
		"empty":      {fmt.Sprintf(mb, `,"rate_limit":{}`), "rate_limit"},
		"not object": {fmt.Sprintf(mb, `,"rate_limit":5`), "rate_limit"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(`{"schema_version":1,"name":"a","model":` + tc.mb + `}`))
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != CodeInvalidAgentConfig || !strings.Contains(err.Error(), tc.want+":") {
				t.Fatalf("%v, want %s naming %s", err, CodeInvalidAgentConfig, tc.want)
			}
		})
	}
	t.Run("one registry per process: agents share, conflicts name both", func(t *testing.T) {
		reg := ratelimit.NewRegistry()
		doc := func(name string, rpm int) []byte {
			return []byte(`{"schema_version":1,"name":"` + name + `","model":` +
				fmt.Sprintf(mb, fmt.Sprintf(`,"rate_limit":{"requests_per_minute":%d}`, rpm)) + `}`)
		}
		a, err := ParseConfigWith(doc("a", 600), ConfigOptions{RateLimits: reg, Source: "a.json"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseConfigWith(doc("b", 600), ConfigOptions{RateLimits: reg, Source: "b.json"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Limiters()[0] != b.Limiters()[0] || len(reg.Limiters()) != 1 {
			t.Fatalf("two agents of one process on one endpoint: limiters %p %p", a.Limiters()[0], b.Limiters()[0])
		}
		_, err = ParseConfigWith(doc("c", 60), ConfigOptions{RateLimits: reg, Source: "c.json"})
		var ce *ratelimit.ConflictError
		if !errors.As(err, &ce) || ce.Source != `c.json agent "c"` || ce.OtherSource != `a.json agent "a"` ||
			!strings.Contains(err.Error(), `invalid_agent_config: model: rate_limit in c.json agent "c" differs from a.json agent "a" (requests_per_minute=60 vs requests_per_minute=600) for endpoint scripted`) {
			t.Fatalf("a different limit for the endpoint: %v", err)
		}
	})
	t.Run("two limits for one endpoint", func(t *testing.T) {
		_, err := ParseConfig([]byte(`{"schema_version":1,"name":"root","model":` +
			fmt.Sprintf(mb, `,"rate_limit":{"requests_per_minute":600}`) +
			`,"sub_agents":[{"name":"other","model":` + fmt.Sprintf(mb, `,"rate_limit":{"requests_per_minute":60}`) + `}]}`))
		if err == nil || !strings.Contains(err.Error(), "model.rate_limit") {
			t.Fatalf("conflicting limits: %v", err)
		}
	})
}
