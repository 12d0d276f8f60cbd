package agent

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/observability"
)

// Workflow kinds (workflow_kind).
const (
	WorkflowSequential = "sequential"
	WorkflowParallel   = "parallel"
)

// Workflow lifecycle event types (the "type" field of workflow-lifecycle v1
// notices).
const (
	LifecycleWorkflowStarted   = "workflow_started"
	LifecycleWorkflowCompleted = "workflow_completed"
	LifecycleWorkflowFailed    = "workflow_failed"
	LifecycleNodeStarted       = "node_started"
	LifecycleNodeCompleted     = "node_completed"
	LifecycleNodeFailed        = "node_failed"
	LifecycleFork              = "fork"
	LifecycleJoin              = "join"
)

// Lifecycle outcomes.
const (
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// WorkflowConfig configures a workflow agent.
type WorkflowConfig struct {
	Name        string
	Description string
	// SubAgents are the workflow's nodes, in order.
	SubAgents []Agent
	Callbacks Callbacks
}

// SequentialAgent runs its sub-agents one after another; each sees what
// the previous ones added to the session. Its output is the last node's.
type SequentialAgent struct{ base }

// ParallelAgent runs its sub-agents concurrently, each on the session as it
// was at the fork plus its own events. Its output joins the nodes' outputs
// in declaration order. The first failing node cancels the others.
type ParallelAgent struct{ base }

// NewSequentialAgent builds a sequential workflow agent.
func NewSequentialAgent(cfg WorkflowConfig) (*SequentialAgent, error) {
	b, err := workflowBase(cfg)
	if err != nil {
		return nil, err
	}
	return &SequentialAgent{b}, nil
}

// NewParallelAgent builds a parallel workflow agent.
func NewParallelAgent(cfg WorkflowConfig) (*ParallelAgent, error) {
	b, err := workflowBase(cfg)
	if err != nil {
		return nil, err
	}
	return &ParallelAgent{b}, nil
}

func workflowBase(cfg WorkflowConfig) (base, error) {
	if cfg.Name == "" {
		return base{}, configErr("workflow name is required")
	}
	if len(cfg.SubAgents) == 0 {
		return base{}, configErr("workflow %q has no sub-agents", cfg.Name)
	}
	for _, s := range cfg.SubAgents {
		if s == nil {
			return base{}, configErr("workflow %q: nil sub-agent", cfg.Name)
		}
	}
	return base{name: cfg.Name, description: cfg.Description, subAgents: cfg.SubAgents, cb: cfg.Callbacks}, nil
}

func (a *SequentialAgent) kind() string { return WorkflowSequential }
func (a *ParallelAgent) kind() string   { return WorkflowParallel }

// workflowRun is one execution of a workflow agent: its id, the lifecycle
// sequence counter and the scope its nodes run in.
type workflowRun struct {
	ic     *invocation // the workflow's own scope (for emitting)
	name   string
	id     string
	kindS  string
	parent string
	seq    atomic.Int64
}

func (ic *invocation) startWorkflow(ctx context.Context, a Agent) (context.Context, *workflowRun, func(error)) {
	wr := &workflowRun{ic: ic, name: a.Name(), id: ic.r.ids.NewID("wf"), kindS: a.kind(), parent: ic.workflowID}
	ctx, end := ic.r.observer.Start(ctx, observability.Observation{
		Kind:         observability.KindWorkflow,
		InvocationID: ic.invocationID,
		SessionID:    ic.sessionID,
		Agent:        a.Name(),
		WorkflowID:   wr.id,
		WorkflowKind: wr.kindS,
		NodeID:       ic.nodeID,
	})
	return ctx, wr, func(err error) { end(observability.Outcome{Err: err, ErrorType: ErrorType(err)}) }
}

// lifecycle builds a workflow-lifecycle v1 notice.
func (wr *workflowRun) lifecycle(typ string, fields map[string]any) *session.Event {
	ev := wr.ic.newEvent(wr.name)
	w := map[string]any{
		"schema_version": 1,
		"type":           typ,
		"sequence":       wr.seq.Add(1),
		"timestamp":      ev.Time.UnixMilli(),
		"workflow_id":    wr.id,
		"workflow_kind":  wr.kindS,
		"invocation_id":  wr.ic.invocationID,
	}
	if wr.parent != "" {
		w["parent"] = wr.parent
	}
	for k, v := range fields {
		w[k] = v
	}
	ev.Workflow = w
	return ev
}

// node returns the scope a node runs in.
func (wr *workflowRun) node(ic *invocation, n Agent) *invocation {
	c := *ic
	c.workflowID, c.workflowKind, c.nodeID = wr.id, wr.kindS, n.Name()
	return &c
}

func outcomeOf(err error) string {
	switch {
	case err == nil:
		return OutcomeCompleted
	case errors.Is(err, context.Canceled):
		return OutcomeCancelled
	}
	if t := ErrorType(err); t == CodeRunCancelled || t == "cancelled" {
		return OutcomeCancelled
	}
	return OutcomeFailed
}

func nodeFields(n Agent, err error) map[string]any {
	return map[string]any{"node_id": n.Name(), "node_type": n.kind(), "outcome": outcomeOf(err)}
}

func (a *SequentialAgent) body(ctx context.Context, ic *invocation) (out *model.Message, err error) {
	ctx, wr, end := ic.startWorkflow(ctx, a)
	defer func() { end(err) }()
	if _, err := ic.emit(ctx, wr.lifecycle(LifecycleWorkflowStarted, nil), false); err != nil {
		return nil, err
	}
	for _, n := range a.subAgents {
		start := wr.lifecycle(LifecycleNodeStarted, map[string]any{"node_id": n.Name(), "node_type": n.kind()})
		if _, err := ic.emit(ctx, start, false); err != nil {
			return nil, err
		}
		out, err = wr.node(ic, n).runAgent(ctx, n)
		if errors.Is(err, errConsumerStopped) {
			return nil, err
		}
		typ := LifecycleNodeCompleted
		if err != nil {
			typ = LifecycleNodeFailed
		}
		if _, eerr := ic.emit(ctx, wr.lifecycle(typ, nodeFields(n, err)), false); eerr != nil {
			return nil, eerr
		}
		if err != nil {
			ic.emitBestEffort(ctx, wr.lifecycle(LifecycleWorkflowFailed, map[string]any{"outcome": outcomeOf(err), "node_id": n.Name()}))
			return nil, err
		}
	}
	if _, err := ic.emit(ctx, wr.lifecycle(LifecycleWorkflowCompleted, map[string]any{"outcome": OutcomeCompleted}), false); err != nil {
		return nil, err
	}
	return out, nil
}

// emitBestEffort emits a terminal notice on a path that is already failing.
func (ic *invocation) emitBestEffort(ctx context.Context, ev *session.Event) {
	_, _ = ic.emit(context.WithoutCancel(ctx), ev, false)
}

// emitRequest carries a branch's event to the parallel agent's goroutine,
// which processes it (on_event, append, yield) so that the session order is
// the order the consumer sees.
type emitRequest struct {
	ev     *session.Event
	locked bool
	reply  chan emitReply
}

type emitReply struct {
	ev  *session.Event
	err error
}

type branchDone struct {
	i   int
	out *model.Message
	err error
}

func (a *ParallelAgent) body(ctx context.Context, ic *invocation) (out *model.Message, err error) {
	ctx, wr, end := ic.startWorkflow(ctx, a)
	defer func() { end(err) }()
	if _, err := ic.emit(ctx, wr.lifecycle(LifecycleWorkflowStarted, nil), false); err != nil {
		return nil, err
	}
	n := len(a.subAgents)
	forkID := ic.r.ids.NewID("fork")
	if _, err := ic.emit(ctx, wr.lifecycle(LifecycleFork, map[string]any{"fork_id": forkID, "branch_count": n}), false); err != nil {
		return nil, err
	}
	for _, s := range a.subAgents {
		if _, err := ic.emit(ctx, wr.lifecycle(LifecycleNodeStarted, map[string]any{"node_id": s.Name(), "node_type": s.kind(), "fork_id": forkID}), false); err != nil {
			return nil, err
		}
	}

	// Branches are owned here: started below, always waited for before
	// body returns (the loop runs until every branch has reported).
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cut := ic.r.sessions.eventCount(ic.sessionID)
	reqs := make(chan emitRequest)
	done := make(chan branchDone, n)
	var wg sync.WaitGroup
	for i, s := range a.subAgents {
		bic := wr.node(ic, s)
		bic.historyCut = cut
		bic.forward = func(_ context.Context, ev *session.Event, locked bool) (*session.Event, error) {
			reply := make(chan emitReply, 1)
			reqs <- emitRequest{ev: ev, locked: locked, reply: reply}
			r := <-reply
			return r.ev, r.err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := bic.runAgent(bctx, s)
			done <- branchDone{i: i, out: o, err: err}
		}()
	}

	outs := make([]*model.Message, n)
	var firstErr error
	completed := 0
	for finished := 0; finished < n; {
		select {
		case req := <-reqs:
			// The consumer-side processing uses the workflow's context, so
			// a cancelled sibling does not stop events already produced.
			ev, err := ic.emit(ctx, req.ev, req.locked)
			if err != nil && firstErr == nil && errors.Is(err, errConsumerStopped) {
				firstErr = err
				cancel()
			}
			req.reply <- emitReply{ev: ev, err: err}
		case d := <-done:
			finished++
			outs[d.i] = d.out
			if d.err != nil && firstErr == nil {
				firstErr = d.err
				cancel()
			}
			if d.err == nil {
				completed++
			}
			if errors.Is(firstErr, errConsumerStopped) {
				continue
			}
			typ := LifecycleNodeCompleted
			if d.err != nil {
				typ = LifecycleNodeFailed
			}
			f := nodeFields(a.subAgents[d.i], d.err)
			f["fork_id"] = forkID
			if _, err := ic.emit(ctx, wr.lifecycle(typ, f), false); err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
		}
	}
	wg.Wait()
	if firstErr != nil {
		if !errors.Is(firstErr, errConsumerStopped) {
			ic.emitBestEffort(ctx, wr.lifecycle(LifecycleWorkflowFailed, map[string]any{"outcome": outcomeOf(firstErr), "completed_count": completed}))
		}
		return nil, firstErr
	}
	join := wr.lifecycle(LifecycleJoin, map[string]any{"join_id": forkID, "fork_id": forkID, "completed_count": completed, "branch_count": n})
	if _, err := ic.emit(ctx, join, false); err != nil {
		return nil, err
	}
	if _, err := ic.emit(ctx, wr.lifecycle(LifecycleWorkflowCompleted, map[string]any{"outcome": OutcomeCompleted}), false); err != nil {
		return nil, err
	}
	joined := &model.Message{Role: model.RoleModel}
	for _, o := range outs {
		if o != nil {
			joined.Parts = append(joined.Parts, o.Parts...)
		}
	}
	return joined, nil
}
