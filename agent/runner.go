package agent

import (
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/internal/samplescope"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/plugins"
)

// DefaultAppName names sessions when RunnerOptions.AppName is empty.
const DefaultAppName = "adk"

// Runner runs an agent tree for sessions: it owns the Runner-global plugin
// pipeline (inherited by every sub-agent), the session service and the
// observer. One Runner serves any number of concurrent runs on distinct
// sessions.
type Runner struct {
	appName      string
	root         Agent
	sessions     *InMemorySessionService
	pipeline     *plugins.Pipeline
	ownsPipeline bool
	observer     observability.Observer
	lifecycle    observability.LifecycleObserver // observer's optional part, or nil
	ids          IDGenerator
	now          func() time.Time
}

// RunnerOptions configure a Runner. Zero fields take defaults.
type RunnerOptions struct {
	// AppName names the sessions the runner creates (default "adk").
	AppName string
	// Sessions is the session service (default: a new in-memory one).
	Sessions *InMemorySessionService
	// Plugins is the compiled Runner-global pipeline (nil: none). The
	// caller keeps ownership: Runner.Close does not close it.
	Plugins *plugins.Pipeline
	// Observer receives the run, agent, workflow, model and tool
	// observation points (default observability.Nop).
	Observer observability.Observer
	// IDs mints ids (default RandomIDs; SequentialIDs for tests).
	IDs IDGenerator
	// Now is the wall clock for event times (default time.Now).
	Now func() time.Time
}

// NewRunner validates the agent tree (non-empty, unique names) and builds
// a Runner.
func NewRunner(root Agent, opts RunnerOptions) (*Runner, error) {
	if root == nil {
		return nil, configErr("nil root agent")
	}
	seen := map[string]bool{}
	if err := checkTree(root, seen); err != nil {
		return nil, err
	}
	r := &Runner{
		appName:  opts.AppName,
		root:     root,
		sessions: opts.Sessions,
		pipeline: opts.Plugins,
		observer: opts.Observer,
		ids:      opts.IDs,
		now:      opts.Now,
	}
	if r.appName == "" {
		r.appName = DefaultAppName
	}
	if r.sessions == nil {
		r.sessions = NewInMemorySessionService()
	}
	if r.observer == nil {
		r.observer = observability.Nop
	}
	r.lifecycle, _ = r.observer.(observability.LifecycleObserver)
	if r.ids == nil {
		r.ids = RandomIDs()
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

func checkTree(a Agent, seen map[string]bool) error {
	if a.Name() == "" || a.Name() == "user" {
		return configErr("agent name %q is reserved or empty", a.Name())
	}
	if seen[a.Name()] {
		return configErr("duplicate agent name %q", a.Name())
	}
	seen[a.Name()] = true
	for _, s := range a.SubAgents() {
		if s == nil {
			return configErr("agent %q has a nil sub-agent", a.Name())
		}
		if err := checkTree(s, seen); err != nil {
			return err
		}
	}
	return nil
}

// Root returns the root agent.
func (r *Runner) Root() Agent { return r.root }

// Sessions returns the runner's session service.
func (r *Runner) Sessions() *InMemorySessionService { return r.sessions }

// AppName returns the app name sessions are created under.
func (r *Runner) AppName() string { return r.appName }

// Close releases what the runner owns: the plugin pipeline when the runner
// compiled it (Config.Build), never one passed in RunnerOptions.
func (r *Runner) Close() error {
	if r.ownsPipeline && r.pipeline != nil {
		return r.pipeline.Close()
	}
	return nil
}

// RunRequest is one user turn.
type RunRequest struct {
	// SessionID names the session; it is created on first use.
	SessionID string
	// UserID owns the session.
	UserID string
	// Message is the user's message (role user).
	Message model.Message
	// InvocationID, when set, is used instead of a generated one.
	InvocationID string
}

// errConsumerStopped ends a run whose caller stopped iterating.
var errConsumerStopped = errors.New("agent: event consumer stopped")

// Run runs one turn and yields its events in order as they are appended to
// the session: model turns, tool results and workflow lifecycle notices
// (the user's own message is appended but not yielded). A failed turn
// yields one final (nil, err). Breaking out of the loop cancels the run;
// every goroutine the run started has ended when the loop is left.
//
// The run's context is ctx's child, cancelled when Run returns, unless
// ctx is an eval sample's context whose scope the sample's owner lends
// (internal/samplescope): the run then uses ctx itself, which ends when
// the sample ends, and breaking out of the loop cancels the sample.
func (r *Runner) Run(ctx context.Context, req RunRequest) iter.Seq2[*session.Event, error] {
	return func(yield func(*session.Event, error) bool) {
		ic, err := r.newInvocation(req)
		if err != nil {
			yield(nil, err)
			return
		}
		// The run's cancel scope: its own, or an eval sample's that the
		// sample's owner lends it (samplescope), whose context ends with
		// the sample rather than with the run.
		scope := samplescope.Of(ctx)
		ctx, cancel, claim := runContext(ctx, scope)
		if cancel != nil {
			defer cancel()
		} else {
			defer scope.ReleaseRun(claim)
		}
		stopped := false
		ic.sink = func(_ context.Context, ev *session.Event) error {
			if stopped {
				return errConsumerStopped
			}
			if !yield(ev, nil) {
				stopped = true
				if cancel != nil {
					cancel()
				} else {
					scope.CancelSample(claim)
				}
				return errConsumerStopped
			}
			return nil
		}
		if err := ic.run(ctx); err != nil && !stopped {
			yield(nil, err)
		}
	}
}

// runContext is a run's context and its cancel: ctx itself, a nil cancel
// and the claim's token when ctx's sample scope is lent to the run (Run).
func runContext(ctx context.Context, scope *samplescope.Scope) (context.Context, context.CancelFunc, uint64) {
	if claim := scope.ClaimRun(ctx); claim != 0 {
		return ctx, nil, claim
	}
	ctx, cancel := context.WithCancel(ctx)
	return ctx, cancel, 0
}

func (r *Runner) newInvocation(req RunRequest) (*invocation, error) {
	if req.SessionID == "" || req.UserID == "" {
		return nil, &Error{Code: CodeInvalidRunRequest, Detail: "session id and user id are required"}
	}
	if req.Message.Role != model.RoleUser && req.Message.Role != "" {
		return nil, &Error{Code: CodeInvalidRunRequest, Detail: "message role must be user"}
	}
	if err := r.sessions.ensure(r.appName, req.UserID, req.SessionID); err != nil {
		return nil, err
	}
	inv := req.InvocationID
	if inv == "" {
		inv = r.ids.NewID("inv")
	}
	// The invocation, its input and its failure counter in one allocation.
	b := &newInvocationAlloc{msg: req.Message}
	b.msg.Role = model.RoleUser
	b.ic = invocation{
		r:            r,
		runID:        r.ids.NewID("run"),
		invocationID: inv,
		sessionID:    req.SessionID,
		userID:       req.UserID,
		input:        &b.msg,
		historyCut:   -1,
		toolFailures: &b.failures,
	}
	return &b.ic, nil
}

// newInvocationAlloc is what newInvocation allocates: a run's invocation
// with the input message and the failure counter it points to.
type newInvocationAlloc struct {
	ic       invocation
	msg      model.Message
	failures failureCounter
}

// failureCounter counts failed tool executions per (agent, tool) within one
// invocation. Its count is the RetryAttempt plugins see on the next call of
// that tool, which is what reflect_retry reads. Parallel branches share it.
type failureCounter struct {
	mu sync.Mutex
	n  map[[2]string]int
}

func (f *failureCounter) get(agentName, tool string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[[2]string{agentName, tool}]
}

func (f *failureCounter) inc(agentName, tool string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[[2]string]int{}
	}
	k := [2]string{agentName, tool}
	f.n[k]++
	return f.n[k]
}

// invocation is one run's state, copied (cheaply) into nested scopes: a
// workflow node or a parallel branch gets its own copy with its own
// workflow ids, history cut and sink.
type invocation struct {
	r            *Runner
	runID        string
	invocationID string
	sessionID    string
	userID       string
	input        *model.Message
	// historyCut limits the session history an agent sees to the first n
	// events (a parallel branch sees the session as of its fork); -1: all.
	historyCut int
	// The innermost enclosing workflow, for observations and lifecycle
	// parents.
	workflowID   string
	workflowKind string
	nodeID       string
	// sink delivers a processed event to the consumer. It is only ever
	// called on the consumer's goroutine.
	sink func(ctx context.Context, ev *session.Event) error
	// forward, when set (inside a parallel branch), replaces processing
	// and sink: it hands the raw event to the branch's parallel agent.
	forward func(ctx context.Context, ev *session.Event, schemaLocked bool) (*session.Event, error)
	// toolFailures feeds CallContext.RetryAttempt for tool hooks.
	toolFailures *failureCounter
}

func (ic *invocation) callContext(agentName string) plugins.CallContext {
	return plugins.CallContext{
		RunID:        ic.runID,
		InvocationID: ic.invocationID,
		SessionID:    ic.sessionID,
		AppName:      ic.r.appName,
		UserID:       ic.userID,
		Agent:        agentName,
	}
}

func (ic *invocation) localContext(agentName string) *CallbackContext {
	return &CallbackContext{RunID: ic.runID, InvocationID: ic.invocationID, SessionID: ic.sessionID, UserID: ic.userID, Agent: agentName}
}

// newEvent starts an event of this invocation.
func (ic *invocation) newEvent(author string) *session.Event {
	ev := ic.eventHead(author)
	return &ev
}

// eventHead is newEvent's event as a value, for a caller that allocates
// it together with what it points to.
func (ic *invocation) eventHead(author string) session.Event {
	return session.Event{
		ID:           ic.r.ids.NewID("evt"),
		InvocationID: ic.invocationID,
		Author:       author,
		Time:         ic.r.now(),
	}
}

// emit passes ev through on_event, appends it to the session and yields it,
// returning the event as persisted. schemaLocked marks final content that
// passed output-schema validation and so cannot be rewritten.
func (ic *invocation) emit(ctx context.Context, ev *session.Event, schemaLocked bool) (*session.Event, error) {
	if ic.forward != nil {
		return ic.forward(ctx, ev, schemaLocked)
	}
	return ic.process(ctx, ev, schemaLocked)
}

func (ic *invocation) process(ctx context.Context, ev *session.Event, schemaLocked bool) (*session.Event, error) {
	res := ic.runHook(ctx, plugins.HookOnEvent, ic.callContext(ev.Author), ev)
	switch res.Disposition {
	case plugins.DispositionAmend, plugins.DispositionReturn:
		repl, ok := res.Value.(*session.Event)
		if !ok {
			return nil, invalidValue(ev.Author, plugins.HookOnEvent)
		}
		if err := checkEventReplacement(ev, repl, schemaLocked); err != nil {
			return nil, err
		}
		ev = repl
	case plugins.DispositionHalt, plugins.DispositionError:
		return nil, hookErr(ev.Author, res)
	}
	if err := ic.r.sessions.Append(ic.sessionID, ev); err != nil {
		return nil, err
	}
	if err := ic.sink(ctx, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// run is the whole turn: on_user_message, before_run, the root agent,
// after_run or on_run_error, inside the run observation.
func (ic *invocation) run(ctx context.Context) (err error) {
	r := ic.r
	rootName := r.root.Name()
	ctx, end := r.observer.Start(ctx, observability.Observation{
		Kind:         observability.KindRun,
		RunID:        ic.runID,
		InvocationID: ic.invocationID,
		SessionID:    ic.sessionID,
		Agent:        rootName,
	})
	cc := ic.callContext(rootName)
	defer func() {
		if err != nil && !errors.Is(err, errConsumerStopped) {
			ic.notify(ctx, plugins.HookOnRunError, cc, plugins.FailureOf("run", rootName, err))
		}
		end(observability.Outcome{Err: err, ErrorType: ErrorType(err)})
	}()

	res := ic.runHook(ctx, plugins.HookOnUserMessage, cc, ic.input)
	switch res.Disposition {
	case plugins.DispositionAmend, plugins.DispositionReturn:
		m, ok := res.Value.(*model.Message)
		if !ok {
			return invalidValue(rootName, plugins.HookOnUserMessage)
		}
		c := *m
		c.Role = model.RoleUser
		ic.input = &c
	case plugins.DispositionHalt, plugins.DispositionError:
		return hookErr(rootName, res)
	}
	userEv := ic.newEvent("user")
	userEv.Content = ic.input
	if err := r.sessions.Append(ic.sessionID, userEv); err != nil {
		return err
	}

	var output *model.Message
	res = ic.turnHook(ctx, plugins.HookBeforeRun, cc, rootName, nil)
	switch res.Disposition {
	case plugins.DispositionReturn:
		m, ok := res.Value.(*model.Message)
		if !ok {
			return invalidValue(rootName, plugins.HookBeforeRun)
		}
		ev := ic.newEvent(rootName)
		ev.Content = finalContent(m)
		ev.Final = true
		if _, err := ic.emit(ctx, ev, false); err != nil {
			return err
		}
		output = ev.Content
	case plugins.DispositionHalt, plugins.DispositionError:
		return hookErr(rootName, res)
	default:
		output, err = ic.runAgent(ctx, r.root)
		if err != nil {
			return err
		}
	}
	ic.turnHook(ctx, plugins.HookAfterRun, cc, rootName, output)
	return nil
}

// finalContent copies a plugin- or callback-supplied message as a model
// message.
func finalContent(m *model.Message) *model.Message {
	c := *m
	c.Role = model.RoleModel
	c.Parts = append([]model.Part(nil), m.Parts...)
	return &c
}

// runAgent runs one agent with the full precedence of CONTRACTS §1.4:
// global before_agent → local BeforeAgent (unless a global returned) →
// the agent → global after_agent → local AfterAgent (unless a global
// after_agent returned). A failure notifies on_agent_error.
func (ic *invocation) runAgent(ctx context.Context, a Agent) (out *model.Message, err error) {
	name := a.Name()
	obs := observability.Observation{
		Kind:         observability.KindAgent,
		InvocationID: ic.invocationID,
		SessionID:    ic.sessionID,
		Agent:        name,
		WorkflowID:   ic.workflowID,
		WorkflowKind: ic.workflowKind,
		NodeID:       ic.nodeID,
	}
	ctx, end := ic.r.observer.Start(ctx, obs)
	cc := ic.callContext(name)
	defer func() {
		if err != nil && !errors.Is(err, errConsumerStopped) {
			ic.notify(ctx, plugins.HookOnAgentError, cc, plugins.FailureOf("agent", name, err))
		}
		end(observability.Outcome{Err: err, ErrorType: ErrorType(err)})
	}()
	cb := a.callbacks()

	skip := false
	res := ic.turnHook(ctx, plugins.HookBeforeAgent, cc, name, nil)
	switch res.Disposition {
	case plugins.DispositionReturn:
		m, ok := res.Value.(*model.Message)
		if !ok {
			return nil, invalidValue(name, plugins.HookBeforeAgent)
		}
		if out, err = ic.emitFinal(ctx, name, m); err != nil {
			return nil, err
		}
		skip = true
	case plugins.DispositionHalt, plugins.DispositionError:
		return nil, hookErr(name, res)
	}
	if !skip && cb.BeforeAgent != nil {
		m, err := cb.BeforeAgent(ctx, ic.localContext(name))
		if err != nil {
			return nil, callbackErr(name, "before_agent", err)
		}
		if m != nil {
			if out, err = ic.emitFinal(ctx, name, m); err != nil {
				return nil, err
			}
			skip = true
		}
	}
	if !skip {
		if out, err = a.body(ctx, ic); err != nil {
			return nil, err
		}
	}

	res = ic.turnHook(ctx, plugins.HookAfterAgent, cc, name, out)
	globalReturned := false
	switch res.Disposition {
	case plugins.DispositionAmend, plugins.DispositionReturn:
		t, isTurn := res.Value.(*plugins.Turn)
		m, isMsg := res.Value.(*model.Message)
		switch {
		case isMsg:
		case isTurn && t.Output != nil:
			m = t.Output
		default:
			return nil, invalidValue(name, plugins.HookAfterAgent)
		}
		if out, err = ic.emitFinal(ctx, name, m); err != nil {
			return nil, err
		}
		globalReturned = res.Disposition == plugins.DispositionReturn
	case plugins.DispositionHalt, plugins.DispositionError:
		return nil, hookErr(name, res)
	}
	if !globalReturned && cb.AfterAgent != nil {
		m, err := cb.AfterAgent(ctx, ic.localContext(name), out)
		if err != nil {
			return nil, callbackErr(name, "after_agent", err)
		}
		if m != nil {
			if out, err = ic.emitFinal(ctx, name, m); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// emitFinal emits a final event carrying a message an intervention
// supplied, and returns the content as persisted.
func (ic *invocation) emitFinal(ctx context.Context, author string, m *model.Message) (*model.Message, error) {
	ev := ic.newEvent(author)
	ev.Content = finalContent(m)
	ev.Final = true
	ev, err := ic.emit(ctx, ev, false)
	if err != nil {
		return nil, err
	}
	return ev.Content, nil
}

func callbackErr(agentName, phase string, err error) error {
	return &Error{Code: CodeCallbackFailed, Agent: agentName, Detail: phase, Err: err}
}
