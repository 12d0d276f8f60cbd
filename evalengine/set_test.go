package evalengine_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/evalengine"
)

const weatherSet = `{"schema_version":2,"id":"weather-suite","version":"2026-07-14","metadata":{"suite":"core","api_key":"sk-123"},
 "cases":[{"id":"pune-forecast",
   "expected_trajectory":[{"kind":"tool_call","tool":"weather","args":{"city":"Pune"}}],
   "expected_final_response":"Sunny",
   "turns":[{"id":"ask","input":"Weather in Pune?","expected_response":"Sunny"}]}]}`

func TestParseSet_ContractExample(t *testing.T) {
	s := mustSet(t, weatherSet)
	if s.SchemaVersion != 2 || s.ID != "weather-suite" || s.Version != "2026-07-14" {
		t.Fatalf("header: %+v", s)
	}
	if _, ok := s.Metadata["api_key"]; ok {
		t.Fatal("secret metadata was not pruned")
	}
	if s.Metadata["suite"] != "core" {
		t.Fatalf("metadata: %v", s.Metadata)
	}
	c := s.Cases[0]
	if c.ExpectedFinalResponse != "Sunny" || c.ExpectedTrajectory == nil {
		t.Fatalf("v2 case fields not kept: %+v", c)
	}
	want := map[string]any{"response": "Sunny"}
	if !reflect.DeepEqual(c.Turns[0].Expected, want) {
		t.Fatalf("expected canonicalisation: got %#v", c.Turns[0].Expected)
	}
}

func TestParseSet_Defaults(t *testing.T) {
	s := mustSet(t, `{"id":"s","version":"1","cases":[
		{"id":"short","input":"hi","expected":"hello"},
		{"id":"multi","turns":[{"input":"a"},{"input":"b","id":"second"},{"input":"c"}]}]}`)
	if s.SchemaVersion != 2 {
		t.Fatalf("absent schema_version must be 2, got %d", s.SchemaVersion)
	}
	if len(s.Metadata) != 0 || s.Metadata == nil {
		t.Fatalf("metadata default must be {}, got %#v", s.Metadata)
	}
	short := s.Cases[0]
	if len(short.Turns) != 1 || short.Turns[0].ID != "turn-1" || short.Turns[0].Input != "hi" || short.Turns[0].Expected != "hello" {
		t.Fatalf("shorthand: %+v", short.Turns)
	}
	var ids []string
	for _, tr := range s.Cases[1].Turns {
		ids = append(ids, tr.ID)
	}
	if strings.Join(ids, ",") != "turn-1,second,turn-3" {
		t.Fatalf("turn ids: %v", ids)
	}
}

func TestParseSet_ExpectationCanonicalisation(t *testing.T) {
	cases := []struct {
		name string
		turn string
		want any
	}{
		{"legacy scalar kept", `{"input":"x","expected":"y"}`, "y"},
		{"nothing", `{"input":"x"}`, nil},
		{"legacy scalar becomes response", `{"input":"x","expected":"y","expected_trajectory":["t"]}`,
			map[string]any{"response": "y", "trajectory": []any{"t"}}},
		{"null legacy becomes object", `{"input":"x","expected":null,"expected_response":"r"}`,
			map[string]any{"response": "r"}},
		{"object legacy merged", `{"input":"x","expected":{"k":true,"response":"old"},"expected_response":"new","expected_intermediate_responses":[]}`,
			map[string]any{"k": true, "response": "new", "intermediate_responses": []any{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSet(t, `{"id":"s","version":"1","cases":[{"id":"c","turns":[`+tc.turn+`]}]}`)
			if got := s.Cases[0].Turns[0].Expected; !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v want %#v", got, tc.want)
			}
		})
	}
}

func TestParseSet_Errors(t *testing.T) {
	deep := strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70)
	var many strings.Builder
	many.WriteString(`{"id":"s","version":"1","cases":[`)
	for i := 0; i < evalengine.MaxCases+1; i++ {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`{"id":"c` + strings.Repeat("x", 0) + itoa(i) + `","input":"x"}`)
	}
	many.WriteString(`]}`)
	cases := []struct {
		name, doc, code, reason string
	}{
		{"not json", `{`, evalengine.CodeInvalidEvalSet, "invalid_json"},
		{"not object", `[]`, evalengine.CodeEvalSetMustBeObject, ""},
		{"too deep", `{"id":"s","version":"1","cases":[{"id":"c","input":` + deep + `}]}`, evalengine.CodeInvalidEvalSet, "eval_data_depth_exceeded"},
		{"duplicate json key", `{"id":"s","id":"t","version":"1","cases":[]}`, evalengine.CodeInvalidEvalSet, "duplicate_key"},
		{"schema 3", `{"schema_version":3,"id":"s","version":"1","cases":[]}`, evalengine.CodeUnsupportedSchemaVersion, ""},
		{"schema string", `{"schema_version":"2","id":"s","version":"1","cases":[]}`, evalengine.CodeUnsupportedSchemaVersion, ""},
		{"empty id", `{"id":"","version":"1","cases":[]}`, evalengine.CodeInvalidEvalSetID, ""},
		{"missing version", `{"id":"s","cases":[]}`, evalengine.CodeInvalidEvalSetVersion, ""},
		{"cases not list", `{"id":"s","version":"1","cases":{}}`, evalengine.CodeInvalidEvalCases, ""},
		// MaxCases+1 cases pass the JSON list bound first (the same 100,000).
		{"too many cases", many.String(), evalengine.CodeInvalidEvalSet, "eval_list_too_large"},
		{"duplicate case id", `{"id":"s","version":"1","cases":[{"id":"a","input":1},{"id":"a","input":2}]}`, evalengine.CodeDuplicateCaseID, ""},
		{"no turns", `{"id":"s","version":"1","cases":[{"id":"a","turns":[]}]}`, evalengine.CodeCaseHasNoTurns, ""},
		{"no turns or input", `{"id":"s","version":"1","cases":[{"id":"a"}]}`, evalengine.CodeCaseHasNoTurns, ""},
		{"missing input", `{"id":"s","version":"1","cases":[{"id":"a","turns":[{"id":"t"}]}]}`, evalengine.CodeMissingTurnInput, ""},
		{"duplicate turn id", `{"id":"s","version":"1","cases":[{"id":"a","turns":[{"id":"turn-2","input":1},{"input":2}]}]}`, evalengine.CodeDuplicateTurnID, ""},
		{"unknown set key", `{"id":"s","version":"1","cases":[],"extra":1}`, evalengine.CodeUnknownSetKeys, ""},
		{"unknown case key", `{"id":"s","version":"1","cases":[{"id":"a","input":1,"oops":1}]}`, evalengine.CodeUnknownCaseKeys, ""},
		{"unknown turn key", `{"id":"s","version":"1","cases":[{"id":"a","turns":[{"input":1,"oops":1}]}]}`, evalengine.CodeUnknownTurnKeys, ""},
		{"v2 key in v1 set", `{"schema_version":1,"id":"s","version":"1","cases":[{"id":"a","input":1,"expected_final_response":"x"}]}`, evalengine.CodeUnknownCaseKeys, ""},
		{"metadata not object", `{"id":"s","version":"1","cases":[],"metadata":[]}`, evalengine.CodeInvalidEvalMetadata, ""},
		{"turns and shorthand", `{"id":"s","version":"1","cases":[{"id":"a","input":1,"turns":[{"input":1}]}]}`, evalengine.CodeInvalidEvalCase, "turns_and_shorthand"},
		// Cases are decoded one at a time after the rest of the set: the
		// set's own keys decide first, wherever "cases" stands.
		{"v1 after its cases", `{"cases":[{"id":"a","input":1,"expected_final_response":"x"}],"schema_version":1,"id":"s","version":"1"}`, evalengine.CodeUnknownCaseKeys, ""},
		{"unknown set key after a bad case", `{"cases":[{"id":"a"}],"id":"s","version":"1","extra":1}`, evalengine.CodeUnknownSetKeys, ""},
		{"bad json after a bad case", `{"cases":[{"id":"a"}],"id":"s","version":"1",}`, evalengine.CodeInvalidEvalSet, "invalid_json"},
		{"cases a string", `{"id":"s","version":"1","cases":"x"}`, evalengine.CodeInvalidEvalCases, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := evalengine.ParseSet([]byte(tc.doc))
			wantCode(t, err, tc.code)
			if tc.reason != "" && evalengine.ErrorReason(err) != tc.reason {
				t.Fatalf("reason: got %q want %q", evalengine.ErrorReason(err), tc.reason)
			}
			if strings.Contains(err.Error(), "sk-") {
				t.Fatalf("error leaks input: %v", err)
			}
		})
	}
}

func TestLoadSet_ValidationIsTimeLimited(t *testing.T) {
	_, _, err := evalengine.LoadSetWithOptions([]byte(weatherSet), evalengine.LoadOptions{ValidationTimeout: time.Nanosecond})
	wantCode(t, err, evalengine.CodeValidationTimeout)
}

// TestPrepareWithin_TheCallersBoundHolds: PrepareWithin bounds the set's
// decode by the caller's timeout, not the size's default budget.
func TestPrepareWithin_TheCallersBoundHolds(t *testing.T) {
	_, err := evalengine.PrepareWithin([]byte(weatherSet), nil, nil, time.Nanosecond)
	wantCode(t, err, evalengine.CodeValidationTimeout)
	p, err := evalengine.PrepareWithin([]byte(weatherSet), nil, nil, time.Minute)
	if err != nil || len(p.Set.Cases) == 0 {
		t.Fatalf("PrepareWithin a minute: %v", err)
	}
}

func TestParseSet_V1StillReadable(t *testing.T) {
	s := mustSet(t, `{"schema_version":1,"id":"old","version":"1","cases":[{"id":"a","turns":[{"input":"x","expected":{"response":"y"}}]}]}`)
	if s.SchemaVersion != 1 {
		t.Fatalf("schema version: %d", s.SchemaVersion)
	}
	out, err := evalengine.EncodeSet(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"schema_version":1`) {
		t.Fatalf("encoded v1 set lost its version: %s", out)
	}
}

func TestEncodeSet_RoundTrip(t *testing.T) {
	for _, path := range []string{"../examples/travel/evalset.json", "../examples/travel/evalset_regressions.json"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Skipf("example not present: %v", err)
		}
		s, format, err := evalengine.LoadSet(data)
		if err != nil || format != evalengine.SetFormatADK {
			t.Fatalf("%s: %v %s", path, err, format)
		}
		enc, err := evalengine.EncodeSet(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := evalengine.ParseSet(enc)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, enc)
		}
		enc2, _ := evalengine.EncodeSet(again)
		if string(enc) != string(enc2) {
			t.Fatalf("round trip changed the set:\n%s\n%s", enc, enc2)
		}
		var generic map[string]any
		if err := json.Unmarshal(enc, &generic); err != nil {
			t.Fatal(err)
		}
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestLoadSet_MaxCasesOption(t *testing.T) {
	doc := []byte(`{"id":"s","version":"1","cases":[{"id":"a","input":"x"},{"id":"b","input":"x"}]}`)
	if _, _, err := evalengine.LoadSetWithOptions(doc, evalengine.LoadOptions{MaxCases: 2}); err != nil {
		t.Fatal(err)
	}
	_, _, err := evalengine.LoadSetWithOptions(doc, evalengine.LoadOptions{MaxCases: 1})
	wantCode(t, err, evalengine.CodeCaseLimitExceeded)
	_, _, err = evalengine.LoadSetWithOptions(doc, evalengine.LoadOptions{MaxCases: evalengine.MaxCases + 1})
	wantCode(t, err, evalengine.CodeInvalidEvalOptions)
}
