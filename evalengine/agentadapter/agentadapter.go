// Package agentadapter is the default evalengine Adapter: it evaluates an
// agent described by AGENT.json with the agent runtime, in process.
//
// The config is parsed and prepared once (agent.ParseConfig: providers,
// schemas and tools are built then and shared). Every (case, sample) gets
// a fresh Runner from Config.Build, with its own in-memory session service
// and a deterministic id generator, so no state leaks between samples and
// event ids in reports are stable ("evt-1", "inv-1", ...). Close tears the
// Runner down.
//
// Mapping to the engine:
//
//   - Turn input: a string is the user's text; a Google ADK Content object
//     ({"parts": [{"text": ...}], ...}) whose parts are all text is joined;
//     any other JSON value is sent as its JSON encoding.
//   - Output: the text of the turn's last final event ("" when none).
//   - Trajectory: every tool call (kind tool_call, with args) and tool
//     result (kind tool_response; a failed tool's result is {"error": msg})
//     in event order, with the runtime's call ids.
//   - Events (when Options.CaptureEvents): one JSON object per event in the
//     contract's shape, {id, invocation_id, author, final, content} with
//     content {type: "text", role, text}, {type: "tool_calls", calls:
//     [{name, args, call_id}]} or {type: "tool_response", name, result,
//     call_id}; a runtime event carrying several tool results becomes one
//     object per result, sharing the event id.
//   - Metadata: {"invocation_id", "usage": {input_tokens, output_tokens}}.
//   - session_input seeds the session before the first turn. An object with
//     any of the Google ADK SessionInput keys (app_name, user_id, state)
//     is read as that: state becomes the initial session state, user_id the
//     session's user. Any other object is the initial state itself. A
//     non-object is refused (tag invalid_session_input).
//   - Failures become sample error tags: the runtime's stable error type
//     (max_steps_exceeded, script_exhausted, server_error, transport, ...;
//     agent.ErrorType), agent_build_failed when a Runner cannot be built.
//     A done context is returned as is, so the engine records timeout or
//     cancelled.
//
// It imports evalengine and agent; it must not import bus, coordinator,
// worker or store.
package agentadapter

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/fadcedab/adk/agent"
	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/evalengine"
)

// Sample error tags of this adapter (besides the runtime's error types).
const (
	TagBuildFailed         = "agent_build_failed"
	TagInvalidSessionInput = "invalid_session_input"
	TagCloseFailed         = "agent_close_failed"
)

// Defaults for Options.
const (
	DefaultAppName = "adk-eval"
	DefaultUserID  = "eval-user"
)

// ErrNilConfig is returned by New without a config.
var ErrNilConfig = errors.New("agentadapter: nil agent config")

// Options configure the adapter. The zero value is usable.
type Options struct {
	// AppName names the sessions (default "adk-eval").
	AppName string
	// UserID is the session user when session_input names none (default
	// "eval-user").
	UserID string
	// CaptureEvents converts runtime events into TurnOutput.Events. Leave
	// it off when the run does not keep events: it is the adapter's main
	// per-turn cost.
	CaptureEvents bool
	// Build carries extra build options (Funcs for Go tools, Plugins,
	// Observer, Callbacks). Sessions, IDs and AppName are set per sample.
	Build agent.BuildOptions
	// WrapModel, if set, wraps the model providers of each sample's
	// agent, knowing the sample (the response cache keys on its index).
	// It overrides Build.WrapModel.
	WrapModel func(p model.Provider, modelName string, info evalengine.SampleInfo) model.Provider
}

// Adapter is the default agent adapter. It is safe for concurrent use.
type Adapter struct {
	cfg  *agent.Config
	opts Options
}

// New returns an adapter over a prepared config (agent.LoadConfig or
// agent.ParseConfig).
func New(cfg *agent.Config, opts Options) (*Adapter, error) {
	if cfg == nil {
		return nil, ErrNilConfig
	}
	if opts.AppName == "" {
		opts.AppName = DefaultAppName
	}
	if opts.UserID == "" {
		opts.UserID = DefaultUserID
	}
	return &Adapter{cfg: cfg, opts: opts}, nil
}

// NewSession builds a fresh Runner and session for one (case, sample).
func (a *Adapter) NewSession(ctx context.Context, info evalengine.SampleInfo) (evalengine.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var sessionInput any
	if info.Case != nil {
		sessionInput = info.Case.SessionInput
	}
	userID, state, err := parseSessionInput(sessionInput, a.opts.UserID)
	if err != nil {
		return nil, err
	}
	bo := a.opts.Build
	bo.AppName = a.opts.AppName
	bo.Sessions = agent.NewInMemorySessionService()
	bo.IDs = agent.SequentialIDs()
	if wrap := a.opts.WrapModel; wrap != nil {
		bo.WrapModel = func(p model.Provider, name string) model.Provider { return wrap(p, name, info) }
	}
	r, err := a.cfg.Build(bo)
	if err != nil {
		return nil, &evalengine.AdapterError{Tag: TagBuildFailed, Err: err}
	}
	s := &agentSession{a: a, r: r, id: info.SampleID, userID: userID}
	if s.id == "" {
		s.id = "sample"
	}
	if len(state) > 0 {
		if err := s.seed(state, bo.IDs); err != nil {
			_ = r.Close()
			return nil, &evalengine.AdapterError{Tag: TagInvalidSessionInput, Err: err}
		}
	}
	return s, nil
}

// parseSessionInput reads a case's session_input (package doc).
func parseSessionInput(v any, defUser string) (userID string, state map[string]any, err error) {
	if v == nil {
		return defUser, nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "", nil, &evalengine.AdapterError{Tag: TagInvalidSessionInput}
	}
	_, hasApp := m["app_name"]
	_, hasUser := m["user_id"]
	st, hasState := m["state"]
	if !hasApp && !hasUser && !hasState {
		return defUser, m, nil
	}
	userID = defUser
	if hasUser {
		u, ok := m["user_id"].(string)
		if !ok {
			return "", nil, &evalengine.AdapterError{Tag: TagInvalidSessionInput}
		}
		if u != "" {
			userID = u
		}
	}
	if hasState && st != nil {
		state, ok = st.(map[string]any)
		if !ok {
			return "", nil, &evalengine.AdapterError{Tag: TagInvalidSessionInput}
		}
	}
	return userID, state, nil
}

type agentSession struct {
	a      *Adapter
	r      *agent.Runner
	id     string
	userID string
}

// seed creates the session and applies the initial state as the delta of
// a content-free event, which the model never sees.
func (s *agentSession) seed(state map[string]any, ids agent.IDGenerator) error {
	sessions := s.r.Sessions()
	if _, err := sessions.Create(s.r.AppName(), s.userID, s.id); err != nil {
		return err
	}
	return sessions.Append(s.id, &session.Event{ID: ids.NewID("evt"), Author: "user", Actions: session.Actions{StateDelta: state}})
}

// Turn runs one user turn through the Runner.
func (s *agentSession) Turn(ctx context.Context, in evalengine.TurnInput) (evalengine.TurnOutput, error) {
	req := agent.RunRequest{
		SessionID: s.id,
		UserID:    s.userID,
		Message:   model.Message{Role: model.RoleUser, Parts: []model.Part{{Text: inputText(in.Input)}}},
	}
	// The loop body is a closure (range over func): every variable it
	// sets would be its own heap allocation, so they are one struct, and
	// it breaks rather than returns (a return in it moves the results to
	// the heap).
	st := &struct {
		out          evalengine.TurnOutput
		final        string
		invocationID string
		inTok, outTk int64
		err          error // the run's failure, its last yield
	}{}
	capture := s.a.opts.CaptureEvents
	if capture {
		st.out.Events = []any{}
	}
	for ev, err := range s.r.Run(ctx, req) {
		if err != nil {
			st.err = err
			break
		}
		st.invocationID = ev.InvocationID
		if ev.Usage != nil {
			st.inTok += ev.Usage.InputTokens
			st.outTk += ev.Usage.OutputTokens
		}
		if ev.Content != nil {
			for i := range ev.Content.Parts {
				p := &ev.Content.Parts[i]
				switch {
				case p.ToolCall != nil:
					st.out.Trajectory = append(st.out.Trajectory, evalengine.ToolStep{
						Kind: evalengine.KindToolCall, Tool: p.ToolCall.Name, CallID: p.ToolCall.ID, Args: argsOrEmpty(p.ToolCall.Args),
					})
				case p.ToolResult != nil:
					st.out.Trajectory = append(st.out.Trajectory, evalengine.ToolStep{
						Kind: evalengine.KindToolResponse, Tool: p.ToolResult.Name, CallID: p.ToolResult.ID, Result: toolResult(p.ToolResult),
					})
				}
			}
			if ev.Final {
				st.final = ev.Content.Text()
			}
		}
		if capture {
			st.out.Events = appendEvents(st.out.Events, ev)
		}
	}
	if ctx.Err() != nil {
		return evalengine.TurnOutput{}, ctx.Err()
	}
	if st.err != nil {
		return evalengine.TurnOutput{}, &evalengine.AdapterError{Tag: errorTag(st.err), Err: st.err}
	}
	out := st.out
	out.Output = st.final
	out.Metadata = map[string]any{
		"invocation_id": st.invocationID,
		"usage":         map[string]any{"input_tokens": st.inTok, "output_tokens": st.outTk},
	}
	return out, nil
}

// Close releases the Runner (its plugin pipeline); the session service is
// the sample's own and goes with it.
func (s *agentSession) Close() error {
	if err := s.r.Close(); err != nil {
		return &evalengine.AdapterError{Tag: TagCloseFailed, Err: err}
	}
	return nil
}

// errorTag is the sample error tag of a failed turn: the runtime's stable
// error type, or adapter_failed when it has none.
func errorTag(err error) string {
	if t := agent.ErrorType(err); t != "" && t != "unknown" {
		return t
	}
	return evalengine.TagAdapterFailed
}

// inputText turns a turn input into the user's message text.
func inputText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case map[string]any:
		if parts, ok := x["parts"].([]any); ok && len(parts) > 0 {
			var b strings.Builder
			allText := true
			for _, pv := range parts {
				p, ok := pv.(map[string]any)
				t, isText := p["text"].(string)
				if !ok || !isText {
					allText = false
					break
				}
				b.WriteString(t)
			}
			if allText {
				return b.String()
			}
		}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func argsOrEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// toolResult is what a trajectory records for a tool's answer.
func toolResult(r *model.ToolResult) any {
	if r.Error != "" {
		return map[string]any{"error": r.Error}
	}
	return r.Result
}

// appendEvents converts one runtime event into the contract's event
// objects (package doc) and appends them.
func appendEvents(dst []any, ev *session.Event) []any {
	head := func(content map[string]any) map[string]any {
		m := map[string]any{
			"id":            ev.ID,
			"invocation_id": ev.InvocationID,
			"author":        ev.Author,
			"final":         ev.Final,
			"content":       content,
		}
		if ev.Actions.TransferToAgent != "" {
			m["transfer_to_agent"] = ev.Actions.TransferToAgent
		}
		return m
	}
	if ev.Workflow != nil {
		return append(dst, head(map[string]any{"type": "workflow", "workflow": jsonValue(ev.Workflow)}))
	}
	if ev.Content == nil {
		return append(dst, head(nil))
	}
	var calls []any
	var results []map[string]any
	// text is the text parts joined: the one part's own string when there
	// is one (a model's answer, not copied), else joined.
	var text string
	var joined strings.Builder
	texts := 0
	for i := range ev.Content.Parts {
		p := &ev.Content.Parts[i]
		switch {
		case p.ToolCall != nil:
			calls = append(calls, map[string]any{"name": p.ToolCall.Name, "args": argsOrEmpty(p.ToolCall.Args), "call_id": p.ToolCall.ID})
		case p.ToolResult != nil:
			results = append(results, map[string]any{"type": "tool_response", "name": p.ToolResult.Name, "result": toolResult(p.ToolResult), "call_id": p.ToolResult.ID})
		default:
			if texts++; texts == 1 {
				text = p.Text
				break
			}
			if texts == 2 {
				joined.WriteString(text)
			}
			joined.WriteString(p.Text)
		}
	}
	if texts > 1 {
		text = joined.String()
	}
	switch {
	case len(results) > 0:
		for _, r := range results {
			dst = append(dst, head(r))
		}
		return dst
	case len(calls) > 0:
		c := map[string]any{"type": "tool_calls", "calls": calls}
		if text != "" {
			c["text"] = text
		}
		return append(dst, head(c))
	default:
		return append(dst, head(map[string]any{"type": "text", "role": roleValue(ev.Content.Role), "text": text}))
	}
}

// roleValue is string(r) as a JSON value: the runtime's roles are boxed
// constants, so an event's role costs no allocation.
func roleValue(r model.Role) any {
	switch r {
	case model.RoleModel:
		return string(model.RoleModel)
	case model.RoleUser:
		return string(model.RoleUser)
	case model.RoleTool:
		return string(model.RoleTool)
	case model.RoleSystem:
		return string(model.RoleSystem)
	}
	return string(r)
}

// jsonValue maps a Go value to its generic JSON form (maps, slices,
// float64), so the engine's pruning and encoding see plain JSON.
func jsonValue(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil
	}
	return out
}
