package agentadapter

import (
	"context"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent"
	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// weatherAgent is a scripted agent with one mock tool: any message
// mentioning Pune calls get_weather once, then answers.
const weatherAgent = `{"schema_version":1,"name":"weather","instruction":"be brief",
 "model":{"provider":"scripted","usage":{"input_tokens":10,"output_tokens":2},"rules":[
   {"match":{"contains":"Pune"},"steps":[{"tool_calls":[{"name":"get_weather","args":{"city":"Pune"}}]},{"text":"Sunny"}]},
   {"match":{"contains":"thanks"},"steps":[{"text":"You are welcome"}]}]},
 "tools":[{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},
   "mock":{"responses":[{"args":{"city":"Pune"},"result":{"sky":"clear"}}],"default":{"error":"unknown city"}}}]}`

const weatherSet = `{"id":"w","version":"1","cases":[
 {"id":"pune","expected_trajectory":[{"tool":"get_weather","args":{"city":"Pune"}}],
  "turns":[{"input":"Weather in Pune?","expected_response":"Sunny"},{"input":"thanks","expected_response":"You are welcome"}]}]}`

func mustConfig(t *testing.T, doc string) *agent.Config {
	t.Helper()
	cfg, err := agent.ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mustSet(t *testing.T, doc string) *evalengine.Set {
	t.Helper()
	s, _, err := evalengine.LoadSet([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func criteria(t *testing.T) []evalengine.Metric {
	t.Helper()
	m, err := evalengine.ParseCriteria([]byte(`[{"id":"response","criterion":"exact_response"},
		{"id":"trajectory","criterion":"tool_trajectory","config":{"match":"exact"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func run(t *testing.T, a *Adapter, set *evalengine.Set, o evalengine.Options) *evalengine.Result {
	t.Helper()
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: a, Metrics: criteria(t), Options: o})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAdapter_MultiTurnTrajectoryAndEvents(t *testing.T) {
	a, err := New(mustConfig(t, weatherAgent), Options{CaptureEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	o := evalengine.DefaultOptions()
	o.Samples, o.Concurrency, o.CaptureToolContent = 3, 2, true
	r := run(t, a, mustSet(t, weatherSet), o)
	if !r.Passed || r.Cases[0].PassedSampleCount != 3 {
		t.Fatalf("want every sample to pass (a fresh session each), got pass rate %v, %+v", r.PassRate, r.Cases[0].Samples[0])
	}
	s := r.Cases[0].Samples[0]
	if len(s.Turns) != 2 || s.Turns[0].Actual != "Sunny" || s.Turns[1].Actual != "You are welcome" {
		t.Fatalf("turns: %+v", s.Turns)
	}
	tr := s.Turns[0].Trajectory
	if len(tr) != 2 || tr[0].Kind != evalengine.KindToolCall || tr[1].Kind != evalengine.KindToolResponse ||
		tr[0].CallID == nil || tr[1].CallID == nil || *tr[0].CallID != *tr[1].CallID {
		t.Fatalf("trajectory: %+v", tr)
	}
	if !reflect.DeepEqual(tr[1].Result, map[string]any{"sky": "clear"}) {
		t.Fatalf("tool result: %#v", tr[1].Result)
	}
	// The captured events carry the same trajectory in the contract's shape.
	steps, err := evalengine.TrajectoryFromEvents(s.Turns[0].Events)
	if err != nil || len(steps) != 2 || steps[0].Tool != "get_weather" || steps[1].Kind != evalengine.KindToolResponse {
		t.Fatalf("events → trajectory: %v %+v", err, steps)
	}
	meta := s.Turns[0].AdapterMetadata
	usage, _ := meta["usage"].(map[string]any)
	if meta["invocation_id"] == "" || usage["input_tokens"] != int64(20) || usage["output_tokens"] != int64(4) {
		t.Fatalf("adapter metadata: %#v", meta)
	}
}

func TestAdapter_NoEventsWithoutCapture(t *testing.T) {
	a, _ := New(mustConfig(t, weatherAgent), Options{})
	sess, err := a.NewSession(context.Background(), evalengine.SampleInfo{SampleID: "s1", Case: &evalengine.Case{ID: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.Turn(context.Background(), evalengine.TurnInput{Input: "Weather in Pune?"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Events != nil || len(out.Trajectory) != 2 || out.Output != "Sunny" {
		t.Fatalf("output: %+v", out)
	}
}

func TestAdapter_SessionInput(t *testing.T) {
	a, _ := New(mustConfig(t, weatherAgent), Options{})
	for _, tc := range []struct {
		name  string
		input any
		user  string
		state map[string]any
	}{
		{"google shape", map[string]any{"app_name": "x", "user_id": "u1", "state": map[string]any{"tier": "gold"}}, "u1", map[string]any{"tier": "gold"}},
		{"plain object is the state", map[string]any{"tier": "silver"}, DefaultUserID, map[string]any{"tier": "silver"}},
		{"absent", nil, DefaultUserID, map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess, err := a.NewSession(context.Background(), evalengine.SampleInfo{SampleID: "s", Case: &evalengine.Case{ID: "c", SessionInput: tc.input}})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			if _, err := sess.Turn(context.Background(), evalengine.TurnInput{Input: "thanks"}); err != nil {
				t.Fatal(err)
			}
			as := sess.(*agentSession)
			got, err := as.r.Sessions().Get("s")
			if err != nil {
				t.Fatal(err)
			}
			if got.UserID != tc.user || !reflect.DeepEqual(got.State, tc.state) {
				t.Fatalf("session user %q state %v, want %q %v", got.UserID, got.State, tc.user, tc.state)
			}
		})
	}
	t.Run("non-object is refused", func(t *testing.T) {
		_, err := a.NewSession(context.Background(), evalengine.SampleInfo{SampleID: "s", Case: &evalengine.Case{ID: "c", SessionInput: "nope"}})
		var ae *evalengine.AdapterError
		if !errors.As(err, &ae) || ae.Tag != TagInvalidSessionInput {
			t.Fatalf("err %v", err)
		}
	})
}

func TestAdapter_InputText(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"hi", "hi"},
		{nil, ""},
		{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "roll"}, map[string]any{"text": " a die"}}}, "roll a die"},
		{map[string]any{"q": "x"}, `{"q":"x"}`},
		{[]any{"a", 1.0}, `["a",1]`},
	} {
		if got := inputText(tc.in); got != tc.want {
			t.Errorf("inputText(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAdapter_ModelFailureIsATaggedSampleError(t *testing.T) {
	a, _ := New(mustConfig(t, weatherAgent), Options{})
	set := mustSet(t, `{"id":"w","version":"1","cases":[{"id":"c","input":"no rule matches this","expected":"x"}]}`)
	r := run(t, a, set, evalengine.DefaultOptions())
	if s := r.Cases[0].Samples[0]; s.Status != evalengine.SampleStatusError || s.Error != "no_matching_rule" {
		t.Fatalf("sample: %s %q", s.Status, s.Error)
	}
}

func TestAdapter_CaseDeadlineStopsASlowModel(t *testing.T) {
	slow := `{"schema_version":1,"name":"slow","model":{"provider":"scripted","latency_ms":600000,"default":{"steps":[{"text":"late"}]}}}`
	a, _ := New(mustConfig(t, slow), Options{})
	set := mustSet(t, `{"id":"w","version":"1","cases":[{"id":"c","input":"hi","expected":"late"}]}`)
	o := evalengine.DefaultOptions()
	o.CaseTimeoutMS = 50
	start := time.Now()
	r := run(t, a, set, o)
	if s := r.Cases[0].Samples[0]; s.Error != evalengine.TagTimeout {
		t.Fatalf("sample error %q, want timeout", s.Error)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("deadline honoured late: %v", d)
	}
}

func TestAdapter_CancelStopsPromptly(t *testing.T) {
	slow := `{"schema_version":1,"name":"slow","model":{"provider":"scripted","latency_ms":600000,"default":{"steps":[{"text":"late"}]}}}`
	a, _ := New(mustConfig(t, slow), Options{})
	set := mustSet(t, `{"id":"w","version":"1","cases":[{"id":"c","input":"hi","expected":"late"}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err := evalengine.Run(ctx, set, evalengine.RunConfig{Adapter: a, Metrics: criteria(t), Options: evalengine.DefaultOptions()})
	if evalengine.ErrorCode(err) != evalengine.CodeEvaluationCancelled {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancel honoured late: %v", d)
	}
}

func TestAdapter_TravelExamplePasses(t *testing.T) {
	cfg, err := agent.LoadConfig("../../examples/travel/AGENT.json")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../examples/travel/evalset.json")
	if err != nil {
		t.Fatal(err)
	}
	crit, err := os.ReadFile("../../examples/travel/criteria.json")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := evalengine.ParseCriteria(crit)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := New(cfg, Options{CaptureEvents: true})
	r, err := evalengine.Run(context.Background(), mustSet(t, string(data)), evalengine.RunConfig{Adapter: a, Metrics: metrics, Options: evalengine.DefaultOptions()})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Passed {
		for _, c := range r.Cases {
			t.Logf("%s: %s %+v", c.CaseID, c.Status, c.Samples[0].Turns)
		}
		t.Fatalf("travel example: pass rate %v", r.PassRate)
	}
}

// BenchmarkAdapterSample measures one zero-latency sample through the
// adapter alone: build a Runner, one turn with a tool call, close.
func BenchmarkAdapterSample(b *testing.B) {
	cfg, err := agent.ParseConfig([]byte(weatherAgent))
	if err != nil {
		b.Fatal(err)
	}
	a, _ := New(cfg, Options{})
	ctx := context.Background()
	info := evalengine.SampleInfo{SampleID: "s", Case: &evalengine.Case{ID: "c"}}
	in := evalengine.TurnInput{Input: "Weather in Pune?"}
	b.ReportAllocs()
	for b.Loop() {
		sess, err := a.NewSession(ctx, info)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sess.Turn(ctx, in); err != nil {
			b.Fatal(err)
		}
		_ = sess.Close()
	}
}

// TestAppendEvents_Texts checks an event's text: its parts' texts joined
// (one part's own string, several concatenated), beside tool calls too,
// and its role as a plain string.
func TestAppendEvents_Texts(t *testing.T) {
	call := &model.ToolCall{ID: "c1", Name: "f"}
	for _, tc := range []struct {
		name  string
		role  model.Role
		parts []model.Part
		want  map[string]any
	}{
		{"one part", model.RoleModel, []model.Part{{Text: "ok"}}, map[string]any{"type": "text", "role": "model", "text": "ok"}},
		{"no part", model.RoleUser, nil, map[string]any{"type": "text", "role": "user", "text": ""}},
		{"three parts", model.RoleModel, []model.Part{{Text: ""}, {Text: "a"}, {Text: "bc"}}, map[string]any{"type": "text", "role": "model", "text": "abc"}},
		{"other role", model.Role("critic"), []model.Part{{Text: "x"}}, map[string]any{"type": "text", "role": "critic", "text": "x"}},
		{"calls and texts", model.RoleModel, []model.Part{{Text: "a"}, {ToolCall: call}, {Text: "b"}},
			map[string]any{"type": "tool_calls", "text": "ab", "calls": []any{map[string]any{"name": "f", "args": map[string]any{}, "call_id": "c1"}}}},
		{"calls, no text", model.RoleModel, []model.Part{{ToolCall: call}},
			map[string]any{"type": "tool_calls", "calls": []any{map[string]any{"name": "f", "args": map[string]any{}, "call_id": "c1"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &session.Event{ID: "evt-1", InvocationID: "inv-1", Author: "a", Content: &model.Message{Role: tc.role, Parts: tc.parts}}
			got := appendEvents(nil, ev)
			want := []any{map[string]any{"id": "evt-1", "invocation_id": "inv-1", "author": "a", "final": false, "content": tc.want}}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %#v\nwant %#v", got, want)
			}
		})
	}
}
