package plugins

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/internal/testutil"
)

type counterState struct {
	Count int    `json:"count"`
	Pad   string `json:"pad,omitempty"`
}

// counter counts calls. Hooks steer it: before_tool blocks until release is
// closed (ignoring ctx), after_tool panics, on_event bloats the state,
// on_user_message sleeps past any short deadline.
type counter struct {
	inFlight, maxInFlight atomic.Int32
	entered               chan struct{}
	release               chan struct{}
	initDelay             time.Duration
	initErr               error
	initPanic             bool
	initPad               int
}

func (c *counter) Init(ctx context.Context, _ map[string]any) (counterState, error) {
	if c.initPanic {
		panic("init")
	}
	if c.initDelay > 0 {
		select {
		case <-time.After(c.initDelay):
		case <-ctx.Done():
			return counterState{}, ctx.Err()
		}
	}
	return counterState{Pad: strings.Repeat("x", c.initPad)}, c.initErr
}

func (c *counter) HandleHook(_ context.Context, hook Hook, _ CallContext, _ any, s counterState) (Outcome, counterState, error) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		m := c.maxInFlight.Load()
		if n <= m || c.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	s.Count++
	switch hook {
	case HookBeforeTool:
		if c.entered != nil {
			c.entered <- struct{}{}
		}
		<-c.release
	case HookAfterTool:
		panic("crash")
	case HookOnEvent:
		s.Pad = strings.Repeat("x", 2048)
	case HookOnUserMessage:
		time.Sleep(100 * time.Millisecond) // deliberately slower than the 20 ms deadline
	}
	return Return(map[string]any{"count": s.Count}), s, nil
}

func newCounter(t *testing.T, spec InstanceSpec, c *counter) *Instance {
	t.Helper()
	if spec.ID == "" {
		spec.ID = "counter"
	}
	inst, err := NewInstance[counterState](context.Background(), spec, c)
	if err != nil {
		t.Fatalf("NewInstance: %v", err)
	}
	t.Cleanup(func() { _ = inst.Close() })
	return inst
}

func invokeCount(t *testing.T, inst *Instance, hook Hook, timeout time.Duration) (int, error) {
	t.Helper()
	o, err := inst.Invoke(context.Background(), hook, CallContext{}, nil, timeout)
	if err != nil {
		return 0, err
	}
	return o.Value().(map[string]any)["count"].(int), nil
}

func TestInstance_SerializedConcurrentState(t *testing.T) {
	c := &counter{}
	inst := newCounter(t, InstanceSpec{}, c)
	var wg sync.WaitGroup
	counts := make([]int, 20)
	for i := range counts {
		wg.Go(func() {
			n, err := invokeCount(t, inst, HookBeforeModel, 5*time.Second)
			if err != nil {
				t.Errorf("invoke %d: %v", i, err)
			}
			counts[i] = n
		})
	}
	wg.Wait()
	sort.Ints(counts)
	for i, n := range counts {
		if n != i+1 {
			t.Fatalf("counts = %v, want 1..20", counts)
		}
	}
	if c.maxInFlight.Load() != 1 {
		t.Fatalf("%d callbacks overlapped", c.maxInFlight.Load())
	}
	testutil.WaitFor(t, 2*time.Second, "instance to go idle", func() bool {
		st, _ := inst.Status()
		return !st.Busy
	})
	st, err := inst.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Generation != 20 || st.Busy || st.Queued != 0 || st.RestartPolicy != "temporary" || st.ID != "counter" || st.Identity == 0 {
		t.Fatalf("status = %+v", st)
	}
}

func TestInstance_QueueFull(t *testing.T) {
	c := &counter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	inst := newCounter(t, InstanceSpec{MaxQueue: 1}, c)
	errs := make(chan error, 2)
	go func() { _, err := invokeCount(t, inst, HookBeforeTool, 5*time.Second); errs <- err }()
	<-c.entered
	go func() { _, err := invokeCount(t, inst, HookBeforeModel, 5*time.Second); errs <- err }()
	testutil.WaitFor(t, 2*time.Second, "one queued caller", func() bool {
		st, _ := inst.Status()
		return st.Busy && st.Queued == 1
	})
	_, err := invokeCount(t, inst, HookBeforeModel, 5*time.Second)
	if pe := wantCode(t, err, CodeQueueFull); !pe.Retryable() {
		t.Fatal("queue_full should be retryable")
	}
	close(c.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestInstance_DeadlineFencesLateState(t *testing.T) {
	c := &counter{}
	inst := newCounter(t, InstanceSpec{}, c)
	start := time.Now()
	_, err := invokeCount(t, inst, HookOnUserMessage, 20*time.Millisecond)
	wantCode(t, err, CodeTimeout)
	if el := time.Since(start); el > 90*time.Millisecond {
		t.Fatalf("timed-out invoke returned after %v", el)
	}
	// The straggler finishes later; its count must not commit.
	n, err := invokeCount(t, inst, HookBeforeModel, 5*time.Second)
	if err != nil || n != 1 {
		t.Fatalf("next count = %d, %v; want 1 (late state discarded)", n, err)
	}
	if st, _ := inst.Status(); st.Generation != 1 {
		t.Fatalf("generation = %d, want 1", st.Generation)
	}
}

func TestInstance_AbandonedCallerDiscardsState(t *testing.T) {
	c := &counter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	inst := newCounter(t, InstanceSpec{}, c)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := inst.Invoke(ctx, HookBeforeTool, CallContext{}, nil, 5*time.Second)
		errc <- err
	}()
	<-c.entered
	cancel()
	wantCode(t, <-errc, CodeTimeout)
	close(c.release) // the callback completes within its deadline, but nobody waits
	n, err := invokeCount(t, inst, HookBeforeModel, 5*time.Second)
	if err != nil || n != 1 {
		t.Fatalf("next count = %d, %v; want 1", n, err)
	}
}

func TestInstance_StateSizeIsBounded(t *testing.T) {
	inst := newCounter(t, InstanceSpec{MaxStateBytes: 1024}, &counter{})
	_, err := invokeCount(t, inst, HookOnEvent, time.Second)
	wantCode(t, err, CodeStateTooLarge)
	if n, err := invokeCount(t, inst, HookBeforeModel, time.Second); err != nil || n != 1 {
		t.Fatalf("after oversized state: %d, %v", n, err)
	}
}

func TestInstance_CrashedInstanceStaysDead(t *testing.T) {
	inst := newCounter(t, InstanceSpec{}, &counter{})
	if _, err := invokeCount(t, inst, HookBeforeModel, time.Second); err != nil {
		t.Fatal(err)
	}
	before, _ := inst.Status()
	_, err := invokeCount(t, inst, HookAfterTool, time.Second)
	wantCode(t, err, "exception")
	for range 3 {
		_, err = invokeCount(t, inst, HookBeforeModel, time.Second)
		if !errors.Is(err, ErrInstanceUnavailable) {
			t.Fatalf("invoke after crash = %v", err)
		}
	}
	if _, err := inst.Status(); !errors.Is(err, ErrInstanceUnavailable) {
		t.Fatalf("status after crash = %v", err)
	}
	if err := inst.Recreate(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, _ := inst.Status()
	if after.Identity == before.Identity || after.Generation != 0 {
		t.Fatalf("recreated status %+v, before %+v", after, before)
	}
	if n, err := invokeCount(t, inst, HookBeforeModel, time.Second); err != nil || n != 1 {
		t.Fatalf("recreated instance count = %d, %v; want fresh state", n, err)
	}
}

func TestInstance_Initialisation(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec InstanceSpec
		c    *counter
		code string
	}{
		{"slow init", InstanceSpec{InitTimeoutMs: 20}, &counter{initDelay: time.Second}, CodeInitTimeout},
		{"init error", InstanceSpec{}, &counter{initErr: errors.New("no")}, CodeInitFailed},
		{"init panic", InstanceSpec{}, &counter{initPanic: true}, CodeInitFailed},
		{"huge initial state", InstanceSpec{MaxStateBytes: 100}, &counter{initPad: 200}, CodeInitialStateTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.ID = "c"
			start := time.Now()
			_, err := NewInstance[counterState](context.Background(), tc.spec, tc.c)
			wantCode(t, err, tc.code)
			if el := time.Since(start); el > 500*time.Millisecond {
				t.Fatalf("NewInstance took %v", el)
			}
		})
	}
}

func TestInstance_SpecAndInvocationBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec InstanceSpec
		ok   bool
	}{
		{"id 256", InstanceSpec{ID: strings.Repeat("i", 256)}, true},
		{"id 257", InstanceSpec{ID: strings.Repeat("i", 257)}, false},
		{"no id", InstanceSpec{}, false},
		{"queue 4096", InstanceSpec{ID: "c", MaxQueue: 4096}, true},
		{"queue 4097", InstanceSpec{ID: "c", MaxQueue: 4097}, false},
		{"queue -1", InstanceSpec{ID: "c", MaxQueue: -1}, false},
		{"state 64 MiB", InstanceSpec{ID: "c", MaxStateBytes: 64 << 20}, true},
		{"state 64 MiB + 1", InstanceSpec{ID: "c", MaxStateBytes: 64<<20 + 1}, false},
		{"init 30000", InstanceSpec{ID: "c", InitTimeoutMs: 30_000}, true},
		{"init 30001", InstanceSpec{ID: "c", InitTimeoutMs: 30_001}, false},
		{"config over 1 MiB", InstanceSpec{ID: "c", Config: map[string]any{"s": strings.Repeat("x", 1<<20)}}, false},
		{"unknown hook", InstanceSpec{ID: "c", Hooks: []Hook{"on_nothing"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := NewInstance[counterState](context.Background(), tc.spec, &counter{})
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				_ = inst.Close()
				return
			}
			wantCode(t, err, CodeInvalidInstanceSpec)
		})
	}
	inst := newCounter(t, InstanceSpec{}, &counter{})
	for _, d := range []time.Duration{0, -time.Millisecond, 120*time.Second + time.Millisecond} {
		_, err := inst.Invoke(context.Background(), HookBeforeModel, CallContext{}, nil, d)
		wantCode(t, err, CodeInvalidInstanceInvocation)
	}
	if _, err := inst.Invoke(context.Background(), HookBeforeModel, CallContext{}, nil, 120*time.Second); err != nil {
		t.Fatalf("120 s invocation: %v", err)
	}
}

func TestInstance_CloseFailsQueuedCallers(t *testing.T) {
	c := &counter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	inst, err := NewInstance[counterState](context.Background(), InstanceSpec{ID: "c"}, c)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() { _, err := invokeCount(t, inst, HookBeforeTool, 5*time.Second); errs <- err }()
	<-c.entered
	go func() { _, err := invokeCount(t, inst, HookBeforeModel, 5*time.Second); errs <- err }()
	testutil.WaitFor(t, 2*time.Second, "queued caller", func() bool { st, _ := inst.Status(); return st.Queued == 1 })
	closed := make(chan struct{})
	go func() { _ = inst.Close(); close(closed) }()
	for range 2 {
		wantCode(t, <-errs, CodeInstanceStopped)
	}
	close(c.release) // Close waits for the blocked callback's goroutine
	<-closed
	if _, err := invokeCount(t, inst, HookBeforeModel, time.Second); !errors.Is(err, ErrInstanceUnavailable) {
		t.Fatalf("invoke after Close = %v", err)
	}
}

// Through the pipeline the instance is an ordinary descriptor: every hook is
// forwarded, and instance failures follow the failure policy.
func TestInstance_AdapterForwardsEveryHook(t *testing.T) {
	inst, err := NewInstance[counterState](context.Background(), InstanceSpec{ID: "c"}, &counter{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile([]Descriptor{{ID: "c", Plugin: inst, FailurePolicy: PolicyClosed}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close() // closes the instance too
	values := map[Hook]any{
		HookOnUserMessage: &model.Message{}, HookBeforeRun: &Turn{}, HookAfterRun: &Turn{},
		HookBeforeAgent: &Turn{}, HookAfterAgent: &Turn{}, HookBeforeModel: request("q"),
		HookAfterModel: &model.Response{}, HookOnModelError: &Failure{}, HookBeforeTool: &ToolInvocation{},
		HookOnToolError: &Failure{}, HookOnEvent: &session.Event{},
		HookOnAgentError: &Failure{}, HookOnRunError: &Failure{},
	}
	// Observe mode: the counter's Return is an observer failure on ordinary
	// hooks and ignored on notifications, which proves the call arrived.
	for hook, v := range values {
		if hook == HookBeforeTool || hook == HookOnEvent || hook == HookOnUserMessage {
			continue // these block, bloat or sleep in the counter
		}
		r := p.Run(context.Background(), hook, CallContext{}, v)
		want := OutcomeObserverCannotReturn
		if hook.IsNotification() {
			want = OutcomeNotificationIgnored
		}
		wantOutcomes(t, r, want)
	}
	// A crash: the failing call is an exception, later calls find the
	// instance down.
	r := p.Run(context.Background(), HookAfterTool, CallContext{}, map[string]any{})
	wantOutcomes(t, r, OutcomeException)
	r = p.Run(context.Background(), HookBeforeModel, CallContext{}, request("q"))
	wantOutcomes(t, r, OutcomeWorkerDown)
	if pe := wantCode(t, r.Err, CodePluginFailed); pe.Reason != "worker_down" {
		t.Fatalf("closed failure: %+v", pe)
	}
}

func TestInstance_AdapterTimeoutIsTimeout(t *testing.T) {
	inst, err := NewInstance[counterState](context.Background(), InstanceSpec{ID: "c"}, &counter{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile([]Descriptor{{ID: "c", Plugin: inst, TimeoutMs: 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := p.Run(context.Background(), HookOnUserMessage, CallContext{}, &model.Message{})
	wantOutcomes(t, r, OutcomeTimeout)
}
