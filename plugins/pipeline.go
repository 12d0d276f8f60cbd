package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// CallContext is what a plugin learns about the call besides the phase
// value. The runtime fills it; the pipeline hands each plugin a copy whose
// Extra has every secret-looking key removed at every depth and whose
// PluginID is the descriptor's id. Plugins must treat it as read-only.
type CallContext struct {
	RunID        string `json:"run_id,omitempty"`
	InvocationID string `json:"invocation_id,omitempty"`
	SessionID    string `json:"session,omitempty"`
	AppName      string `json:"app_name,omitempty"`
	UserID       string `json:"user_id,omitempty"`
	Agent        string `json:"agent,omitempty"`
	Model        string `json:"model,omitempty"`
	Tool         string `json:"tool,omitempty"`
	CallID       string `json:"call_id,omitempty"`
	// RetryAttempt counts the retries already made for the current tool or
	// model call: 0 on the first failure.
	RetryAttempt int            `json:"retry_attempt,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
	// PluginID is set by the pipeline to the id of the plugin being called.
	PluginID string `json:"plugin_id,omitempty"`
}

// Disposition is the overall result of running a hook through the pipeline.
type Disposition string

// Dispositions.
const (
	// DispositionContinue: no plugin changed anything; Value is the caller's value.
	DispositionContinue Disposition = "continue"
	// DispositionAmend: at least one plugin amended; Value is the amended phase value.
	// Continue with it through the local callback and the operation.
	DispositionAmend Disposition = "amend"
	// DispositionReturn: a plugin ended the phase early; Value has the hook's return
	// type. Skip the local callback and the operation.
	DispositionReturn Disposition = "return"
	// DispositionHalt: a plugin stopped the run; Err is a plugin_halted *Error.
	DispositionHalt Disposition = "halt"
	// DispositionError: a closed-policy plugin failed (plugin_failed), the caller's
	// context ended (cancelled), or Run was misused; Err says which.
	DispositionError Disposition = "error"
)

// TraceOutcome is a trace entry's outcome word (the contract's).
type TraceOutcome string

// Trace outcomes. OutcomeWorkerDown is used for a stateful instance that has
// crashed; OutcomeCancelled (not in the Erlang contract) records that the
// caller's context ended while the plugin ran.
const (
	OutcomeObserved             TraceOutcome = "observed"
	OutcomeAmended              TraceOutcome = "amended"
	OutcomeReturned             TraceOutcome = "returned"
	OutcomeHalted               TraceOutcome = "halted"
	OutcomeSkipped              TraceOutcome = "skipped"
	OutcomeException            TraceOutcome = "exception"
	OutcomeTimeout              TraceOutcome = "timeout"
	OutcomeWorkerDown           TraceOutcome = "worker_down"
	OutcomeResultTooLarge       TraceOutcome = "result_too_large"
	OutcomeInvalidResultType    TraceOutcome = "invalid_result_type"
	OutcomeInvalidResult        TraceOutcome = "invalid_result"
	OutcomeObserverCannotAmend  TraceOutcome = "observer_cannot_amend"
	OutcomeObserverCannotReturn TraceOutcome = "observer_cannot_return"
	OutcomeObserverCannotHalt   TraceOutcome = "observer_cannot_halt"
	OutcomeNotificationIgnored  TraceOutcome = "notification_result_ignored"
	OutcomeCancelled            TraceOutcome = "cancelled"
	outcomeNone                 TraceOutcome = ""
)

// IsFailure reports whether o records a plugin failure (handled by the
// failure policy) rather than a plugin decision.
func (o TraceOutcome) IsFailure() bool {
	switch o {
	case OutcomeObserved, OutcomeAmended, OutcomeReturned, OutcomeHalted,
		OutcomeSkipped, OutcomeNotificationIgnored, outcomeNone:
		return false
	}
	return true
}

// TraceEntry records what one plugin did in one Run.
type TraceEntry struct {
	PluginID string       `json:"plugin_id"`
	Hook     Hook         `json:"hook"`
	Mode     Mode         `json:"mode"`
	Outcome  TraceOutcome `json:"outcome"`
}

// Result is the pipeline's answer for one hook.
type Result struct {
	Disposition Disposition
	// Value is the phase value to continue with (Continue, Amend, and the
	// previous value on Halt/Error) or the early result (Return).
	Value any
	// Err is set for Halt and Error: an *Error (plugin_halted,
	// plugin_failed, cancelled, ...).
	Err error
	// Trace has one entry per plugin reached, in order.
	Trace []TraceEntry
}

// Pipeline is a compiled, ordered list of plugins. It is safe for concurrent
// use; one Pipeline serves every run of a Runner and its sub-agents.
type Pipeline struct {
	plugins []compiled
	active  [numHooks]bool // some plugin implements the hook (or its fallback)

	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup // in-flight Runs and hook goroutines, stragglers included
}

// Len returns the number of plugins.
func (p *Pipeline) Len() int { return len(p.plugins) }

// Run calls every plugin's callback for hook, in order, each in its own
// goroutine under its descriptor's deadline and bounds, and returns the
// phase's disposition. value must have the hook's type (see Hooks); it is
// never mutated. A nil Pipeline runs no plugins.
//
// Run returns at each plugin's deadline even when the plugin ignores its
// context; the straggler's result is discarded (trace "timeout"). When ctx
// ends, the current plugin's context is cancelled and Run returns Error with
// a cancelled *Error.
func (p *Pipeline) Run(ctx context.Context, hook Hook, cc CallContext, value any) Result {
	h, ok := lookupHook(hook)
	if !ok || h == hkOnError {
		return Result{Disposition: DispositionError, Value: value, Err: &Error{Code: CodeInvalidHook, Hook: hook}}
	}
	spec := &hookSpecs[h]
	if !spec.isValue(value) {
		return Result{Disposition: DispositionError, Value: value,
			Err: &Error{Code: CodeInvalidHookValue, Hook: hook, Reason: fmt.Sprintf("%T", value)}}
	}
	if p == nil || len(p.plugins) == 0 {
		return Result{Disposition: DispositionContinue, Value: value}
	}
	trace := make([]TraceEntry, 0, len(p.plugins))
	if !p.active[h] {
		for i := range p.plugins {
			trace = append(trace, TraceEntry{p.plugins[i].id, hook, p.plugins[i].mode, OutcomeSkipped})
		}
		return Result{Disposition: DispositionContinue, Value: value, Trace: trace}
	}

	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return Result{Disposition: DispositionError, Value: value, Err: &Error{Code: CodePipelineClosed, Hook: hook}}
	}
	p.wg.Add(1)
	p.mu.RUnlock()
	defer p.wg.Done()

	cc.Extra = pruneExtra(cc.Extra)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	cur, disp := value, DispositionContinue
	for i := range p.plugins {
		c := &p.plugins[i]
		f := c.callFor(h)
		if f == nil {
			trace = append(trace, TraceEntry{c.id, hook, c.mode, OutcomeSkipped})
			continue
		}
		cc.PluginID = c.id
		r := p.call(ctx, &timer, c, h, f, cc, cur)
		if r.failure != outcomeNone {
			trace = append(trace, TraceEntry{c.id, hook, c.mode, r.failure})
			if r.failure == OutcomeCancelled {
				return Result{Disposition: DispositionError, Value: cur, Trace: trace,
					Err: &Error{Code: CodeCancelled, PluginID: c.id, Hook: hook}}
			}
			if spec.notification || c.policy == PolicyOpen {
				continue
			}
			return Result{Disposition: DispositionError, Value: cur, Trace: trace,
				Err: &Error{Code: CodePluginFailed, PluginID: c.id, Hook: hook, Reason: string(r.failure)}}
		}
		if spec.notification {
			o := OutcomeObserved
			if r.kind != kindObserve {
				o = OutcomeNotificationIgnored
			}
			trace = append(trace, TraceEntry{c.id, hook, c.mode, o})
			continue
		}
		switch r.kind {
		case kindObserve:
			trace = append(trace, TraceEntry{c.id, hook, c.mode, OutcomeObserved})
		case kindAmend:
			trace = append(trace, TraceEntry{c.id, hook, c.mode, OutcomeAmended})
			cur, disp = r.value, DispositionAmend
		case kindReturn, kindReplace:
			trace = append(trace, TraceEntry{c.id, hook, c.mode, OutcomeReturned})
			return Result{Disposition: DispositionReturn, Value: r.value, Trace: trace}
		case kindHalt:
			trace = append(trace, TraceEntry{c.id, hook, c.mode, OutcomeHalted})
			return Result{Disposition: DispositionHalt, Value: cur, Trace: trace,
				Err: &Error{Code: CodePluginHalted, PluginID: c.id, Hook: hook, Reason: r.reason}}
		}
	}
	return Result{Disposition: disp, Value: cur, Trace: trace}
}

// callResult is what one isolated hook call produced: a failure tag, or an
// outcome that passed every check.
type callResult struct {
	failure TraceOutcome
	kind    outcomeKind
	value   any
	reason  string
	at      time.Time // completion, for the deadline fence
}

// call runs one plugin callback in its own goroutine and waits for it, the
// deadline or the caller, whichever comes first. timer is the Run's one
// reusable deadline timer (created on first use).
func (p *Pipeline) call(ctx context.Context, timer **time.Timer, c *compiled, h hookIndex, f callFunc, cc CallContext, v any) callResult {
	if ctx.Err() != nil {
		return callResult{failure: OutcomeCancelled}
	}
	d := time.Duration(c.timeoutMs) * time.Millisecond
	deadline := time.Now().Add(d)
	if *timer == nil {
		*timer = time.NewTimer(d)
	} else {
		(*timer).Reset(d)
	}
	// One allocation carries the hook's context and arguments to its goroutine.
	hc := &hookCall{
		hookContext: hookContext{parent: ctx, deadline: deadline, done: make(chan struct{})},
		c:           c, h: h, f: f, cc: cc, arg: cloneValue(v), result: make(chan callResult, 1),
	}
	hctx, ch := &hc.hookContext, hc.result
	p.wg.Add(1)
	go p.runHook(hc)
	var r callResult
	select {
	case r = <-ch:
		(*timer).Stop()
		hctx.end(context.Canceled)
		if ctx.Err() != nil {
			// The caller is gone; whatever the plugin decided is moot.
			return callResult{failure: OutcomeCancelled}
		}
		return fence(r, deadline)
	case <-(*timer).C:
		hctx.end(context.DeadlineExceeded)
	case <-ctx.Done():
		(*timer).Stop()
		hctx.end(ctx.Err())
		return callResult{failure: OutcomeCancelled}
	}
	// Prefer a completion that was already delivered within the deadline.
	select {
	case r = <-ch:
		if !r.at.After(deadline) {
			return r
		}
	default:
	}
	return callResult{failure: OutcomeTimeout}
}

// hookCall is one isolated hook invocation.
type hookCall struct {
	hookContext
	c      *compiled
	h      hookIndex
	f      callFunc
	cc     CallContext
	arg    any
	result chan callResult // buffered 1: a straggler never blocks
}

func (p *Pipeline) runHook(hc *hookCall) {
	defer p.wg.Done()
	hc.result <- invoke(hc)
}

// hookContext is the context a hook runs under: its parent's values, the
// hook's deadline, and a Done channel that Run closes when it stops waiting
// (deadline, caller gone, or the hook returned). It replaces a
// context.WithDeadline per call, whose private timer dominated the per-call
// cost; Run's one reusable timer drives the deadline instead.
type hookContext struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	err      error // written once, before done is closed
}

func (c *hookContext) Deadline() (time.Time, bool) {
	if pd, ok := c.parent.Deadline(); ok && pd.Before(c.deadline) {
		return pd, true
	}
	return c.deadline, true
}

func (c *hookContext) Done() <-chan struct{} { return c.done }

func (c *hookContext) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

func (c *hookContext) Value(key any) any { return c.parent.Value(key) }

func (c *hookContext) end(err error) {
	c.err = err
	close(c.done)
}

// fence turns a completion after the deadline into a timeout.
func fence(r callResult, deadline time.Time) callResult {
	if r.at.After(deadline) {
		return callResult{failure: OutcomeTimeout}
	}
	return r
}

// invoke runs the callback and checks its outcome, inside the hook's
// goroutine so that a slow encoder or a panicking MarshalJSON is charged to
// the plugin and isolated like the callback itself.
func invoke(hc *hookCall) (r callResult) {
	defer func() {
		if recover() != nil {
			r = callResult{failure: OutcomeException}
		}
		r.at = time.Now()
	}()
	o, err := hc.f(&hc.hookContext, &hc.cc, hc.arg, hc.c.config)
	if err != nil {
		return callResult{failure: failureOf(err)}
	}
	return checkOutcome(hc.c, hc.h, o)
}

// failureOf maps a callback's error to a trace outcome: a stateful instance
// that is gone is worker_down, a stateful deadline is timeout, the rest is
// exception.
func failureOf(err error) TraceOutcome {
	switch {
	case errors.Is(err, ErrInstanceUnavailable):
		return OutcomeWorkerDown
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	}
	return OutcomeException
}

// checkOutcome applies the mode, type and size rules to a plugin's outcome.
func checkOutcome(c *compiled, h hookIndex, o Outcome) callResult {
	spec := &hookSpecs[h]
	if spec.notification {
		// Ignored whatever it is; nothing to validate.
		return callResult{kind: o.kind}
	}
	if c.mode == ModeObserve {
		switch o.kind {
		case kindAmend:
			return callResult{failure: OutcomeObserverCannotAmend}
		case kindReturn, kindReplace:
			return callResult{failure: OutcomeObserverCannotReturn}
		case kindHalt:
			return callResult{failure: OutcomeObserverCannotHalt}
		}
	}
	switch o.kind {
	case kindObserve:
		return callResult{kind: kindObserve}
	case kindHalt:
		return callResult{kind: kindHalt, reason: redactReason(o.reason)}
	case kindAmend:
		if !spec.isValue(o.value) {
			return callResult{failure: OutcomeInvalidResult}
		}
	case kindReturn, kindReplace:
		if !spec.isReturn(o.value) {
			return callResult{failure: OutcomeInvalidResult}
		}
	default:
		return callResult{failure: OutcomeInvalidResult}
	}
	if fail := checkSize(o.value, c.maxResultBytes); fail != outcomeNone {
		return callResult{failure: fail}
	}
	return callResult{kind: o.kind, value: o.value}
}

// checkSize encodes v as JSON: values JSON cannot carry (funcs, channels,
// cycles, NaN) are invalid_result_type, encodings over limit are
// result_too_large.
func checkSize(v any, limit int) TraceOutcome {
	w := &limitWriter{limit: limit}
	err := json.NewEncoder(w).Encode(v)
	switch {
	case errors.Is(err, errTooLarge):
		return OutcomeResultTooLarge
	case err != nil:
		return OutcomeInvalidResultType
	case w.n-1 > limit: // Encode appends a newline
		return OutcomeResultTooLarge
	}
	return outcomeNone
}

var errTooLarge = errors.New("too large")

// limitWriter counts bytes and refuses to pass limit.
type limitWriter struct {
	n, limit int
}

func (w *limitWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	if w.n-1 > w.limit {
		return 0, errTooLarge
	}
	return len(b), nil
}

// Close stops accepting Runs, waits for in-flight Runs and hook goroutines
// (stragglers past their deadline included) and closes every plugin that
// implements io.Closer, such as stateful instances. A hook that ignores its
// context keeps Close waiting until it returns: Go cannot stop a goroutine.
// Use Shutdown to bound the wait.
func (p *Pipeline) Close() error {
	return p.Shutdown(context.Background())
}

// Shutdown is Close with a bound: if ctx ends before every hook goroutine
// has returned, it returns ctx's error (the plugins are still closed) and
// leaves one waiter goroutine behind that exits with the last straggler.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if already {
		return nil
	}
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	var werr error
	select {
	case <-done:
	case <-ctx.Done():
		werr = ctx.Err()
	}
	var errs []error
	for i := range p.plugins {
		if cl := p.plugins[i].closer; cl != nil {
			if err := cl.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close plugin %q: %w", p.plugins[i].id, err))
			}
		}
	}
	if werr != nil {
		errs = append(errs, fmt.Errorf("wait for plugin goroutines: %w", werr))
	}
	return errors.Join(errs...)
}
