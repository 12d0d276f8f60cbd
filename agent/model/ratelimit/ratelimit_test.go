package ratelimit

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestParseSpec(t *testing.T) {
	good, err := ParseSpec([]byte(`{"requests_per_minute":600,"concurrent_requests":4}`))
	if err != nil || good != (Spec{RequestsPerMinute: 600, ConcurrentRequests: 4}) {
		t.Fatalf("good: %+v %v", good, err)
	}
	for _, tc := range []struct{ in, key string }{
		{`{"requests_per_minute":0}`, "rate_limit.requests_per_minute"},
		{`{"requests_per_minute":-5}`, "rate_limit.requests_per_minute"},
		{`{"requests_per_minute":1.5}`, "rate_limit.requests_per_minute"},
		{`{"tokens_per_minute":1000000001}`, "rate_limit.tokens_per_minute"},
		{`{"concurrent_requests":10001}`, "rate_limit.concurrent_requests"},
		{`{}`, "rate_limit"},
		{`{"rpm":5}`, "rate_limit.rpm"},
		{`{"concurrent_requests":"many"}`, "rate_limit.concurrent_requests"},
		{`null`, "rate_limit"},
		{`[1]`, "rate_limit"},
	} {
		_, err := ParseSpec([]byte(tc.in))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("%s: %v, want a ConfigError naming %s", tc.in, err, tc.key)
		}
	}
}

func TestAllot_GrantsNeverExceedTheLimit(t *testing.T) {
	total := Limits{RPM: 1200, TPM: Unlimited, Concurrent: 10}
	unknown := []int{UnknownDemand, UnknownDemand, UnknownDemand}
	// Three workers settled: equal shares, the concurrency remainder to
	// the first.
	var sum Limits
	for rank := range 3 {
		g := Allot(total, unknown, rank, 0, Limits{})
		if g.RPM != 400 || !math.IsInf(g.TPM, 1) || g.Concurrent != 3+btoi(rank == 0) {
			t.Fatalf("rank %d: %+v", rank, g)
		}
		sum = sum.Add(g)
	}
	if sum.Concurrent != 10 {
		t.Fatalf("concurrency shares add to %d", sum.Concurrent)
	}
	// A fourth joins while the three still hold 400 each: it gets only
	// what is left, until their shrunk grants reach them.
	four := append(unknown, UnknownDemand)
	g := Allot(total, four, 3, 0, Limits{RPM: 1200, Concurrent: 10})
	if g.RPM != 0 || g.Concurrent != 0 {
		t.Fatalf("joiner got %+v while the others hold everything", g)
	}
	g = Allot(total, four, 3, 0, Limits{RPM: 3 * 300, Concurrent: 3 * 3})
	if g.RPM != 300 || g.Concurrent != 1 {
		t.Fatalf("joiner after rebalance: %+v", g)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestAllot_FollowsDemand: idle holders get nothing while others wait,
// slots go up to each holder's callers (the rest to those wanting more),
// the rate only to holders with a slot, and every allotment adds up to no
// more than the limit.
func TestAllot_FollowsDemand(t *testing.T) {
	all := func(total Limits, demands []int, turn int) []Limits {
		out := make([]Limits, len(demands))
		var sum Limits
		for i := range demands {
			out[i] = Allot(total, demands, i, turn, Limits{})
			sum = sum.Add(out[i])
		}
		if sum.RPM > total.RPM+1e-9 || sum.TPM > total.TPM || total.Concurrent != UnlimitedConcurrent && sum.Concurrent > total.Concurrent {
			t.Fatalf("%v: grants %+v add up to %+v, over %+v", demands, out, sum, total)
		}
		return out
	}
	rpm := Limits{RPM: 1200, TPM: Unlimited, Concurrent: UnlimitedConcurrent}
	// Two busy, two idle: the busy two share the whole rate.
	g := all(rpm, []int{8, 0, 3, 0}, 0)
	if g[0].RPM != 600 || g[2].RPM != 600 || g[1].RPM != 0 || g[3].RPM != 0 {
		t.Fatalf("two busy of four: %+v", g)
	}
	// Nobody busy: an equal split, so a job's first call need not wait.
	if g := all(rpm, []int{0, 0, 0, 0}, 0); g[3].RPM != 300 {
		t.Fatalf("all idle: %+v", g)
	}
	// Concurrency 6 among demands 1, 8, 8: the small one gets its one
	// caller's slot, the others the rest; the rate is split three ways.
	conc := Limits{RPM: 1200, TPM: Unlimited, Concurrent: 6}
	g = all(conc, []int{1, 8, 8}, 0)
	if g[0].Concurrent != 1 || g[1].Concurrent+g[2].Concurrent != 5 || g[0].RPM != 400 {
		t.Fatalf("demands 1,8,8 of 6 slots: %+v", g)
	}
	// Demand below the slots: every holder gets its callers, the spare
	// goes round.
	g = all(conc, []int{1, 2, 0}, 1)
	if g[0].Concurrent < 1 || g[1].Concurrent < 2 || g[2].Concurrent != 0 || g[0].Concurrent+g[1].Concurrent != 6 {
		t.Fatalf("demands 1,2,idle of 6 slots: %+v", g)
	}
	// Two slots among four busy holders: two hold one each in turn, and
	// only they get a rate (600 each, not 300: the others cannot call).
	seen := map[int]bool{}
	for turn := range 4 {
		g = all(Limits{RPM: 1200, TPM: Unlimited, Concurrent: 2}, []int{4, 4, 4, 4}, turn)
		for i, l := range g {
			if l.Concurrent > 0 {
				seen[i] = true
				if l.RPM != 600 {
					t.Fatalf("turn %d: holder %d of a slot gets rate %v", turn, i, l.RPM)
				}
			} else if l.RPM != 0 {
				t.Fatalf("turn %d: holder %d without a slot gets rate %v", turn, i, l.RPM)
			}
		}
	}
	if len(seen) != 4 {
		t.Fatalf("in 4 turns only %v held a slot", seen)
	}
	// Out-of-range self: nothing.
	if g := Allot(rpm, []int{1}, 3, 0, Limits{}); g != (Limits{}) {
		t.Fatalf("self out of range: %+v", g)
	}
}

func TestAIMD_CutsOncePerCooldownAndRecoversWhenQuiet(t *testing.T) {
	a := NewAIMD()
	t0 := time.Unix(1000, 0)
	if !a.Throttled(t0) || a.Factor() != Decrease {
		t.Fatalf("first 429: factor %v", a.Factor())
	}
	// Every worker saw the same burst: one cut.
	if a.Throttled(t0.Add(Cooldown/2)) || a.Factor() != Decrease {
		t.Fatalf("second 429 within the cooldown cut again: %v", a.Factor())
	}
	if !a.Throttled(t0.Add(Cooldown)) || math.Abs(a.Factor()-Decrease*Decrease) > 1e-9 {
		t.Fatalf("429 after the cooldown: %v", a.Factor())
	}
	now := t0.Add(Cooldown)
	if a.Tick(now.Add(Quiet / 2)) {
		t.Fatal("raised before a quiet period")
	}
	steps := 0
	for now = now.Add(Quiet); a.Tick(now); now = now.Add(Quiet) {
		steps++
	}
	if a.Factor() != 1 || steps != int(math.Ceil((1-Decrease*Decrease)/Increase-1e-9)) {
		t.Fatalf("recovered to %v in %d steps", a.Factor(), steps)
	}
	for range 100 {
		a.Throttled(now)
		now = now.Add(Cooldown)
	}
	if a.Factor() != MinFactor {
		t.Fatalf("floor %v", a.Factor())
	}
}

func acquire(t *testing.T, l *Limiter, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	release, err := l.Acquire(ctx, 1)
	if err == nil {
		release(1)
	}
	return err
}

func TestLimiter_RequestsPerMinute(t *testing.T) {
	l := New("fake", Spec{RequestsPerMinute: 600}) // 10/s, burst 10
	start := time.Now()
	for range 20 {
		if err := acquire(t, l, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// The burst of 10 at once, then 10 more at 10/s: at least ~1 s
	// (a loaded machine only makes it longer).
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("20 calls at 600/min took %v", el)
	}
	if s := l.Stats(); s.Admitted != 20 || s.Waiting != 0 || s.WaitSeconds <= 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestLimiter_ConcurrencyBound(t *testing.T) {
	l := New("fake", Spec{ConcurrentRequests: 2})
	ctx := context.Background()
	r1, _ := l.Acquire(ctx, 1)
	r2, _ := l.Acquire(ctx, 1)
	if err := acquire(t, l, 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third concurrent call: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- acquire(t, l, 10*time.Second) }()
	r1(1)
	if err := <-done; err != nil {
		t.Fatalf("after a release: %v", err)
	}
	r2(1)
}

func TestLimiter_ManagedAdmitsOnlyWithinALiveGrant(t *testing.T) {
	l := New("fake", Spec{RequestsPerMinute: 600})
	l.Manage()
	if err := acquire(t, l, 50*time.Millisecond); err == nil {
		t.Fatal("admitted without a grant")
	}
	l.SetGrant(Limits{RPM: 600, TPM: Unlimited, Concurrent: UnlimitedConcurrent}, 0, 150*time.Millisecond)
	if err := acquire(t, l, time.Second); err != nil {
		t.Fatalf("with a grant: %v", err)
	}
	if r := l.Report(time.Second); r.Held.RPM != 600 {
		t.Fatalf("report %+v", r)
	}
	// The grant lapses without renewal (the worker lost the leader).
	deadline := time.Now().Add(10 * time.Second)
	for l.Report(time.Second).Held.RPM != 0 {
		if time.Now().After(deadline) {
			t.Fatal("grant never lapsed")
		}
		time.Sleep(10 * time.Millisecond) // polling the lease, not synchronising
	}
	if err := acquire(t, l, 50*time.Millisecond); err == nil {
		t.Fatal("admitted on a lapsed grant")
	}
	// A waiter starts as soon as a grant arrives.
	done := make(chan error, 1)
	go func() { done <- acquire(t, l, 10*time.Second) }()
	l.SetGrant(Limits{RPM: 600, TPM: Unlimited, Concurrent: UnlimitedConcurrent}, 0, time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestLimiter_ThrottledPausesEveryCallerAndCuts(t *testing.T) {
	l := New("fake", Spec{RequestsPerMinute: 6000})
	l.Throttled(300 * time.Millisecond)
	start := time.Now()
	if err := acquire(t, l, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("admitted %v after a 300 ms Retry-After", el)
	}
	if s := l.Stats(); s.Limits.RPM != 6000*Decrease || s.Throttled != 1 {
		t.Fatalf("after a 429: %+v", s)
	}
	if r := l.Report(time.Second); r.RetryAfter != 300*time.Millisecond || r.Throttled != 1 {
		t.Fatalf("report %+v", r)
	}
	if r := l.Report(time.Second); r.RetryAfter != 0 {
		t.Fatalf("retry-after not reset: %+v", r)
	}
}

// throttling answers 429 to its first n calls.
type throttling struct {
	n, calls atomic.Int64
}

func (p *throttling) Name() string { return "fake" }
func (p *throttling) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	if p.calls.Add(1) <= p.n.Load() {
		return nil, &model.Error{Provider: "fake", Class: model.ClassRateLimited, Status: 429, Retryable: true, RetryAfter: 20 * time.Millisecond}
	}
	return &model.Response{Usage: model.Usage{InputTokens: 3, OutputTokens: 2}}, nil
}

func TestProvider_ThrottledCallIsRetriedNotFailed(t *testing.T) {
	inner := &throttling{}
	inner.n.Store(3)
	l := New("fake", Spec{RequestsPerMinute: 60000})
	p := Wrap(inner, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Generate(ctx, &model.Request{}); err != nil {
		t.Fatalf("throttled call failed: %v", err)
	}
	if inner.calls.Load() != 4 || l.Stats().Throttled != 3 {
		t.Fatalf("%d calls, %+v", inner.calls.Load(), l.Stats())
	}
	// Past the caller's deadline it ends as a timeout, not rate_limited.
	inner.n.Store(1 << 40)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	_, err := p.Generate(ctx2, &model.Request{})
	var me *model.Error
	if !errors.As(err, &me) || me.Class != model.ClassTimeout {
		t.Fatalf("at the deadline: %v", err)
	}
	if !strings.Contains(err.Error(), "timeout") {
		t.Fatal(err)
	}
}

// FuzzParseSpec: any input is either a valid spec or a ConfigError naming
// a rate_limit key; never a panic.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{`{"requests_per_minute":600}`, `{"tokens_per_minute":1,"concurrent_requests":10000}`,
		`{}`, `null`, `{"requests_per_minute":1e3}`, `{"requests_per_minute":-1}`, `{"x":1}`, `[`, `{"concurrent_requests":"2"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec(data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Key, "rate_limit") {
				t.Fatalf("%q: %v", data, err)
			}
			return
		}
		if s.Validate() != nil || s == (Spec{}) {
			t.Fatalf("%q parsed to invalid %+v", data, s)
		}
	})
}

// TestRegistry: one limiter per endpoint whoever asks, a different limit
// for it is a ConflictError naming both sources, and a managed registry
// makes managed limiters (which report the calls in flight as held
// concurrency, even without a grant).
func TestRegistry(t *testing.T) {
	r := NewRegistry()
	key := EndpointKey("openai", "http://127.0.0.1:1/v1", "m")
	if key != "openai http://127.0.0.1:1/v1 m" || EndpointKey("scripted", "", "scripted") != "scripted" {
		t.Fatalf("keys %q %q", key, EndpointKey("scripted", "", "scripted"))
	}
	spec := Spec{RequestsPerMinute: 60, ConcurrentRequests: 2}
	a, err := r.Limiter(key, spec, "agent")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Limiter(key, spec, "judge")
	if err != nil || a != b {
		t.Fatalf("same endpoint, same limit: %p %p %v", a, b, err)
	}
	_, err = r.Limiter(key, Spec{RequestsPerMinute: 30}, "judge")
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Source != "judge" || ce.OtherSource != "agent" ||
		err.Error() != "rate_limit in judge differs from agent (requests_per_minute=30 vs requests_per_minute=60 concurrent_requests=2) for endpoint openai http://127.0.0.1:1/v1 m: an endpoint has one limit per process" {
		t.Fatalf("conflict: %v", err)
	}
	r.Manage()
	l, err := r.Limiter("other", Spec{ConcurrentRequests: 2}, "x")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(ctx, 1); err == nil {
		t.Fatal("a managed limiter without a grant admitted a call")
	}
	l.SetGrant(Limits{RPM: Unlimited, TPM: Unlimited, Concurrent: 1}, 0, time.Minute)
	release, err := l.Acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	l.SetGrant(Limits{RPM: Unlimited, TPM: Unlimited, Concurrent: 0}, 0, time.Minute)
	if h := l.Report(time.Second).Held.Concurrent; h != 1 {
		t.Fatalf("held concurrency %d with a call in flight and a grant of 0", h)
	}
	release(1)
	if h := l.Report(time.Second).Held.Concurrent; h != 0 {
		t.Fatalf("held concurrency %d after the call", h)
	}
	if n := len(r.Limiters()); n != 2 {
		t.Fatalf("%d limiters", n)
	}
}

// TestLimiter_ReportsDemandAndAsksWhenItChanges: a managed limiter
// reports its callers (the most at once in a window, Idle after a quiet
// window), and asks for a heartbeat now when a caller comes after a
// report said Idle (the share may be with others) and when a grant
// shrinks below what it last reported (what it gave back is the leader's
// to hand on).
func TestLimiter_ReportsDemandAndAsksWhenItChanges(t *testing.T) {
	l := New("e", Spec{RequestsPerMinute: 6000, ConcurrentRequests: 4})
	l.Manage()
	asked := make(chan struct{}, 16)
	l.SetNotify(func() { asked <- struct{}{} })
	drain := func() int {
		n := 0
		for {
			select {
			case <-asked:
				n++
			default:
				return n
			}
		}
	}
	const window = 20 * time.Millisecond
	if r := l.Report(window); !r.Idle || r.Demand != 0 {
		t.Fatalf("fresh limiter: %+v", r)
	}
	l.SetGrant(Limits{RPM: 6000, TPM: Unlimited, Concurrent: 4}, 0, time.Minute)
	ctx := context.Background()
	rel1, err := l.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := drain(); n != 1 {
		t.Fatalf("first caller after an idle report asked %d times, want 1", n)
	}
	rel2, err := l.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := drain(); n != 0 {
		t.Fatalf("second caller asked %d times", n)
	}
	rel1(1)
	rel2(1)
	r := l.Report(window)
	if r.Idle || r.Demand != 2 || r.Held.Concurrent != 4 {
		t.Fatalf("after two callers: %+v", r)
	}
	// A shrunk grant asks (the slots given back); a grown one does not.
	l.SetGrant(Limits{RPM: 3000, TPM: Unlimited, Concurrent: 2}, 0, time.Minute)
	if n := drain(); n != 1 {
		t.Fatalf("shrunk grant asked %d times, want 1", n)
	}
	// Quiet for a window: idle.
	deadline := time.Now().Add(10 * time.Second)
	for r = l.Report(window); !r.Idle; r = l.Report(window) {
		if time.Now().After(deadline) {
			t.Fatalf("never idle: %+v", r)
		}
		time.Sleep(window)
	}
	if r.Demand != 0 {
		t.Fatalf("idle report with demand %+v", r)
	}
}
