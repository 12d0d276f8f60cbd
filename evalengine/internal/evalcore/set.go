package evalcore

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/fadcedab/adk/internal/jsonlimit"
	"github.com/fadcedab/adk/internal/secrets"
)

// Eval set bounds (CONTRACTS §5.1, raised by issue 19: a fleet exists
// for regression suites of tens of thousands of cases). LoadOptions.MaxCases
// lowers the case bound; the file's byte bound (16 MiB) and the JSON
// limits of one document (nodes, strings, depth) stay.
const (
	MaxCases                 = 100_000
	MaxTurns                 = 1000
	DefaultValidationTimeout = 2 * time.Second
)

// Set is a validated eval set in its canonical schema-2 shape (or schema 1,
// which keeps its legacy expectations). Build one with ParseSet or LoadSet;
// its JSON encoding is the canonical document (sorted keys through
// canonjson), which ParseSet reads back unchanged.
type Set struct {
	SchemaVersion int            `json:"schema_version"`
	ID            string         `json:"id"`
	Version       string         `json:"version"`
	Name          string         `json:"name,omitempty"`
	Description   string         `json:"description,omitempty"`
	Cases         []Case         `json:"cases"`
	Metadata      map[string]any `json:"metadata"`
}

// Case is one conversation: ordered turns plus optional case-level
// expectations. The three v2-only fields are kept verbatim (any JSON); a
// JSON null is the same as absent.
type Case struct {
	ID                    string         `json:"id"`
	Turns                 []Turn         `json:"turns"`
	Metadata              map[string]any `json:"metadata"`
	SessionInput          any            `json:"session_input,omitempty"`
	ExpectedTrajectory    any            `json:"expected_trajectory,omitempty"`
	ExpectedFinalResponse any            `json:"expected_final_response,omitempty"`
}

// Turn is one user input and its canonical expectation: in schema 2, an
// object with response / trajectory / intermediate_responses when any of
// the expected_* keys was given, else the legacy expected value (or null).
type Turn struct {
	ID       string         `json:"id"`
	Input    any            `json:"input"`
	Expected any            `json:"expected"`
	Metadata map[string]any `json:"metadata"`
}

// LoadOptions tunes LoadSet. The zero value is the default.
type LoadOptions struct {
	// SourceName names the file the data came from (e.g.
	// "simple_test2.test.json"). Only the legacy Google .test.json format
	// uses it, for the set and case id; default "legacy-test".
	SourceName string
	// ValidationTimeout bounds validation; default 2 s.
	ValidationTimeout time.Duration
	// Limits tightens the JSON limits; zero fields are the defaults.
	Limits jsonlimit.Limits
	// MaxCases lowers the case bound (0 is MaxCases).
	MaxCases int
}

// ParseSet reads a native eval set (schema 1 or 2) from untrusted bytes,
// bounded by the JSON limits and the validation timeout. Use LoadSet to
// accept Google ADK files as well.
func ParseSet(data []byte) (*Set, error) {
	v, src, deadline, err := DecodeSet(data, LoadOptions{})
	if err != nil {
		return nil, err
	}
	m, ok := asObject(v)
	if !ok {
		return nil, NewErr(CodeEvalSetMustBeObject, "")
	}
	return SetFromObject(m, src, deadline)
}

// caseSource builds the elements of a native set's "cases" array, which
// DecodeSet leaves deferred (jsonlimit.DecodeDeferring): the whole document
// is checked against the limits first, then each case is decoded, turned
// into a Case and its generic values dropped, so a 100,000-case set never
// holds every case's generic tree at once.
type caseSource struct {
	data []byte
	lim  jsonlimit.Limits
}

// cases returns the number of cases in v (the "cases" value) and a walk
// over them; ok is false when v is not an array.
func (src caseSource) cases(v any) (n int, each func(fn func(i int, v any) error) error, ok bool) {
	switch x := v.(type) {
	case []any:
		return len(x), func(fn func(int, any) error) error {
			for i, cv := range x {
				if err := fn(i, cv); err != nil {
					return err
				}
			}
			return nil
		}, true
	case jsonlimit.Deferred:
		if !x.IsArray() {
			return 0, nil, false
		}
		return x.Len, func(fn func(int, any) error) error {
			err := jsonlimit.EachElement(src.data, x, src.lim, fn)
			if _, checked := err.(*jsonlimit.Error); checked {
				// DecodeDeferring checked these bytes: not reached.
				return LimitErr(CodeInvalidEvalSet, err)
			}
			return err
		}, true
	}
	return 0, nil, false
}

// Undefer builds m's deferred cases in place, for the formats that read
// the whole document (Google's).
func (src caseSource) Undefer(m map[string]any) error {
	span, ok := m["cases"].(jsonlimit.Deferred)
	if !ok {
		return nil
	}
	if !span.IsArray() {
		v, err := jsonlimit.Decode(src.data[span.Start:span.End], src.lim)
		m["cases"] = v
		return err
	}
	list := make([]any, 0, span.Len)
	err := jsonlimit.EachElement(src.data, span, src.lim, func(_ int, v any) error {
		list = append(list, v)
		return nil
	})
	m["cases"] = list
	return err
}

// setValidationTimeout is the default validation budget of a document of
// n bytes: DefaultValidationTimeout, plus a second per 128 KiB past the
// first MiB (34 s for a 5 MiB set of 100,000 cases, 2 minutes at the 16 MiB
// bound). A big set is not hostile (the JSON limits bound the work), and
// the budget is wall time, which a loaded machine stretches: at a second
// per 2 MiB past 4 MiB, a 5 MiB set failed at a load average of 35 on 2
// cores.
func setValidationTimeout(n int) time.Duration {
	return DefaultValidationTimeout + time.Duration(max(0, n-1<<20)/(128<<10))*time.Second
}

func DecodeSet(data []byte, opts LoadOptions) (any, caseSource, time.Time, error) {
	timeout := opts.ValidationTimeout
	if timeout <= 0 {
		timeout = setValidationTimeout(len(data))
	}
	deadline := time.Now().Add(timeout)
	// An eval set may hold MaxCases cases: the list, node and string
	// ceilings are those of adk's own large documents; the 16 MiB byte
	// Bound is the contract's.
	base := jsonlimit.OwnDocumentLimits()
	base.MaxBytes = jsonlimit.DefaultMaxBytes
	lim, err := base.Tighten(opts.Limits)
	if err != nil {
		return nil, caseSource{}, deadline, &Error{Code: CodeInvalidEvalSet, Reason: "invalid_limits", Err: err}
	}
	src := caseSource{data: data, lim: lim}
	v, err := jsonlimit.DecodeDeferring(data, lim, "cases")
	if err != nil {
		return nil, src, deadline, LimitErr(CodeInvalidEvalSet, err)
	}
	if time.Now().After(deadline) {
		return nil, src, deadline, NewErr(CodeValidationTimeout, "")
	}
	return v, src, deadline, nil
}

var (
	setKeys    = KeySet("schema_version", "id", "version", "cases", "metadata", "name", "description")
	caseKeysV1 = KeySet("id", "metadata", "turns", "input", "expected")
	caseKeysV2 = KeySet("id", "metadata", "turns", "input", "expected", "session_input", "expected_trajectory", "expected_final_response")
	turnKeysV1 = KeySet("id", "input", "expected", "metadata")
	turnKeysV2 = KeySet("id", "input", "expected", "metadata", "expected_response", "expected_trajectory", "expected_intermediate_responses")
)

// SetFromObject validates a decoded native set and builds its canonical form.
func SetFromObject(m map[string]any, src caseSource, deadline time.Time) (*Set, error) {
	if unk := UnknownKeys(m, setKeys); len(unk) > 0 {
		return nil, NewErr(CodeUnknownSetKeys, KeysDetail(unk))
	}
	s := &Set{SchemaVersion: 2}
	if sv, ok := m["schema_version"]; ok {
		n, err := schemaVersion(sv)
		if err != nil {
			return nil, err
		}
		s.SchemaVersion = n
	}
	var ok bool
	if s.ID, ok = m["id"].(string); !ok || s.ID == "" {
		return nil, NewErr(CodeInvalidEvalSetID, "")
	}
	if s.Version, ok = m["version"].(string); !ok || s.Version == "" {
		return nil, NewErr(CodeInvalidEvalSetVersion, "")
	}
	if v, present := m["name"]; present {
		if s.Name, ok = v.(string); !ok {
			return nil, NewErr(CodeInvalidEvalSetName, "")
		}
	}
	if v, present := m["description"]; present {
		if s.Description, ok = v.(string); !ok {
			return nil, NewErr(CodeInvalidEvalSetDescription, "")
		}
	}
	meta, err := metadataValue(m, "set")
	if err != nil {
		return nil, err
	}
	s.Metadata = meta
	n, each, ok := src.cases(m["cases"])
	if !ok {
		return nil, NewErr(CodeInvalidEvalCases, "")
	}
	if n > MaxCases {
		return nil, NewErr(CodeCaseLimitExceeded, strconv.Itoa(n))
	}
	s.Cases = make([]Case, 0, n)
	seen := make(map[string]bool, n)
	err = each(func(i int, cv any) error {
		if time.Now().After(deadline) {
			return NewErr(CodeValidationTimeout, "")
		}
		c, err := caseFromValue(cv, i, s.SchemaVersion)
		if err != nil {
			return err
		}
		if seen[c.ID] {
			return NewErr(CodeDuplicateCaseID, c.ID)
		}
		seen[c.ID] = true
		s.Cases = append(s.Cases, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func schemaVersion(v any) (int, error) {
	if n, ok := v.(json.Number); ok {
		switch string(n) {
		case "1":
			return 1, nil
		case "2":
			return 2, nil
		}
		return 0, NewErr(CodeUnsupportedSchemaVersion, string(n))
	}
	return 0, NewErr(CodeUnsupportedSchemaVersion, "not a number")
}

// metadataValue reads an optional metadata object and prunes its secrets.
func metadataValue(m map[string]any, where string) (map[string]any, error) {
	v, present := m["metadata"]
	if !present || v == nil {
		return map[string]any{}, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, NewErr(CodeInvalidEvalMetadata, where)
	}
	return pruneObject(obj), nil
}

// pruneObject removes secret-named keys recursively.
func pruneObject(m map[string]any) map[string]any {
	if len(m) == 0 {
		return map[string]any{}
	}
	if p, ok := secrets.Prune(m).(map[string]any); ok {
		return p
	}
	return map[string]any{}
}

func caseFromValue(v any, index int, schema int) (Case, error) {
	m, ok := asObject(v)
	if !ok {
		return Case{}, NewErr(CodeInvalidEvalCase, "index "+strconv.Itoa(index))
	}
	id, ok := m["id"].(string)
	if !ok || id == "" {
		return Case{}, NewErr(CodeInvalidEvalCaseID, "index "+strconv.Itoa(index))
	}
	allowed := caseKeysV2
	if schema == 1 {
		allowed = caseKeysV1
	}
	if unk := UnknownKeys(m, allowed); len(unk) > 0 {
		return Case{}, NewErr(CodeUnknownCaseKeys, id+": "+KeysDetail(unk))
	}
	c := Case{ID: id}
	meta, err := metadataValue(m, "case "+id)
	if err != nil {
		return Case{}, err
	}
	c.Metadata = meta
	c.SessionInput = m["session_input"]
	c.ExpectedTrajectory = m["expected_trajectory"]
	c.ExpectedFinalResponse = m["expected_final_response"]

	turnsV, hasTurns := m["turns"]
	_, hasInput := m["input"]
	_, hasExpected := m["expected"]
	switch {
	case hasTurns && (hasInput || hasExpected):
		return Case{}, ReasonErr(CodeInvalidEvalCase, "turns_and_shorthand", id)
	case hasTurns:
		turns, ok := turnsV.([]any)
		if !ok {
			return Case{}, ReasonErr(CodeInvalidEvalCase, "turns_must_be_array", id)
		}
		if len(turns) == 0 {
			return Case{}, NewErr(CodeCaseHasNoTurns, id)
		}
		if len(turns) > MaxTurns {
			return Case{}, NewErr(CodeTurnLimitExceeded, id)
		}
		c.Turns = make([]Turn, 0, len(turns))
		seen := make(map[string]bool, len(turns))
		for i, tv := range turns {
			t, err := turnFromValue(tv, id, i, schema)
			if err != nil {
				return Case{}, err
			}
			if seen[t.ID] {
				return Case{}, NewErr(CodeDuplicateTurnID, id+"/"+t.ID)
			}
			seen[t.ID] = true
			c.Turns = append(c.Turns, t)
		}
	case hasInput:
		c.Turns = []Turn{{ID: "turn-1", Input: m["input"], Expected: m["expected"], Metadata: map[string]any{}}}
	default:
		return Case{}, NewErr(CodeCaseHasNoTurns, id)
	}
	return c, nil
}

func turnFromValue(v any, caseID string, index int, schema int) (Turn, error) {
	m, ok := asObject(v)
	if !ok {
		return Turn{}, NewErr(CodeInvalidEvalTurn, caseID+"/"+strconv.Itoa(index+1))
	}
	t := Turn{ID: "turn-" + strconv.Itoa(index+1)}
	if idv, present := m["id"]; present {
		id, ok := idv.(string)
		if !ok || id == "" {
			return Turn{}, NewErr(CodeInvalidEvalTurnID, caseID+"/"+strconv.Itoa(index+1))
		}
		t.ID = id
	}
	allowed := turnKeysV2
	if schema == 1 {
		allowed = turnKeysV1
	}
	if unk := UnknownKeys(m, allowed); len(unk) > 0 {
		return Turn{}, NewErr(CodeUnknownTurnKeys, caseID+"/"+t.ID+": "+KeysDetail(unk))
	}
	input, present := m["input"]
	if !present {
		return Turn{}, NewErr(CodeMissingTurnInput, caseID+"/"+t.ID)
	}
	t.Input = input
	meta, err := metadataValue(m, "turn "+caseID+"/"+t.ID)
	if err != nil {
		return Turn{}, err
	}
	t.Metadata = meta
	t.Expected = canonicalExpected(m)
	return t, nil
}

// canonicalExpected applies the v2 expectation canonicalisation (§5.1).
func canonicalExpected(m map[string]any) any {
	legacy := m["expected"]
	resp, hasResp := m["expected_response"]
	traj, hasTraj := m["expected_trajectory"]
	inter, hasInter := m["expected_intermediate_responses"]
	if !hasResp && !hasTraj && !hasInter {
		return legacy
	}
	var out map[string]any
	switch l := legacy.(type) {
	case map[string]any:
		out = make(map[string]any, len(l)+3)
		for k, v := range l {
			out[k] = v
		}
	case nil:
		out = make(map[string]any, 3)
	default:
		out = map[string]any{"response": l}
	}
	if hasResp {
		out["response"] = resp
	}
	if hasTraj {
		out["trajectory"] = traj
	}
	if hasInter {
		out["intermediate_responses"] = inter
	}
	return out
}

// CheckSet validates a Set built in Go (not through ParseSet) cheaply:
// the structural rules the engine relies on. It is a function rather than
// a method so the root API's Set gains no method.
func CheckSet(s *Set) error { return s.check() }

// check is CheckSet.
func (s *Set) check() error {
	if s == nil {
		return NewErr(CodeInvalidEvalSet, "nil set")
	}
	if s.SchemaVersion != 1 && s.SchemaVersion != 2 {
		return NewErr(CodeUnsupportedSchemaVersion, strconv.Itoa(s.SchemaVersion))
	}
	if s.ID == "" {
		return NewErr(CodeInvalidEvalSetID, "")
	}
	if s.Version == "" {
		return NewErr(CodeInvalidEvalSetVersion, "")
	}
	if len(s.Cases) > MaxCases {
		return NewErr(CodeCaseLimitExceeded, strconv.Itoa(len(s.Cases)))
	}
	seen := make(map[string]bool, len(s.Cases))
	for i := range s.Cases {
		c := &s.Cases[i]
		if c.ID == "" {
			return NewErr(CodeInvalidEvalCaseID, "index "+strconv.Itoa(i))
		}
		if seen[c.ID] {
			return NewErr(CodeDuplicateCaseID, c.ID)
		}
		seen[c.ID] = true
		if len(c.Turns) == 0 {
			return NewErr(CodeCaseHasNoTurns, c.ID)
		}
		if len(c.Turns) > MaxTurns {
			return NewErr(CodeTurnLimitExceeded, c.ID)
		}
		tseen := make(map[string]bool, len(c.Turns))
		for _, t := range c.Turns {
			if t.ID == "" {
				return NewErr(CodeInvalidEvalTurnID, c.ID)
			}
			if tseen[t.ID] {
				return NewErr(CodeDuplicateTurnID, c.ID+"/"+t.ID)
			}
			tseen[t.ID] = true
		}
	}
	return nil
}
