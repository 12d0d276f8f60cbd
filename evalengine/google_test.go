package evalengine_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/fadcedab/adk/evalengine"
)

// A Google ADK EvalSet as adk-python writes it: every genai Part field
// present, null ones included.
const googleEvalSet = `{
  "eval_set_id": "home_automation",
  "name": "Home automation",
  "description": null,
  "eval_cases": [{
    "eval_id": "device_off",
    "conversation": [{
      "invocation_id": "e-1",
      "user_content": {"role": "user", "parts": [{"video_metadata": null, "thought": null, "inline_data": null, "text": "Turn off device_2 in the Bedroom."}]},
      "final_response": {"role": "model", "parts": [{"text": "I have set the device_2 status to off."}]},
      "intermediate_data": {"tool_uses": [{"id": null, "name": "set_device_info", "args": {"location": "Bedroom", "device_id": "device_2", "status": "OFF"}}],
        "intermediate_responses": []},
      "creation_timestamp": 1747337309.2360144
    }],
    "session_input": null,
    "creation_timestamp": 1747337309.2360282
  }, {
    "evalId": "camel_events",
    "conversation": [{
      "invocationId": "e-2",
      "userContent": {"parts": [{"text": "roll"}, {"text": " a die"}]},
      "intermediateData": {"invocationEvents": [{"author": "agent", "content": {"parts": [{"functionCall": {"name": "roll_die", "args": {"sides": 6}}}]}}]}
    }, {
      "userContent": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA=="}, "text": null}]}
    }],
    "sessionInput": {"app_name": "hello", "user_id": "u", "state": {}}
  }],
  "creation_timestamp": 1747337309.23
}`

const googleLegacyList = `[{"query": "Turn off device_2 in the Bedroom.",
  "expected_tool_use": [{"tool_name": "set_device_info", "tool_input": {"location": "Bedroom", "device_id": "device_2", "status": "OFF"}}],
  "expected_intermediate_agent_responses": [],
  "reference": "I have set the device_2 status to off."},
 {"query": "thanks", "expected_tool_use": []}]`

func TestLoadSet_GoogleEvalSet(t *testing.T) {
	s, format, err := evalengine.LoadSet([]byte(googleEvalSet))
	if err != nil {
		t.Fatal(err)
	}
	if format != evalengine.SetFormatGoogleEvalSet || s.ID != "home_automation" || s.Name != "Home automation" || s.SchemaVersion != 2 {
		t.Fatalf("header: %s %+v", format, s)
	}
	if !strings.HasPrefix(s.Version, "google-adk-") || len(s.Version) != len("google-adk-")+16 {
		t.Fatalf("version: %q", s.Version)
	}
	c0 := s.Cases[0]
	if c0.ID != "device_off" || c0.SessionInput != nil || c0.Turns[0].ID != "e-1" || c0.Turns[0].Input != "Turn off device_2 in the Bedroom." {
		t.Fatalf("case 0: %+v", c0)
	}
	wantExp := map[string]any{
		"response": "I have set the device_2 status to off.",
		"trajectory": []any{map[string]any{"tool": "set_device_info",
			"args": map[string]any{"location": "Bedroom", "device_id": "device_2", "status": "OFF"}}},
		"intermediate_responses": []any{},
	}
	if !reflect.DeepEqual(c0.Turns[0].Expected, wantExp) {
		t.Fatalf("expected: %#v", c0.Turns[0].Expected)
	}
	c1 := s.Cases[1]
	if c1.ID != "camel_events" || c1.SessionInput == nil || c1.Turns[0].Input != "roll a die" || c1.Turns[1].ID != "turn-2" {
		t.Fatalf("case 1: %+v", c1)
	}
	traj := c1.Turns[0].Expected.(map[string]any)["trajectory"].([]any)
	if len(traj) != 1 || traj[0].(map[string]any)["tool"] != "roll_die" {
		t.Fatalf("trajectory from events: %v", traj)
	}
	if in, ok := c1.Turns[1].Input.(map[string]any); !ok || in["parts"] == nil {
		t.Fatalf("non-text input kept as content: %#v", c1.Turns[1].Input)
	}

	// The converted set is a valid v2 file and scores with the built-ins.
	enc, err := evalengine.EncodeSet(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evalengine.ParseSet(enc); err != nil {
		t.Fatalf("converted set does not re-parse: %v", err)
	}
	m := mustCriterion(t, "t", evalengine.CriterionToolTrajectory, 1, nil)
	out := evalengine.TurnOutput{Trajectory: []evalengine.ToolStep{{Tool: "set_device_info", Args: map[string]any{"location": "Bedroom", "device_id": "device_2", "status": "OFF"}}}}
	if got := m.Case.ScoreCase(context.Background(), evalengine.CaseEval{Case: &s.Cases[0], Outputs: []evalengine.TurnOutput{out}}); got.Value != 1 {
		t.Fatalf("trajectory score: %+v", got)
	}

	t.Run("version follows content", func(t *testing.T) {
		s2, _, err := evalengine.LoadSet([]byte(strings.Replace(googleEvalSet, "Bedroom.", "Kitchen.", 1)))
		if err != nil || s2.Version == s.Version {
			t.Fatalf("edited file kept version %q (%v)", s2.Version, err)
		}
	})
}

func TestLoadSet_GoogleLegacyTestJSON(t *testing.T) {
	s, format, err := evalengine.LoadSetWithOptions([]byte(googleLegacyList), evalengine.LoadOptions{SourceName: "fixture/simple_test2.test.json"})
	if err != nil {
		t.Fatal(err)
	}
	if format != evalengine.SetFormatGoogleTestJSON || s.ID != "simple_test2" || len(s.Cases) != 1 || len(s.Cases[0].Turns) != 2 {
		t.Fatalf("%s %+v", format, s)
	}
	t0 := s.Cases[0].Turns[0]
	exp := t0.Expected.(map[string]any)
	if t0.Input != "Turn off device_2 in the Bedroom." || exp["response"] != "I have set the device_2 status to off." || len(exp["trajectory"].([]any)) != 1 {
		t.Fatalf("turn: %+v", t0)
	}
	if _, _, err := evalengine.LoadSet([]byte(googleLegacyList)); err != nil {
		t.Fatal(err)
	}
}

func TestLoadSet_GoogleErrors(t *testing.T) {
	cases := []struct{ doc, code string }{
		{`{"eval_set_id":"x","eval_cases":[{"eval_id":"s","conversation_scenario":{"starting_prompt":"hi"},"conversation":[{"user_content":{"parts":[{"text":"q"}]}}]}]}`, evalengine.CodeInvalidGoogleEvalSet},
		{`{"eval_set_id":"x","eval_cases":[{"eval_id":"s","conversation_scenario":{"conversation_plan":"p"}}]}`, evalengine.CodeInvalidGoogleEvalSet},
		{`{"eval_set_id":"","eval_cases":[]}`, evalengine.CodeInvalidEvalSetID},
		{`{"eval_set_id":"x","eval_cases":[{"eval_id":"a","conversation":[]}]}`, evalengine.CodeCaseHasNoTurns},
		{`{"eval_set_id":"x","eval_cases":[{"eval_id":"a","conversation":[{"final_response":{"parts":[{"text":"x"}]}}]}]}`, evalengine.CodeMissingTurnInput},
		{`{"eval_set_id":"x","eval_cases":[{"eval_id":"a","conversation":[{"user_content":{"parts":[{"text":"x"}]}}]},{"eval_id":"a","conversation":[{"user_content":"y"}]}]}`, evalengine.CodeDuplicateCaseID},
		{`[1,2]`, evalengine.CodeEvalSetMustBeObject},
		{`[{"input":"x","expected":"y"}]`, evalengine.CodeEvalSetMustBeObject},
	}
	for _, tc := range cases {
		_, _, err := evalengine.LoadSet([]byte(tc.doc))
		wantCode(t, err, tc.code)
	}
}

// FuzzLoadSet: every input either loads, encodes and re-parses to the same
// bytes, or fails with a typed error. Seeds: the f.Add calls and
// testdata/fuzz/FuzzLoadSet.
func FuzzLoadSet(f *testing.F) {
	for _, seed := range []string{weatherSet, googleEvalSet, googleLegacyList, fullCaseSet, `{}`, `[]`, `{"id":"s","version":"1","cases":[{"id":"a","input":null}]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _, err := evalengine.LoadSet(data)
		if err != nil {
			if evalengine.ErrorCode(err) == "" {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		enc, err := evalengine.EncodeSet(s)
		if err != nil {
			t.Fatalf("loaded set does not encode: %v", err)
		}
		again, err := evalengine.ParseSet(enc)
		if err != nil {
			t.Fatalf("encoded set does not re-parse: %v\n%s", err, enc)
		}
		enc2, err := evalengine.EncodeSet(again)
		if err != nil || string(enc) != string(enc2) {
			t.Fatalf("set encoding is not stable:\n%s\n%s", enc, enc2)
		}
	})
}
