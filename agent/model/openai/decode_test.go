package openai

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// decodeSeeds are answers decodeFast takes (the first group) and answers
// it must leave to encoding/json (the rest); FuzzDecodeFast mutates them.
var decodeSeeds = []string{
	// openaifake's answer, byte for byte.
	`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"ok","role":"assistant"}}],"id":"chatcmpl-fake","model":"fake","usage":{"completion_tokens":1,"prompt_tokens":12,"total_tokens":13}}`,
	// OpenAI's shape, with the members adk does not read.
	`{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4.1-2025-04-14",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": "Hello! How can I assist you today?\nLine two: \"quoted\", a tab\t, a slash \/ and café ☕.",
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 19,
    "completion_tokens": 10,
    "total_tokens": 29,
    "prompt_tokens_details": {"cached_tokens": 3, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_\u00e9x"
}`,
	// Tool calls, content null.
	`{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Pune\"}"}},{"id":"call_2","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":-0,"prompt_tokens_details":null}}`,
	`{"choices":[],"usage":null,"x":[1,-2.5e+3,0.1E-2,true,false,null,{"a":{"b":[[]]}}]}`,
	`{}`,
	` {"choices":[{"message":{"content":"","tool_calls":[]}},{"finish_reason":"length","message":{}}]} `,
	// Left to encoding/json.
	`{"ID":"x","choices":[]}`,
	`{"id":"a","id":"b","choices":[{}]}`,
	`{"id":null,"choices":[{"message":{"content":"x"}}]}`,
	`{"choices":[{"message":{"content":"\u00e9"}}]}`,
	`{"choices":[{"message":{"content":"bad ` + "\xff" + ` byte"}}]}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":1.0}}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":99999999999999999999}}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":"12"}}`,
	`{"choices":[{"message":null}]}`,
	`{"choices":[{"message":{"content":"x"}}]} trailing`,
	`{"choices":[{"message":{"content":"x"}}],"x":01}`,
	`{"choices":[{"message":{"content":"x"}}],"x":"\q"}`,
	`{"choices":[{"message":{"content":"x"}}],"Usage":{}}`,
	`{"choices":[{"messagE":{"content":"x"}}]}`,
	`[]`,
	`{"choices":[{"message":{"content":"x"}}],"x":nul}`,
	`{"choices":[{"message":{"content":"x"}}],"\u0069d":"y"}`,
	`{"choices":[{"message":{"content":"x"}}],"ſd":"y"}`,
}

// TestDecodeFast_TakesTheCommonShapes holds the fast path to the answers
// it is for: openaifake's, OpenAI's with members adk does not read, tool
// calls; each decodes to encoding/json's value.
func TestDecodeFast_TakesTheCommonShapes(t *testing.T) {
	for i, s := range decodeSeeds[:6] {
		var fast, std chatResponse
		if !decodeFast([]byte(s), &fast) {
			t.Fatalf("seed %d: decodeFast refused %s", i, s)
		}
		if err := json.Unmarshal([]byte(s), &std); err != nil {
			t.Fatalf("seed %d: encoding/json: %v", i, err)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("seed %d: decodeFast %+v, encoding/json %+v", i, fast, std)
		}
	}
	var cr chatResponse
	_ = decodeFast([]byte(decodeSeeds[1]), &cr)
	if !strings.Contains(*cr.Choices[0].Message.Content, "\"quoted\", a tab\t, a slash / and café ☕") || cr.Usage.PromptTokensDetails.CachedTokens != 3 {
		t.Fatalf("decoded %+v", cr)
	}
}

// TestDecodeFast_LeavesTheRestToEncodingJSON: every seed past the common
// shapes is refused by the fast path, and decodeResponse then gives
// encoding/json's value and error.
func TestDecodeFast_LeavesTheRestToEncodingJSON(t *testing.T) {
	for i, s := range decodeSeeds[6:] {
		var fast chatResponse
		if decodeFast([]byte(s), &fast) {
			t.Errorf("seed %q: decodeFast took it", s)
		}
		var got, want chatResponse
		gotErr, wantErr := decodeResponse([]byte(s), &got), json.Unmarshal([]byte(s), &want)
		if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d: decodeResponse %+v, %v; encoding/json %+v, %v", i, got, gotErr, want, wantErr)
		}
	}
}

// FuzzDecodeFast: whatever decodeFast takes, encoding/json decodes without
// an error to the same value.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast chatResponse
		if !decodeFast(data, &fast) {
			return
		}
		var std chatResponse
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatalf("decodeFast took %q, encoding/json refuses it: %v", data, err)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("%q: decodeFast %+v, encoding/json %+v", data, fast, std)
		}
	})
}
