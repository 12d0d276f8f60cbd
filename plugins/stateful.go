package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Stateful is a plugin whose callbacks share state S. An Instance runs it
// behind one actor goroutine, so callbacks are serialised even when many runs
// call it at once.
//
// S must survive a JSON round trip: committed state is kept JSON-encoded (the
// encoding is what the state-size bound measures) and every callback receives
// a freshly decoded copy, so a callback that times out or is abandoned cannot
// reach the committed state even through shared maps or pointers.
type Stateful[S any] interface {
	// Init returns the initial state. It runs in its own goroutine under the
	// spec's init timeout.
	Init(ctx context.Context, config map[string]any) (S, error)
	// HandleHook handles one hook call and returns the outcome and the new
	// state. The new state commits only if HandleHook returned within the
	// deadline, without error, within the state-size bound, and its caller
	// is still waiting. A panic crashes the instance (see Instance).
	HandleHook(ctx context.Context, hook Hook, cc CallContext, value any, state S) (Outcome, S, error)
}

// InstanceSpec configures a stateful Instance. Zero values take the
// defaults.
type InstanceSpec struct {
	ID            string         // 1..256 bytes of UTF-8
	Config        map[string]any // passed to Init; JSON-encodable, ≤ 1 MiB encoded
	Hooks         []Hook         // hooks the plugin adapter serves; empty means all
	MaxQueue      int            // callers waiting behind the busy one: default 64, 1..4096
	MaxStateBytes int            // JSON-encoded state: default 1 MiB, ≤ 64 MiB
	InitTimeoutMs int            // default 1000, ≤ 30 000
}

// InstanceStatus is a snapshot of an instance.
type InstanceStatus struct {
	ID            string `json:"id"`
	Identity      uint64 `json:"identity"`       // changes on Recreate, never reused
	RestartPolicy string `json:"restart_policy"` // always "temporary": no silent restart
	Busy          bool   `json:"busy"`
	Queued        int    `json:"queued"`
	Generation    int64  `json:"generation"` // committed callbacks
	StateBytes    int    `json:"state_bytes"`
}

// Instance is a supervised stateful plugin: an actor goroutine that owns the
// committed state and runs one callback at a time, each in a worker goroutine
// under the caller's deadline.
//
// A callback that panics crashes the actor — its state may be half-built —
// and the instance stays dead: calls fail with instance_unavailable until
// Recreate starts a fresh actor (new identity, state from Init). A callback
// that overruns its deadline has its result and state discarded; since Go
// cannot stop a goroutine, the actor waits for it to return before starting
// the next callback (serialisation over liveness), and waiting callers time
// out on their own deadlines meanwhile.
//
// An *Instance is a Plugin (its Hooks call Invoke) and an io.Closer, so it
// can be put straight into a Descriptor; Pipeline.Close closes it.
type Instance struct {
	spec  InstanceSpec
	start func(ctx context.Context) (*actor, error)

	mu     sync.Mutex // guards closed and cur swaps
	closed bool
	cur    atomic.Pointer[actor]
}

var nextIdentity atomic.Uint64

// NewInstance validates spec (invalid_plugin_instance_spec), runs Init
// (stateful_plugin_init_timeout, stateful_plugin_init_failed,
// initial_state_too_large) and starts the actor. An Init that ignores its
// context outlives a timed-out NewInstance until it returns; its result is
// discarded.
func NewInstance[S any](ctx context.Context, spec InstanceSpec, p Stateful[S]) (*Instance, error) {
	spec, err := validateSpec(spec)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, &Error{Code: CodeInvalidInstanceSpec, PluginID: spec.ID, Reason: "nil plugin"}
	}
	run := func(ctx context.Context, inv *invocation, state []byte) ([]byte, Outcome, error) {
		var s S
		if err := json.Unmarshal(state, &s); err != nil {
			return nil, Outcome{}, &Error{Code: CodeInvalidStatefulResult, PluginID: spec.ID, Reason: "state does not decode"}
		}
		o, next, err := p.HandleHook(ctx, inv.hook, inv.cc, inv.value, s)
		if err != nil {
			return nil, Outcome{}, err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return nil, Outcome{}, &Error{Code: CodeInvalidStatefulResult, PluginID: spec.ID, Reason: "state does not encode"}
		}
		return b, o, nil
	}
	initState := func(ctx context.Context) ([]byte, error) {
		s, err := p.Init(ctx, cloneMap(spec.Config))
		if err != nil {
			return nil, err
		}
		return json.Marshal(s)
	}
	i := &Instance{spec: spec}
	i.start = func(ctx context.Context) (*actor, error) {
		state, err := runInit(ctx, spec, initState)
		if err != nil {
			return nil, err
		}
		a := &actor{
			identity: nextIdentity.Add(1),
			id:       spec.ID,
			queue:    make(chan *invocation, spec.MaxQueue),
			maxState: spec.MaxStateBytes,
			run:      run,
			state:    state,
			stop:     make(chan struct{}),
			done:     make(chan struct{}),
		}
		a.stateBytes.Store(int64(len(state)))
		go a.loop()
		return a, nil
	}
	a, err := i.start(ctx)
	if err != nil {
		return nil, err
	}
	i.cur.Store(a)
	return i, nil
}

func validateSpec(s InstanceSpec) (InstanceSpec, error) {
	bad := func(reason string) error {
		return &Error{Code: CodeInvalidInstanceSpec, PluginID: s.ID, Reason: reason}
	}
	if s.MaxQueue == 0 {
		s.MaxQueue = DefaultMaxQueue
	}
	if s.MaxStateBytes == 0 {
		s.MaxStateBytes = DefaultMaxStateBytes
	}
	if s.InitTimeoutMs == 0 {
		s.InitTimeoutMs = DefaultInitTimeoutMs
	}
	switch {
	case s.ID == "" || len(s.ID) > MaxIDBytes || !utf8.ValidString(s.ID):
		return s, bad("id")
	case s.MaxQueue < 1 || s.MaxQueue > MaxMaxQueue:
		return s, bad("max_queue")
	case s.MaxStateBytes < 1 || s.MaxStateBytes > MaxMaxStateBytes:
		return s, bad("max_state_bytes")
	case s.InitTimeoutMs < 1 || s.InitTimeoutMs > MaxInitTimeoutMs:
		return s, bad("init_timeout_ms")
	}
	if b, err := json.Marshal(s.Config); err != nil || len(b) > MaxConfigBytes {
		return s, bad("config")
	}
	for _, h := range s.Hooks {
		if _, ok := lookupHook(h); !ok {
			return s, bad("hooks")
		}
	}
	return s, nil
}

// runInit runs Init in its own goroutine under the init timeout.
func runInit(ctx context.Context, spec InstanceSpec, initState func(context.Context) ([]byte, error)) ([]byte, error) {
	ictx, cancel := context.WithTimeout(ctx, time.Duration(spec.InitTimeoutMs)*time.Millisecond)
	defer cancel()
	type result struct {
		state []byte
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if recover() != nil {
				ch <- result{err: errors.New("panic")}
			}
		}()
		b, err := initState(ictx)
		ch <- result{b, err}
	}()
	select {
	case r := <-ch:
		switch {
		case r.err != nil:
			return nil, &Error{Code: CodeInitFailed, PluginID: spec.ID}
		case len(r.state) > spec.MaxStateBytes:
			return nil, &Error{Code: CodeInitialStateTooLarge, PluginID: spec.ID}
		}
		return r.state, nil
	case <-ictx.Done():
		return nil, &Error{Code: CodeInitTimeout, PluginID: spec.ID}
	}
}

// Invoke runs one callback through the actor and waits at most timeout
// (1 ms..120 s, else invalid_plugin_instance_invocation) or until ctx ends.
// Errors: queue_full, timeout, state_too_large, instance_unavailable,
// instance_stopped, exception (the callback panicked and the instance
// crashed) or the callback's own error.
func (i *Instance) Invoke(ctx context.Context, hook Hook, cc CallContext, value any, timeout time.Duration) (Outcome, error) {
	if _, ok := lookupHook(hook); !ok || timeout <= 0 || timeout > MaxTimeoutMs*time.Millisecond {
		return Outcome{}, &Error{Code: CodeInvalidInstanceInvocation, PluginID: i.spec.ID, Hook: hook}
	}
	return i.cur.Load().invoke(ctx, hook, cc, value, timeout)
}

// Status reports the live actor's state, or instance_unavailable.
func (i *Instance) Status() (InstanceStatus, error) {
	a := i.cur.Load()
	if a.isDead() {
		return InstanceStatus{}, &Error{Code: CodeInstanceUnavailable, PluginID: i.spec.ID}
	}
	return InstanceStatus{
		ID: a.id, Identity: a.identity, RestartPolicy: "temporary",
		Busy: a.busy.Load(), Queued: len(a.queue),
		Generation: a.generation.Load(), StateBytes: int(a.stateBytes.Load()),
	}, nil
}

// Recreate stops the current actor (if it is still alive), runs Init again
// and installs a fresh actor with a new identity. It is the only way a
// crashed instance comes back.
func (i *Instance) Recreate(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return &Error{Code: CodeInstanceStopped, PluginID: i.spec.ID}
	}
	i.cur.Load().shutdown()
	a, err := i.start(ctx)
	if err != nil {
		return err
	}
	i.cur.Store(a)
	return nil
}

// Close stops the actor, fails queued callers with instance_stopped and waits
// for the actor and its worker goroutines.
func (i *Instance) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.closed = true
	i.cur.Load().shutdown()
	return nil
}

// Hooks makes an Instance a Plugin: each hook in the spec (all when empty)
// invokes the instance with the pipeline's remaining deadline. Instance
// failures surface as stateful_plugin_failed errors wrapping the instance
// error, so the descriptor's failure policy applies (trace worker_down for a
// crashed instance, timeout for a missed deadline, exception otherwise).
func (i *Instance) Hooks() Hooks {
	return Dispatch(func(ctx context.Context, hook Hook, cc CallContext, v any, _ map[string]any) (Outcome, error) {
		timeout := time.Duration(DefaultTimeoutMs) * time.Millisecond
		if d, ok := ctx.Deadline(); ok {
			timeout = time.Until(d)
		}
		o, err := i.Invoke(ctx, hook, cc, v, timeout)
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", CodeStatefulPluginFailed, err)
		}
		return o, nil
	}, i.spec.Hooks...)
}

// invocation states: the caller and the actor race to move it out of
// waiting; the winner decides whether state may commit.
const (
	invWaiting int32 = iota
	invAbandoned
	invCompleted
)

type invocation struct {
	ctx      context.Context
	deadline time.Time
	hook     Hook
	cc       CallContext
	value    any
	claim    atomic.Int32
	reply    chan invReply // buffered 1
}

type invReply struct {
	outcome Outcome
	err     error
}

// complete hands r to the caller if it is still waiting.
func (inv *invocation) complete(r invReply) bool {
	if !inv.claim.CompareAndSwap(invWaiting, invCompleted) {
		return false
	}
	inv.reply <- r
	return true
}

type workResult struct {
	state    []byte
	outcome  Outcome
	err      error
	panicked bool
	at       time.Time
}

// actor owns one generation of an instance's state.
type actor struct {
	identity uint64
	id       string
	queue    chan *invocation
	maxState int
	run      func(ctx context.Context, inv *invocation, state []byte) ([]byte, Outcome, error)
	state    []byte // owned by loop

	busy       atomic.Bool
	generation atomic.Int64
	stateBytes atomic.Int64

	mu       sync.Mutex // guards dead and sends to queue
	dead     bool
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	workers  sync.WaitGroup
}

func (a *actor) isDead() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dead
}

func (a *actor) invoke(ctx context.Context, hook Hook, cc CallContext, value any, timeout time.Duration) (Outcome, error) {
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	inv := &invocation{ctx: ctx, deadline: deadline, hook: hook, cc: cc, value: value, reply: make(chan invReply, 1)}
	a.mu.Lock()
	if a.dead {
		a.mu.Unlock()
		return Outcome{}, &Error{Code: CodeInstanceUnavailable, PluginID: a.id, Hook: hook}
	}
	select {
	case a.queue <- inv:
	default:
		a.mu.Unlock()
		return Outcome{}, &Error{Code: CodeQueueFull, PluginID: a.id, Hook: hook}
	}
	a.mu.Unlock()
	select {
	case r := <-inv.reply:
		return r.outcome, r.err
	case <-ctx.Done():
		if inv.claim.CompareAndSwap(invWaiting, invAbandoned) {
			return Outcome{}, &Error{Code: CodeTimeout, PluginID: a.id, Hook: hook}
		}
		r := <-inv.reply // the actor won the race; its reply is on the way
		return r.outcome, r.err
	}
}

func (a *actor) shutdown() {
	a.stopOnce.Do(func() { close(a.stop) })
	<-a.done
	a.workers.Wait()
}

// loop serialises callbacks until stopped or crashed.
func (a *actor) loop() {
	reason := CodeInstanceStopped
	defer func() {
		a.mu.Lock()
		a.dead = true
		a.mu.Unlock()
		for {
			select {
			case inv := <-a.queue:
				inv.complete(invReply{err: &Error{Code: reason, PluginID: a.id, Hook: inv.hook}})
			default:
				close(a.done)
				return
			}
		}
	}()
	for {
		select {
		case <-a.stop:
			return
		case inv := <-a.queue:
			a.busy.Store(true)
			crashed, stopped := a.handle(inv)
			a.busy.Store(false)
			if crashed {
				reason = CodeInstanceUnavailable
				return
			}
			if stopped {
				return
			}
		}
	}
}

// handle runs one invocation: the callback in a worker goroutine, raced
// against the caller's deadline and the stop signal.
func (a *actor) handle(inv *invocation) (crashed, stopped bool) {
	if inv.ctx.Err() != nil {
		inv.complete(invReply{err: &Error{Code: CodeTimeout, PluginID: a.id, Hook: inv.hook}})
		return false, false
	}
	wctx, wcancel := context.WithCancel(inv.ctx)
	defer wcancel()
	ch := make(chan workResult, 1)
	state := a.state
	a.workers.Add(1)
	go func() {
		defer a.workers.Done()
		var r workResult
		func() {
			defer func() {
				if recover() != nil {
					r = workResult{panicked: true}
				}
			}()
			r.state, r.outcome, r.err = a.run(wctx, inv, state)
		}()
		r.at = time.Now()
		ch <- r
	}()
	select {
	case r := <-ch:
		return a.finish(inv, r), false
	case <-inv.ctx.Done():
		select {
		case r := <-ch:
			return a.finish(inv, r), false
		default:
		}
		inv.complete(invReply{err: &Error{Code: CodeTimeout, PluginID: a.id, Hook: inv.hook}})
		wcancel()
		// Keep callbacks serialised: wait for the straggler, discard its
		// result, but still honour a crash.
		select {
		case r := <-ch:
			return r.panicked, false
		case <-a.stop:
			return false, true
		}
	case <-a.stop:
		wcancel()
		inv.complete(invReply{err: &Error{Code: CodeInstanceStopped, PluginID: a.id, Hook: inv.hook}})
		return false, true
	}
}

// finish commits a completed callback's state if every fence allows it and
// answers the caller.
func (a *actor) finish(inv *invocation, r workResult) (crashed bool) {
	fail := func(code string) {
		inv.complete(invReply{err: &Error{Code: code, PluginID: a.id, Hook: inv.hook}})
	}
	switch {
	case r.panicked:
		fail(string(OutcomeException))
		return true
	case r.at.After(inv.deadline):
		fail(CodeTimeout)
	case r.err != nil:
		inv.complete(invReply{err: r.err})
	case len(r.state) > a.maxState:
		fail(CodeStateTooLarge)
	case inv.claim.CompareAndSwap(invWaiting, invCompleted):
		a.state = r.state
		a.stateBytes.Store(int64(len(r.state)))
		a.generation.Add(1)
		inv.reply <- invReply{outcome: r.outcome}
	}
	return false
}
