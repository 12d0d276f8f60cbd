package agent

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/plugins"
)

// LLM agent bounds.
const (
	DefaultMaxSteps = 10
	MaxMaxSteps     = 1000
	// TransferToolName is the tool an LLM agent with sub-agents offers the
	// model to delegate the turn.
	TransferToolName = "transfer_to_agent"
)

// LLMConfig configures an LLM agent.
type LLMConfig struct {
	Name        string
	Description string
	Instruction string
	// Model is the provider; ModelName is the requested model name for
	// requests and observations (may be empty: the provider's default).
	Model     model.Provider
	ModelName string
	Tools     []Tool
	// SubAgents can be delegated to with the transfer_to_agent tool.
	SubAgents []Agent
	// MaxSteps bounds model calls per agent turn (default 10, max 1000).
	MaxSteps int
	// OutputSchema, when set, is asked of the model and validated on the
	// final response (JSON text).
	OutputSchema *Schema
	// OutputKey, when set, stores the final text in session state.
	OutputKey string
	Callbacks Callbacks
}

// LLMAgent is an agent that loops: call the model, run the tools it asks
// for, feed the results back, until the model answers with final text or
// MaxSteps model calls were made (max_steps_exceeded).
type LLMAgent struct {
	base
	instruction  string
	provider     model.Provider
	modelName    string
	tools        map[string]boundTool
	decls        []model.ToolDeclaration
	subByName    map[string]Agent
	maxSteps     int
	outputSchema *Schema
	outputKey    string
}

// boundTool is a tool with its compiled parameter schema.
type boundTool struct {
	tool   Tool
	schema *Schema
}

// schemaTool is implemented by tools whose parameter schema is already
// compiled (tools built from AGENT.json), so building agents stays cheap.
type schemaTool interface {
	paramSchema() *Schema
}

// NewLLMAgent validates cfg and builds the agent. Tool parameter schemas
// are compiled here (unless precompiled).
func NewLLMAgent(cfg LLMConfig) (*LLMAgent, error) {
	if cfg.Name == "" {
		return nil, configErr("agent name is required")
	}
	if cfg.Model == nil {
		return nil, configErr("agent %q has no model", cfg.Name)
	}
	steps := cfg.MaxSteps
	if steps == 0 {
		steps = DefaultMaxSteps
	}
	if steps < 1 || steps > MaxMaxSteps {
		return nil, configErr("agent %q: max_steps %d out of range 1..%d", cfg.Name, cfg.MaxSteps, MaxMaxSteps)
	}
	a := &LLMAgent{
		base:         base{name: cfg.Name, description: cfg.Description, subAgents: cfg.SubAgents, cb: cfg.Callbacks},
		instruction:  cfg.Instruction,
		provider:     cfg.Model,
		modelName:    cfg.ModelName,
		maxSteps:     steps,
		outputSchema: cfg.OutputSchema,
		outputKey:    cfg.OutputKey,
	}
	if len(cfg.Tools) > 0 || len(cfg.SubAgents) > 0 {
		// An agent without tools keeps a nil map (read only): agents are
		// built per eval sample.
		a.tools = make(map[string]boundTool, len(cfg.Tools)+1)
	}
	for _, t := range cfg.Tools {
		if t == nil {
			return nil, configErr("agent %q: nil tool", cfg.Name)
		}
		d := t.Declaration()
		if d.Name == "" || d.Name == TransferToolName {
			return nil, configErr("agent %q: tool name %q is empty or reserved", cfg.Name, d.Name)
		}
		if _, dup := a.tools[d.Name]; dup {
			return nil, configErr("agent %q: duplicate tool %q", cfg.Name, d.Name)
		}
		bt := boundTool{tool: t}
		if st, ok := t.(schemaTool); ok {
			bt.schema = st.paramSchema()
		} else if d.Parameters != nil {
			s, err := CompileSchema(d.Parameters)
			if err != nil {
				return nil, configErr("agent %q: tool %q parameters: %v", cfg.Name, d.Name, err)
			}
			bt.schema = s
		}
		a.tools[d.Name] = bt
		a.decls = append(a.decls, d)
	}
	if len(cfg.SubAgents) > 0 {
		a.subByName = make(map[string]Agent, len(cfg.SubAgents))
		names := make([]any, 0, len(cfg.SubAgents))
		for _, s := range cfg.SubAgents {
			if s == nil {
				return nil, configErr("agent %q: nil sub-agent", cfg.Name)
			}
			a.subByName[s.Name()] = s
			names = append(names, s.Name())
		}
		params := map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"agent_name": map[string]any{"type": "string", "enum": names}},
			"required":             []any{"agent_name"},
			"additionalProperties": false,
		}
		s, err := CompileSchema(params)
		if err != nil {
			return nil, configErr("agent %q: transfer schema: %v", cfg.Name, err)
		}
		decl := model.ToolDeclaration{Name: TransferToolName, Description: "Hand the conversation to one of the sub-agents: " + describeAgents(cfg.SubAgents), Parameters: params}
		a.tools[TransferToolName] = boundTool{schema: s}
		a.decls = append(a.decls, decl)
	}
	return a, nil
}

func describeAgents(as []Agent) string {
	s := ""
	for i, a := range as {
		if i > 0 {
			s += "; "
		}
		s += a.Name()
		if d := a.Description(); d != "" {
			s += " (" + d + ")"
		}
	}
	return s
}

func (a *LLMAgent) kind() string { return "llm" }

// history builds the conversation the model sees: the instruction, then
// the session's content events. The user's messages and this agent's own
// turns are kept as they are; another agent's text is presented as user
// context ("For context: [name] said: ..."), and its tool traffic is left
// out, so each agent's scripted step count starts at its own turns.
func (a *LLMAgent) history(ic *invocation) (msgs []model.Message) {
	// The events are read in place, under the session's lock: copying
	// them first was a sample's largest copy of its session.
	ic.r.sessions.withEvents(ic.sessionID, ic.historyCut, func(evs []session.Event) {
		// Room for the instruction, the history and one model reply: a
		// single-step answer, the common case, never grows the slice
		// (room for every step of maxSteps was ~0.9 KiB per sample,
		// mostly unused); tool steps append as they go.
		msgs = make([]model.Message, 0, len(evs)+2)
		if a.instruction != "" {
			msgs = append(msgs, model.Message{Role: model.RoleSystem, Parts: []model.Part{{Text: a.instruction}}})
		}
		for i := range evs {
			ev := &evs[i]
			if ev.Content == nil || ev.Workflow != nil || ev.Partial {
				continue
			}
			switch ev.Author {
			case "user", a.name:
				msgs = append(msgs, *ev.Content)
			default:
				if t := ev.Content.Text(); t != "" && ev.Content.Role == model.RoleModel {
					msgs = append(msgs, model.Message{Role: model.RoleUser, Parts: []model.Part{{Text: "For context: [" + ev.Author + "] said: " + t}}})
				}
			}
		}
	})
	return msgs
}

// body is the LLM loop.
func (a *LLMAgent) body(ctx context.Context, ic *invocation) (*model.Message, error) {
	msgs := a.history(ic)
	for range a.maxSteps {
		req := &model.Request{
			Model:        a.modelName,
			Messages:     msgs[:len(msgs):len(msgs)],
			Tools:        a.decls,
			OutputSchema: a.outputSchema.Doc(),
		}
		resp, err := a.callModel(ctx, ic, req)
		if err != nil {
			return nil, err
		}
		// The event with its content and usage in one allocation.
		me := &modelEvent{ev: ic.eventHead(a.name), content: resp.Message, usage: resp.Usage}
		ev := &me.ev
		content := &me.content
		content.Role = model.RoleModel
		for i := range content.Parts {
			if tc := content.Parts[i].ToolCall; tc != nil && tc.ID == "" {
				c := *tc
				c.ID = ic.r.ids.NewID("call")
				content.Parts[i].ToolCall = &c
			}
		}
		calls := content.ToolCalls()
		ev.Content = content
		ev.Usage = &me.usage
		final := len(calls) == 0
		ev.Final = final
		if final {
			if err := a.validateOutput(content.Text()); err != nil {
				return nil, err
			}
			if a.outputKey != "" {
				ev.Actions.StateDelta = map[string]any{a.outputKey: content.Text()}
			}
		}
		ev, err = ic.emit(ctx, ev, final && a.outputSchema != nil)
		if err != nil {
			return nil, err
		}
		if final {
			return ev.Content, nil
		}
		msgs = append(msgs, *ev.Content)

		results := make([]model.Part, 0, len(calls))
		delta := map[string]any(nil)
		transfer := ""
		for i := range calls {
			res, sd, to, err := a.runTool(ctx, ic, calls[i])
			if err != nil {
				return nil, err
			}
			for k, v := range sd {
				if delta == nil {
					delta = map[string]any{}
				}
				delta[k] = v
			}
			if to != "" && transfer == "" {
				transfer = to
			}
			results = append(results, model.Part{ToolResult: res})
		}
		tev := ic.newEvent(a.name)
		tev.Content = &model.Message{Role: model.RoleTool, Parts: results}
		tev.Actions.StateDelta = delta
		tev.Actions.TransferToAgent = transfer
		tev, err = ic.emit(ctx, tev, false)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, *tev.Content)
		if transfer != "" {
			return ic.runAgent(ctx, a.subByName[transfer])
		}
	}
	return nil, &Error{Code: CodeMaxStepsExceeded, Agent: a.name}
}

// outcomeAlloc is what a model call's outcome points to: its usage and
// its one finish reason (callModel).
type outcomeAlloc struct {
	usage   observability.Usage
	reasons [1]string
}

// modelEvent is a model turn's event with the content and usage it points
// to (body).
type modelEvent struct {
	ev      session.Event
	content model.Message
	usage   model.Usage
}

func (a *LLMAgent) validateOutput(text string) error {
	if a.outputSchema == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return &Error{Code: CodeOutputSchemaViolation, Agent: a.name, Detail: "final response is not JSON"}
	}
	if err := a.outputSchema.Validate(v); err != nil {
		return &Error{Code: CodeOutputSchemaViolation, Agent: a.name, Detail: err.Error()}
	}
	return nil
}

// callModel is the model phase: global before_model → local BeforeModel
// (skipped when a global returned) → provider (skipped when either
// returned) → on_model_error on failure → global after_model → local
// AfterModel (skipped when a global after_model returned).
func (a *LLMAgent) callModel(ctx context.Context, ic *invocation, req *model.Request) (resp *model.Response, err error) {
	ctx, end := ic.r.observer.Start(ctx, observability.Observation{
		Kind:         observability.KindModel,
		InvocationID: ic.invocationID,
		SessionID:    ic.sessionID,
		Agent:        a.name,
		Provider:     a.provider.Name(),
		Model:        a.modelName,
		WorkflowID:   ic.workflowID,
		WorkflowKind: ic.workflowKind,
		NodeID:       ic.nodeID,
	})
	defer func() {
		o := observability.Outcome{Err: err, ErrorType: ErrorType(err)}
		if resp != nil && err == nil {
			// The usage and the finish reason in one allocation.
			b := &outcomeAlloc{usage: observability.Usage{
				InputTokens:         resp.Usage.InputTokens,
				OutputTokens:        resp.Usage.OutputTokens,
				CacheReadTokens:     resp.Usage.CacheReadTokens,
				CacheCreationTokens: resp.Usage.CacheCreationTokens,
			}}
			o.Usage = &b.usage
			if resp.FinishReason != "" {
				b.reasons[0] = resp.FinishReason
				o.FinishReasons = b.reasons[:]
			}
			o.ResponseModel, o.ResponseID = resp.Model, resp.ID
		}
		end(o)
	}()
	cc := ic.callContext(a.name)
	cc.Model = a.modelName
	cb := &a.cb

	res := ic.runHook(ctx, plugins.HookBeforeModel, cc, req)
	switch res.Disposition {
	case plugins.DispositionAmend:
		r, ok := res.Value.(*model.Request)
		if !ok {
			return nil, invalidValue(a.name, plugins.HookBeforeModel)
		}
		req = r
	case plugins.DispositionReturn:
		r, ok := res.Value.(*model.Response)
		if !ok {
			return nil, invalidValue(a.name, plugins.HookBeforeModel)
		}
		resp = r
	case plugins.DispositionHalt, plugins.DispositionError:
		return nil, hookErr(a.name, res)
	}
	if resp == nil && cb.BeforeModel != nil {
		r, err := cb.BeforeModel(ctx, ic.localContext(a.name), req)
		if err != nil {
			return nil, callbackErr(a.name, "before_model", err)
		}
		resp = r
	}
	if resp == nil {
		r, perr := a.provider.Generate(ctx, req)
		if perr != nil {
			recovered, err := a.modelError(ctx, ic, cc, perr)
			if err != nil {
				return nil, err
			}
			r = recovered
		}
		resp = r
	}

	res = ic.runHook(ctx, plugins.HookAfterModel, cc, resp)
	globalReturned := false
	switch res.Disposition {
	case plugins.DispositionAmend, plugins.DispositionReturn:
		r, ok := res.Value.(*model.Response)
		if !ok {
			return nil, invalidValue(a.name, plugins.HookAfterModel)
		}
		resp = r
		globalReturned = res.Disposition == plugins.DispositionReturn
	case plugins.DispositionHalt, plugins.DispositionError:
		return nil, hookErr(a.name, res)
	}
	if !globalReturned && cb.AfterModel != nil {
		r, err := cb.AfterModel(ctx, ic.localContext(a.name), resp)
		if err != nil {
			return nil, callbackErr(a.name, "after_model", err)
		}
		if r != nil {
			resp = r
		}
	}
	return resp, nil
}

// modelError runs on_model_error: a plugin may return a response that
// suppresses the failure; otherwise the failure is model_failed wrapping
// the provider's *model.Error.
func (a *LLMAgent) modelError(ctx context.Context, ic *invocation, cc plugins.CallContext, perr error) (*model.Response, error) {
	if ctx.Err() != nil {
		return nil, &Error{Code: CodeModelFailed, Agent: a.name, Err: perr}
	}
	res := ic.runHook(ctx, plugins.HookOnModelError, cc, plugins.FailureOf("model", a.modelName, perr))
	switch res.Disposition {
	case plugins.DispositionReturn:
		if r, ok := res.Value.(*model.Response); ok {
			return r, nil
		}
		return nil, invalidValue(a.name, plugins.HookOnModelError)
	case plugins.DispositionHalt, plugins.DispositionError:
		return nil, hookErr(a.name, res)
	}
	return nil, &Error{Code: CodeModelFailed, Agent: a.name, Err: perr}
}

// runTool is the tool phase for one call: global before_tool → local
// BeforeTool (skipped when a global returned) → argument validation and
// the tool (skipped when either returned) → on_tool_error on failure →
// global after_tool → local AfterTool (skipped when a global after_tool
// returned). Tool failures become result errors the model sees; only
// plugin halts and closed-policy failures are errors of the run. It
// returns the result, the tool's state delta and a transfer target.
func (a *LLMAgent) runTool(ctx context.Context, ic *invocation, call model.ToolCall) (result *model.ToolResult, delta map[string]any, transfer string, err error) {
	ctx, end := ic.r.observer.Start(ctx, observability.Observation{
		Kind:         observability.KindTool,
		InvocationID: ic.invocationID,
		SessionID:    ic.sessionID,
		Agent:        a.name,
		Tool:         call.Name,
		CallID:       call.ID,
		WorkflowID:   ic.workflowID,
		WorkflowKind: ic.workflowKind,
		NodeID:       ic.nodeID,
	})
	defer func() {
		o := observability.Outcome{Err: err, ErrorType: ErrorType(err)}
		if err == nil && result != nil && result.Error != "" {
			o.ErrorType = CodeToolFailed
		}
		end(o)
	}()
	cc := ic.callContext(a.name)
	cc.Tool, cc.CallID = call.Name, call.ID
	cc.RetryAttempt = ic.toolFailures.get(a.name, call.Name)
	cb := &a.cb
	result = &model.ToolResult{ID: call.ID, Name: call.Name}

	done := false
	res := ic.runHook(ctx, plugins.HookBeforeTool, cc, &plugins.ToolInvocation{Call: call})
	switch res.Disposition {
	case plugins.DispositionAmend:
		inv, ok := res.Value.(*plugins.ToolInvocation)
		if !ok {
			return nil, nil, "", invalidValue(a.name, plugins.HookBeforeTool)
		}
		// Only the arguments may be amended; the call's identity stays.
		call.Args = inv.Call.Args
	case plugins.DispositionReturn:
		m, ok := res.Value.(map[string]any)
		if !ok {
			return nil, nil, "", invalidValue(a.name, plugins.HookBeforeTool)
		}
		applyToolResultMap(result, m)
		done = true
	case plugins.DispositionHalt, plugins.DispositionError:
		return nil, nil, "", hookErr(a.name, res)
	}
	if !done && cb.BeforeTool != nil {
		call.Args = cloneArgs(call.Args)
		r, err := cb.BeforeTool(ctx, ic.localContext(a.name), &call)
		if err != nil {
			return nil, nil, "", callbackErr(a.name, "before_tool", err)
		}
		if r != nil {
			result.Result, result.Error = r.Result, r.Error
			done = true
		}
	}
	if !done {
		var terr error
		var out any
		out, delta, transfer, terr = a.execute(ctx, ic, call)
		if terr != nil {
			if ctx.Err() != nil {
				return nil, nil, "", &Error{Code: CodeRunCancelled, Agent: a.name, Tool: call.Name, Err: ctx.Err()}
			}
			recovered := false
			// This failure is attempt cc.RetryAttempt; the next call of the
			// same tool is attempt +1.
			ic.toolFailures.inc(a.name, call.Name)
			res := ic.runHook(ctx, plugins.HookOnToolError, cc, plugins.FailureOf("tool", call.Name, terr))
			switch res.Disposition {
			case plugins.DispositionReturn:
				m, ok := res.Value.(map[string]any)
				if !ok {
					return nil, nil, "", invalidValue(a.name, plugins.HookOnToolError)
				}
				applyToolResultMap(result, m)
				recovered = true
			case plugins.DispositionHalt, plugins.DispositionError:
				return nil, nil, "", hookErr(a.name, res)
			}
			if !recovered {
				result.Error = boundToolError(terr)
			}
		} else {
			result.Result = out
		}
	}

	res = ic.runHook(ctx, plugins.HookAfterTool, cc, toolResultMap(result))
	globalReturned := false
	switch res.Disposition {
	case plugins.DispositionAmend, plugins.DispositionReturn:
		m, ok := res.Value.(map[string]any)
		if !ok {
			return nil, nil, "", invalidValue(a.name, plugins.HookAfterTool)
		}
		applyToolResultMap(result, m)
		globalReturned = res.Disposition == plugins.DispositionReturn
	case plugins.DispositionHalt, plugins.DispositionError:
		return nil, nil, "", hookErr(a.name, res)
	}
	if !globalReturned && cb.AfterTool != nil {
		r, err := cb.AfterTool(ctx, ic.localContext(a.name), &call, result)
		if err != nil {
			return nil, nil, "", callbackErr(a.name, "after_tool", err)
		}
		if r != nil {
			result.Result, result.Error = r.Result, r.Error
		}
	}
	return result, delta, transfer, nil
}

// toolError is a tool failure the model sees as a value.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

// execute validates the arguments and runs the tool (or the transfer).
func (a *LLMAgent) execute(ctx context.Context, ic *invocation, call model.ToolCall) (any, map[string]any, string, error) {
	bt, ok := a.tools[call.Name]
	if !ok {
		return nil, nil, "", &Error{Code: CodeUnknownTool, Agent: a.name, Tool: call.Name}
	}
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	if bt.schema != nil {
		if err := bt.schema.Validate(jsonValue(args)); err != nil {
			return nil, nil, "", &Error{Code: CodeInvalidToolArgs, Agent: a.name, Tool: call.Name, Detail: err.Error()}
		}
	}
	if call.Name == TransferToolName {
		to, _ := args["agent_name"].(string)
		return map[string]any{"transferred_to": to}, nil, to, nil
	}
	tc := &ToolContext{InvocationID: ic.invocationID, SessionID: ic.sessionID, Agent: a.name, CallID: call.ID}
	out, err := safeCall(ctx, bt.tool, tc, args)
	if err != nil {
		return nil, nil, "", err
	}
	return out, tc.stateDelta, "", nil
}

// safeCall runs a tool, turning a panic into a tool error value.
func safeCall(ctx context.Context, t Tool, tc *ToolContext, args map[string]any) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, &toolError{msg: "tool panicked"}
		}
	}()
	return t.Call(ctx, tc, args)
}

// boundToolError is the error text the model sees: the stable code and
// detail of runtime errors, the tool's own message otherwise, bounded.
func boundToolError(err error) string {
	var e *Error
	msg := err.Error()
	if errors.As(err, &e) {
		msg = e.Code
		if e.Detail != "" {
			msg += ": " + e.Detail
		}
	}
	if len(msg) > MaxToolErrorBytes {
		msg = msg[:MaxToolErrorBytes-3] + "..."
	}
	return msg
}

// jsonValue returns v in the shape the schema validator expects; values
// that came from JSON pass through untouched.
func jsonValue(args map[string]any) any {
	if plainJSON(args) {
		return args
	}
	return normalizeJSON(args)
}

func plainJSON(v any) bool {
	switch t := v.(type) {
	case nil, string, bool, float64, json.Number:
		return true
	case map[string]any:
		for _, x := range t {
			if !plainJSON(x) {
				return false
			}
		}
		return true
	case []any:
		for _, x := range t {
			if !plainJSON(x) {
				return false
			}
		}
		return true
	}
	return false
}

func cloneArgs(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
