package googleadk

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/internal/canonjson"
)

// SetFormat names the shape LoadSet recognised.
type SetFormat string

// Recognised eval set formats.
const (
	SetFormatADK            SetFormat = "adk"                  // native schema 1 or 2
	SetFormatGoogleEvalSet  SetFormat = "google_adk_evalset"   // .evalset.json (EvalSet)
	SetFormatGoogleTestJSON SetFormat = "google_adk_test_json" // legacy .test.json list
	googleSourceKey                   = "source_format"        // set metadata key naming the import
	defaultLegacyName                 = "legacy-test"          // id of a legacy list without a source name
	googleVersionPrefix               = "google-adk-"          // version = prefix + content digest
	googleVersionHexLen               = 16                     // hex chars of the digest in the version
	textJoin                          = ""                     // how text parts are joined (as model.Message.Text)
)

// LoadSet reads an eval set in any supported format, detected by shape: a
// native set (schema 1 or 2), a Google ADK EvalSet (.evalset.json: an
// object with eval_set_id / eval_cases) or a legacy Google ADK .test.json
// list of {query, expected_tool_use, reference}. Google files are
// converted to schema 2 (doc.go, "Google ADK import"); EncodeSet writes
// the converted file.
func LoadSet(data []byte) (*evalcore.Set, SetFormat, error) {
	return LoadSetWithOptions(data, evalcore.LoadOptions{})
}

// LoadSetWithOptions is LoadSet with options.
func LoadSetWithOptions(data []byte, opts evalcore.LoadOptions) (*evalcore.Set, SetFormat, error) {
	if opts.MaxCases < 0 || opts.MaxCases > evalcore.MaxCases {
		return nil, "", evalcore.NewErr(evalcore.CodeInvalidEvalOptions, "max_cases")
	}
	s, f, err := loadSet(data, opts)
	if err == nil && opts.MaxCases > 0 && len(s.Cases) > opts.MaxCases {
		return nil, "", evalcore.NewErr(evalcore.CodeCaseLimitExceeded, strconv.Itoa(len(s.Cases))+" > "+strconv.Itoa(opts.MaxCases))
	}
	return s, f, err
}

func loadSet(data []byte, opts evalcore.LoadOptions) (*evalcore.Set, SetFormat, error) {
	v, src, deadline, err := evalcore.DecodeSet(data, opts)
	if err != nil {
		return nil, "", err
	}
	switch x := v.(type) {
	case map[string]any:
		if hasAny(x, "eval_set_id", "eval_cases") {
			if err := src.Undefer(x); err != nil {
				return nil, "", evalcore.LimitErr(evalcore.CodeInvalidEvalSet, err)
			}
			s, err := fromGoogleEvalSet(x, v, deadline)
			return s, SetFormatGoogleEvalSet, err
		}
		s, err := evalcore.SetFromObject(x, src, deadline)
		return s, SetFormatADK, err
	case []any:
		if isLegacyTestList(x) {
			s, err := fromGoogleTestList(x, v, opts.SourceName)
			return s, SetFormatGoogleTestJSON, err
		}
	}
	return nil, "", evalcore.NewErr(evalcore.CodeEvalSetMustBeObject, "")
}

// EncodeSet writes a set as its canonical JSON document plus a newline:
// the file `adk eval convert` produces. ParseSet reads it back unchanged.
func EncodeSet(s *evalcore.Set) ([]byte, error) {
	if err := evalcore.CheckSet(s); err != nil {
		return nil, err
	}
	g, err := evalcore.ToGeneric(s)
	if err != nil {
		return nil, evalcore.ReasonErr(evalcore.CodeInvalidEvalSet, "not_json", "")
	}
	out, err := canonjson.Marshal(g)
	if err != nil {
		return nil, evalcore.ReasonErr(evalcore.CodeInvalidEvalSet, "not_json", "")
	}
	return append(out, '\n'), nil
}

// gget reads a Google field by its snake_case name or its camelCase alias.
func gget(m map[string]any, snake string) (any, bool) {
	if v, ok := m[snake]; ok && v != nil {
		return v, true
	}
	if v, ok := m[camel(snake)]; ok && v != nil {
		return v, true
	}
	return nil, false
}

func hasAny(m map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := gget(m, k); ok {
			return true
		}
	}
	return false
}

func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

func isLegacyTestList(l []any) bool {
	if len(l) == 0 {
		return false
	}
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["query"].(string); !ok {
			return false
		}
	}
	return true
}

// contentVersion derives a version from the source document, so an edited
// file is a new revision with new sample ids.
func contentVersion(doc any) (string, error) {
	b, err := canonjson.Marshal(doc)
	if err != nil {
		return "", evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "not_json", "")
	}
	sum := sha256.Sum256(b)
	return googleVersionPrefix + hex.EncodeToString(sum[:])[:googleVersionHexLen], nil
}

func fromGoogleEvalSet(m map[string]any, doc any, deadline time.Time) (*evalcore.Set, error) {
	bad := func(reason, detail string) error {
		return evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, reason, detail)
	}
	idv, _ := gget(m, "eval_set_id")
	id, ok := idv.(string)
	if !ok || id == "" {
		return nil, evalcore.NewErr(evalcore.CodeInvalidEvalSetID, "")
	}
	version, err := contentVersion(doc)
	if err != nil {
		return nil, err
	}
	s := &evalcore.Set{SchemaVersion: 2, ID: id, Version: version, Metadata: map[string]any{googleSourceKey: string(SetFormatGoogleEvalSet)}}
	if v, ok := gget(m, "name"); ok {
		if s.Name, ok = v.(string); !ok {
			return nil, evalcore.NewErr(evalcore.CodeInvalidEvalSetName, "")
		}
	}
	if v, ok := gget(m, "description"); ok {
		if s.Description, ok = v.(string); !ok {
			return nil, evalcore.NewErr(evalcore.CodeInvalidEvalSetDescription, "")
		}
	}
	casesV, _ := gget(m, "eval_cases")
	cases, ok := casesV.([]any)
	if !ok {
		return nil, evalcore.NewErr(evalcore.CodeInvalidEvalCases, "")
	}
	if len(cases) > evalcore.MaxCases {
		return nil, evalcore.NewErr(evalcore.CodeCaseLimitExceeded, strconv.Itoa(len(cases)))
	}
	seen := map[string]bool{}
	for i, cv := range cases {
		if time.Now().After(deadline) {
			return nil, evalcore.NewErr(evalcore.CodeValidationTimeout, "")
		}
		cm, ok := cv.(map[string]any)
		if !ok {
			return nil, evalcore.NewErr(evalcore.CodeInvalidEvalCase, "index "+strconv.Itoa(i))
		}
		eidV, _ := gget(cm, "eval_id")
		eid, ok := eidV.(string)
		if !ok || eid == "" {
			return nil, evalcore.NewErr(evalcore.CodeInvalidEvalCaseID, "index "+strconv.Itoa(i))
		}
		if seen[eid] {
			return nil, evalcore.NewErr(evalcore.CodeDuplicateCaseID, eid)
		}
		seen[eid] = true
		if sv, ok := gget(cm, "conversation_scenario"); ok && sv != nil {
			if cv, ok := gget(cm, "conversation"); ok && cv != nil {
				return nil, evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "conversation_and_conversation_scenario", eid)
			}
			c, err := googleScenarioCase(eid, sv)
			if err != nil {
				return nil, err
			}
			if si, ok := gget(cm, "session_input"); ok {
				c.SessionInput = si
			}
			s.Cases = append(s.Cases, c)
			continue
		}
		convV, _ := gget(cm, "conversation")
		conv, ok := convV.([]any)
		if !ok || len(conv) == 0 {
			return nil, evalcore.NewErr(evalcore.CodeCaseHasNoTurns, eid)
		}
		if len(conv) > evalcore.MaxTurns {
			return nil, evalcore.NewErr(evalcore.CodeTurnLimitExceeded, eid)
		}
		c := evalcore.Case{ID: eid, Metadata: map[string]any{}, Turns: make([]evalcore.Turn, 0, len(conv))}
		if si, ok := gget(cm, "session_input"); ok {
			c.SessionInput = si
		}
		tseen := map[string]bool{}
		for ti, iv := range conv {
			inv, ok := iv.(map[string]any)
			if !ok {
				return nil, bad("invocation", eid+"/"+strconv.Itoa(ti+1))
			}
			t, err := googleTurn(inv, eid, ti)
			if err != nil {
				return nil, err
			}
			if tseen[t.ID] {
				return nil, evalcore.NewErr(evalcore.CodeDuplicateTurnID, eid+"/"+t.ID)
			}
			tseen[t.ID] = true
			c.Turns = append(c.Turns, t)
		}
		s.Cases = append(s.Cases, c)
	}
	if s.Cases == nil {
		s.Cases = []evalcore.Case{}
	}
	return s, nil
}

func googleTurn(inv map[string]any, caseID string, index int) (evalcore.Turn, error) {
	t := evalcore.Turn{ID: "turn-" + strconv.Itoa(index+1), Metadata: map[string]any{}}
	if idv, ok := gget(inv, "invocation_id"); ok {
		if id, ok := idv.(string); ok && id != "" {
			t.ID = id
		}
	}
	uc, ok := gget(inv, "user_content")
	if !ok {
		return evalcore.Turn{}, evalcore.NewErr(evalcore.CodeMissingTurnInput, caseID+"/"+t.ID)
	}
	t.Input = contentValue(uc)
	exp := map[string]any{}
	if fr, ok := gget(inv, "final_response"); ok {
		if text, ok := contentText(fr); ok {
			exp["response"] = text
		}
	}
	if idata, ok := gget(inv, "intermediate_data"); ok {
		im, ok := idata.(map[string]any)
		if !ok {
			return evalcore.Turn{}, evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "intermediate_data", caseID+"/"+t.ID)
		}
		traj, err := googleTrajectory(im, caseID+"/"+t.ID)
		if err != nil {
			return evalcore.Turn{}, err
		}
		exp["trajectory"] = traj
		if ir, ok := gget(im, "intermediate_responses"); ok {
			exp["intermediate_responses"] = ir
		}
	}
	if len(exp) > 0 {
		t.Expected = exp
	}
	return t, nil
}

// googleTrajectory reads tool_uses (FunctionCall list) or the
// function_call parts of invocation_events.
func googleTrajectory(im map[string]any, where string) ([]any, error) {
	traj := []any{}
	step := func(fc any) error {
		m, ok := fc.(map[string]any)
		if !ok {
			return evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "tool_use", where)
		}
		name, _ := m["name"].(string)
		if name == "" {
			return evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "tool_use", where)
		}
		args, ok := m["args"]
		if !ok || args == nil {
			args = map[string]any{}
		}
		traj = append(traj, map[string]any{"tool": name, "args": args})
		return nil
	}
	if uses, ok := gget(im, "tool_uses"); ok {
		l, ok := uses.([]any)
		if !ok {
			return nil, evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "tool_uses", where)
		}
		for _, u := range l {
			if err := step(u); err != nil {
				return nil, err
			}
		}
		return traj, nil
	}
	if evs, ok := gget(im, "invocation_events"); ok {
		l, ok := evs.([]any)
		if !ok {
			return nil, evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "invocation_events", where)
		}
		for _, ev := range l {
			em, _ := ev.(map[string]any)
			content, _ := gget(em, "content")
			cm, _ := content.(map[string]any)
			parts, _ := gget(cm, "parts")
			pl, _ := parts.([]any)
			for _, p := range pl {
				pm, _ := p.(map[string]any)
				if fc, ok := gget(pm, "function_call"); ok {
					if err := step(fc); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return traj, nil
}

// contentText joins the text parts of a genai Content; ok is false when
// it has none.
func contentText(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		if s, ok := v.(string); ok {
			return s, true
		}
		return "", false
	}
	parts, _ := gget(m, "parts")
	pl, _ := parts.([]any)
	var texts []string
	for _, p := range pl {
		pm, _ := p.(map[string]any)
		if t, ok := gget(pm, "text"); ok {
			if s, ok := t.(string); ok {
				texts = append(texts, s)
			}
		}
	}
	if len(texts) == 0 {
		return "", false
	}
	return strings.Join(texts, textJoin), true
}

// contentValue turns a user Content into a turn input: its text when every
// part is text, else the Content with null fields dropped.
func contentValue(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	parts, _ := gget(m, "parts")
	pl, _ := parts.([]any)
	allText := len(pl) > 0
	for _, p := range pl {
		pm, _ := p.(map[string]any)
		nonNull := 0
		for _, pv := range pm {
			if pv != nil {
				nonNull++
			}
		}
		if _, ok := gget(pm, "text"); !ok || nonNull != 1 {
			allText = false
		}
	}
	if allText {
		text, _ := contentText(m)
		return text
	}
	return dropNulls(m)
}

func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[k] = dropNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = dropNulls(e)
		}
		return out
	}
	return v
}

func fromGoogleTestList(l []any, doc any, sourceName string) (*evalcore.Set, error) {
	name := defaultLegacyName
	if sourceName != "" {
		base := path.Base(strings.ReplaceAll(sourceName, "\\", "/"))
		base = strings.TrimSuffix(strings.TrimSuffix(base, ".json"), ".test")
		if base != "" && base != "." && base != "/" {
			name = base
		}
	}
	if len(l) > evalcore.MaxTurns {
		return nil, evalcore.NewErr(evalcore.CodeTurnLimitExceeded, name)
	}
	version, err := contentVersion(doc)
	if err != nil {
		return nil, err
	}
	c := evalcore.Case{ID: name, Metadata: map[string]any{}, Turns: make([]evalcore.Turn, 0, len(l))}
	for i, e := range l {
		m := e.(map[string]any) // isLegacyTestList checked the shape
		t := evalcore.Turn{ID: "turn-" + strconv.Itoa(i+1), Input: m["query"], Metadata: map[string]any{}}
		exp := map[string]any{}
		if ref, ok := m["reference"]; ok && ref != nil {
			exp["response"] = ref
		}
		if uses, ok := m["expected_tool_use"]; ok && uses != nil {
			ul, ok := uses.([]any)
			if !ok {
				return nil, evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "expected_tool_use", t.ID)
			}
			traj := make([]any, 0, len(ul))
			for _, u := range ul {
				um, _ := u.(map[string]any)
				tool, _ := um["tool_name"].(string)
				if tool == "" {
					return nil, evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "expected_tool_use", t.ID)
				}
				args, ok := um["tool_input"]
				if !ok || args == nil {
					args = map[string]any{}
				}
				traj = append(traj, map[string]any{"tool": tool, "args": args})
			}
			exp["trajectory"] = traj
		}
		if ir, ok := m["expected_intermediate_agent_responses"]; ok && ir != nil {
			exp["intermediate_responses"] = ir
		}
		if len(exp) > 0 {
			t.Expected = exp
		}
		c.Turns = append(c.Turns, t)
	}
	return &evalcore.Set{
		SchemaVersion: 2, ID: name, Version: version,
		Metadata: map[string]any{googleSourceKey: string(SetFormatGoogleTestJSON)},
		Cases:    []evalcore.Case{c},
	}, nil
}
