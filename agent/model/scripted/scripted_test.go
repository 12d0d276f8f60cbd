package scripted

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func req(msgs ...model.Message) *model.Request { return &model.Request{Messages: msgs} }

func user(s string) model.Message {
	return model.Message{Role: model.RoleUser, Parts: []model.Part{{Text: s}}}
}

var modelTurn = model.Message{Role: model.RoleModel, Parts: []model.Part{{Text: "..."}}}

func code(err error) string {
	var me *model.Error
	if errors.As(err, &me) {
		return me.Code
	}
	return ""
}

func TestScripted_RulesAndSteps(t *testing.T) {
	p, err := Parse([]byte(`{"provider":"scripted","usage":{"input_tokens":5,"output_tokens":1},"rules":[
		{"match":{"equals":"exact"},"steps":[{"text":"equals rule"}]},
		{"match":{"contains":"weather"},"steps":[{"tool_calls":[{"name":"w","args":{"c":"P"}},{"name":"w","args":{"c":"O"}}]},{"text":"two"}]},
		{"match":{"regex":"(?i)^FLIGHTS?"},"steps":[{"text":"regex rule"}]},
		{"match":{"contains":"weather"},"steps":[{"text":"never: first rule wins"}]}],
		"default":{"steps":[{"text":"default"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  *model.Request
		want string
	}{
		{"equals", req(user("exact")), "equals rule"},
		{"regex", req(user("flight to Pune")), "regex rule"},
		{"default", req(user("pizza")), "default"},
		{"second step after one model turn", req(user("weather?"), modelTurn, model.Message{Role: model.RoleTool}), "two"},
		{"latest user message counts", req(user("weather?"), modelTurn, user("exact")), "equals rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := p.Generate(ctx, tc.req)
			if err != nil || resp.Message.Text() != tc.want || resp.Usage.InputTokens != 5 {
				t.Fatalf("got %+v, %v", resp, err)
			}
		})
	}
	resp, err := p.Generate(ctx, req(user("weather?")))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls()
	if len(calls) != 2 || calls[0].Name != "w" || calls[1].Args["c"] != "O" || calls[0].ID == calls[1].ID || resp.FinishReason != "tool_calls" {
		t.Fatalf("tool calls %+v", calls)
	}
	// Responses are copies: mutating one does not change the script.
	resp.Message.Parts[0].ToolCall.Name = "mutated"
	again, _ := p.Generate(ctx, req(user("weather?")))
	if again.Message.ToolCalls()[0].Name != "w" {
		t.Fatal("script mutated through a response")
	}
	if _, err := p.Generate(ctx, req(user("exact"), modelTurn)); code(err) != CodeScriptExhausted {
		t.Fatalf("exhausted: %v", err)
	}
	noDefault, _ := New(Config{Rules: []Rule{{Match: Match{Equals: ptr("x")}, Steps: []Step{{Text: ptr("y")}}}}})
	if _, err := noDefault.Generate(ctx, req(user("z"))); code(err) != CodeNoMatchingRule {
		t.Fatalf("no rule: %v", err)
	}
}

func ptr(s string) *string { return &s }

func TestScripted_LatencyHonoursCancellation(t *testing.T) {
	p, err := New(Config{LatencyMS: 60_000, Default: &Script{Steps: []Step{{Text: ptr("x")}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Generate(ctx, req(user("hi")))
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		var me *model.Error
		if !errors.As(err, &me) || me.Class != model.ClassCancelled {
			t.Fatalf("err %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("latency ignored cancellation")
	}
	fast, _ := New(Config{LatencyMS: 5, Default: &Script{Steps: []Step{{Text: ptr("x")}}}})
	start := time.Now()
	if _, err := fast.Generate(context.Background(), req(user("hi"))); err != nil || time.Since(start) < 5*time.Millisecond {
		t.Fatalf("latency not applied: %v", err)
	}
}

func TestScripted_InvalidConfig(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown key":     `{"provider":"scripted","colour":1}`,
		"two matchers":    `{"rules":[{"match":{"equals":"a","contains":"b"},"steps":[{"text":"x"}]}]}`,
		"no matcher":      `{"rules":[{"match":{},"steps":[{"text":"x"}]}]}`,
		"empty steps":     `{"rules":[{"match":{"equals":"a"},"steps":[]}]}`,
		"text and tools":  `{"default":{"steps":[{"text":"x","tool_calls":[{"name":"t"}]}]}}`,
		"unnamed tool":    `{"default":{"steps":[{"tool_calls":[{"args":{}}]}]}}`,
		"negative lat":    `{"latency_ms":-1,"default":{"steps":[{"text":"x"}]}}`,
		"other provider":  `{"provider":"openai"}`,
		"negative tokens": `{"usage":{"input_tokens":-1},"default":{"steps":[{"text":"x"}]}}`,
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
