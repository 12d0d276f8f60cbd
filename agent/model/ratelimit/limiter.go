package ratelimit

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// DefaultPause is how long a limiter admits nothing after a 429 that
// named no Retry-After.
const DefaultPause = time.Second

// MaxPause bounds a pause (a Retry-After of an hour is a provider outage,
// not a rate limit; the call's own deadline ends it first anyway).
const MaxPause = time.Minute

// Limiter admits model calls to one endpoint under its limits. It is safe
// for concurrent use; share one per endpoint between all the calls that
// count against it.
type Limiter struct {
	endpoint string
	spec     Spec

	mu          sync.Mutex
	managed     bool      // limits come from SetGrant (a worker in a fleet)
	granted     bool      // managed: a grant arrived
	expires     time.Time // managed: the grant's lease ends
	cur         Limits    // in force
	pausedUntil time.Time // a 429's Retry-After: nothing admitted before
	aimd        AIMD      // local mode
	localCut    time.Time // managed: last local cut before the leader's answer
	req, tok    *rate.Limiter
	inUse       int
	// limitsChanged is closed and replaced when the limits, the grant or
	// the pause change; slotFreed when a call ends. Separate, so callers
	// waiting for tokens do not re-reserve at every call's end.
	limitsChanged chan struct{}
	slotFreed     chan struct{}
	retryAfter    time.Duration // longest Retry-After since the last Report
	// Demand: callers in the limiter now (waiting or in flight), the most
	// at once since the window began (Report), the last time there was
	// one. notify (managed) is told when the leader should hear from the
	// worker before its next heartbeat: demand after an idle spell, a
	// grant shrunk or a slot freed past it, so a share moves at once.
	callers      int
	peak         int
	peakSince    time.Time
	lastBusy     time.Time
	reported     Limits // Held of the last Report
	reportedIdle bool   // the last Report said Idle
	notify       func()

	admitted  atomic.Int64
	throttled atomic.Int64
	waiting   atomic.Int64
	waitNanos atomic.Int64
}

// New returns a local limiter enforcing spec for endpoint (a label:
// provider and base URL, never a credential).
func New(endpoint string, spec Spec) *Limiter {
	l := &Limiter{endpoint: endpoint, spec: spec, aimd: NewAIMD(),
		req: rate.NewLimiter(0, 0), tok: rate.NewLimiter(0, 0),
		limitsChanged: make(chan struct{}), slotFreed: make(chan struct{})}
	l.applyLocked(time.Now(), spec.Limits())
	return l
}

// Endpoint is the limiter's endpoint label.
func (l *Limiter) Endpoint() string { return l.endpoint }

// Spec is the declared limits.
func (l *Limiter) Spec() Spec { return l.spec }

// Manage switches the limiter to managed mode: from now on it admits only
// within the grants SetGrant gives it, none before the first.
func (l *Limiter) Manage() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.managed, l.granted = true, false
	l.broadcastLocked()
}

// SetGrant sets a managed limiter's share for ttl from now (the grant
// lapses unless renewed: a worker cut off from the leader stops calling),
// and pauses it for pause (the fleet's Retry-After).
func (l *Limiter) SetGrant(g Limits, pause, ttl time.Duration) {
	l.mu.Lock()
	now := time.Now()
	changed := !l.granted || !now.Before(l.expires) || g != l.cur
	l.granted, l.expires = true, now.Add(ttl)
	if pause > 0 {
		if until := now.Add(min(pause, MaxPause)); until.After(l.pausedUntil) {
			l.pausedUntil, changed = until, true
		}
	}
	shrunk := g.RPM < l.reported.RPM || g.TPM < l.reported.TPM || max(g.Concurrent, l.inUse) < l.reported.Concurrent
	if g != l.cur {
		l.applyLocked(now, g)
	}
	if changed {
		l.broadcastLocked()
	}
	notify := l.notify
	l.mu.Unlock()
	if shrunk && notify != nil {
		// What it gave back is the leader's to hand on once it hears.
		notify()
	}
}

// SetNotify sets the function a managed limiter calls (without its lock
// held, possibly on its own goroutine) when the leader should hear from
// the worker before its next heartbeat: a caller after an idle spell, a
// grant shrunk below what was last reported, a slot freed past the
// grant. The worker heartbeats at once (spaced, coalesced).
func (l *Limiter) SetNotify(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notify = f
}

// applyLocked puts lim in force: one second's worth of burst (at least
// one call), so a fleet's bursts add up to one second of the limit.
func (l *Limiter) applyLocked(now time.Time, lim Limits) {
	l.cur = lim
	set := func(rl *rate.Limiter, perMinute float64) {
		if math.IsInf(perMinute, 1) {
			rl.SetLimitAt(now, rate.Inf)
			rl.SetBurstAt(now, 1)
			return
		}
		rl.SetLimitAt(now, rate.Limit(perMinute/60))
		rl.SetBurstAt(now, max(1, int(math.Ceil(perMinute/60))))
	}
	set(l.req, lim.RPM)
	set(l.tok, lim.TPM)
}

func (l *Limiter) broadcastLocked() {
	close(l.limitsChanged)
	l.limitsChanged = make(chan struct{})
}

// Acquire waits until a call estimated at est tokens may start (a
// concurrency slot, a request and est tokens) or ctx ends. The caller
// must call the returned release with the tokens the call really used.
func (l *Limiter) Acquire(ctx context.Context, est int) (release func(used int), err error) {
	start := time.Now()
	l.waiting.Add(1)
	l.arrive(start)
	slot := false
	defer func() {
		l.waiting.Add(-1)
		l.waitNanos.Add(int64(time.Since(start)))
		if err == nil {
			l.admitted.Add(1)
		} else {
			l.leave(slot)
		}
	}()
	est = max(est, 1)
	if breakLimits {
		slot = true
		l.mu.Lock()
		l.inUse++
		l.mu.Unlock()
		return l.releaser(est), nil
	}
	for {
		l.mu.Lock()
		now := time.Now()
		changed, freed := l.limitsChanged, l.slotFreed
		var also <-chan struct{} // a freed slot, for a concurrency waiter
		d := time.Duration(-1)   // until the channel
		switch {
		case l.managed && (!l.granted || !now.Before(l.expires)):
		case now.Before(l.pausedUntil):
			d = l.pausedUntil.Sub(now)
		case l.cur.RPM <= 0 || l.cur.TPM <= 0 || l.cur.Concurrent <= 0:
		case !slot && l.inUse >= l.cur.Concurrent:
			also = freed
		default:
			if !slot {
				l.inUse++
				slot = true
			}
			if !l.managed && l.aimd.Tick(now) {
				l.applyLocked(now, l.spec.Limits().Scale(l.aimd.Factor()))
			}
			rr := l.req.ReserveN(now, 1)
			tr := l.tok.ReserveN(now, min(est, l.tok.Burst()))
			d = max(rr.DelayFrom(now), tr.DelayFrom(now))
			l.mu.Unlock()
			if d <= 0 {
				return l.releaser(est), nil
			}
			ok, err := waitFor(ctx, changed, nil, d)
			if ok {
				return l.releaser(est), nil
			}
			rr.Cancel()
			tr.Cancel()
			if err != nil {
				return nil, err
			}
			continue
		}
		l.mu.Unlock()
		if _, err := waitFor(ctx, changed, also, d); err != nil {
			return nil, err
		}
	}
}

// waitFor waits d (d < 0: forever) and reports true, or until a or b is
// closed (false, nil; a nil b never is), or until ctx ends (false, its
// error).
func waitFor(ctx context.Context, a, b <-chan struct{}, d time.Duration) (bool, error) {
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
		return true, nil
	case <-a:
		return false, nil
	case <-b:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (l *Limiter) releaser(est int) func(used int) {
	var once sync.Once
	return func(used int) {
		once.Do(func() {
			if used > est {
				// Tokens used beyond the estimate are owed: later calls wait.
				l.mu.Lock()
				l.tok.ReserveN(time.Now(), min(used-est, l.tok.Burst()))
				l.mu.Unlock()
			}
			l.leave(true)
		})
	}
}

// arrive counts a caller; the first since a Report said Idle (the leader
// may have given the share to others) tells the worker to report its
// demand now.
func (l *Limiter) arrive(now time.Time) {
	l.mu.Lock()
	l.callers++
	l.peak = max(l.peak, l.callers)
	l.lastBusy = now
	var notify func()
	if l.reportedIdle {
		l.reportedIdle, notify = false, l.notify
	}
	l.mu.Unlock()
	if notify != nil {
		notify()
	}
}

// leave ends a caller, freeing its slot if it held one; a slot freed
// while the worker reports holding more than its grant is worth telling
// the leader about at once (another worker waits for it).
func (l *Limiter) leave(slot bool) {
	l.mu.Lock()
	l.callers--
	l.lastBusy = time.Now()
	var notify func()
	if slot {
		l.inUse--
		close(l.slotFreed)
		l.slotFreed = make(chan struct{})
		if l.managed && l.reported.Concurrent > l.cur.Concurrent && l.inUse < l.reported.Concurrent {
			notify = l.notify
		}
	}
	l.mu.Unlock()
	if notify != nil {
		notify()
	}
}

// Throttled records a 429 (retryAfter ≤ 0: none given). Every caller of
// the limiter pauses for the Retry-After (DefaultPause without one); a
// local limiter cuts its limits (AIMD), a managed one cuts its grant
// until the leader's next answer, which carries the fleet's cut.
func (l *Limiter) Throttled(retryAfter time.Duration) {
	l.throttled.Add(1)
	if retryAfter <= 0 {
		retryAfter = DefaultPause
	}
	retryAfter = min(retryAfter, MaxPause)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.retryAfter = max(l.retryAfter, retryAfter)
	if until := now.Add(retryAfter); until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
	switch {
	case !l.managed:
		if l.aimd.Throttled(now) {
			l.applyLocked(now, l.spec.Limits().Scale(l.aimd.Factor()))
		}
	case l.localCut.IsZero() || now.Sub(l.localCut) >= Cooldown:
		l.localCut = now
		l.applyLocked(now, l.cur.Scale(Decrease))
	}
	l.broadcastLocked()
}

// Report is what a managed limiter tells the leader in a heartbeat.
type Report struct {
	Spec Spec
	// Held is the grant in force (zero when none or lapsed), so a new
	// leader knows what is outstanding.
	Held Limits
	// Demand is the most callers (waiting or in flight) the limiter had at
	// once in the last window (at least idleAfter long); Idle says it had
	// none for idleAfter: the leader gives its share to those that do.
	Demand int
	Idle   bool
	// Throttled counts 429s since the limiter was made (the leader cuts
	// when it grows); RetryAfter is the longest Retry-After since the
	// last Report.
	Throttled  int64
	RetryAfter time.Duration
}

// Report returns the limiter's report and resets RetryAfter. Demand
// windows last at least idleAfter (a worker's heartbeat interval): a
// worker between two calls is not idle.
func (l *Limiter) Report(idleAfter time.Duration) Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	r := Report{Spec: l.spec, Throttled: l.throttled.Load(), RetryAfter: l.retryAfter,
		Demand: l.peak, Idle: l.callers == 0 && now.Sub(l.lastBusy) >= idleAfter}
	if !r.Idle && r.Demand == 0 {
		r.Demand = 1 // a call ended lately: busy, between calls
	}
	if now.Sub(l.peakSince) >= idleAfter {
		l.peak, l.peakSince = l.callers, now
	}
	if !l.managed || (l.granted && time.Now().Before(l.expires)) {
		r.Held = l.cur
	}
	// A call in flight holds its slot whatever the grant says now (a
	// share moved away, a lapsed grant): the leader must not hand the
	// slot to another worker before the call ends.
	if l.cur.Concurrent != UnlimitedConcurrent || r.Held.Concurrent == 0 {
		r.Held.Concurrent = max(r.Held.Concurrent, l.inUse)
	}
	l.retryAfter = 0
	l.reported, l.reportedIdle = r.Held, r.Idle
	return r
}

// Stats are a limiter's counters, for metrics.
type Stats struct {
	Endpoint string
	// Admitted counts calls admitted (granted a slot and tokens),
	// Throttled 429s, Waiting the callers waiting now, WaitSeconds the
	// total time callers waited.
	Admitted, Throttled int64
	Waiting             int64
	WaitSeconds         float64
	Limits              Limits // in force (a managed limiter without a grant admits nothing)
}

// Stats returns the counters.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	lim := l.cur
	if l.managed && (!l.granted || !time.Now().Before(l.expires)) {
		lim = Limits{}
	}
	l.mu.Unlock()
	return Stats{Endpoint: l.endpoint, Admitted: l.admitted.Load(), Throttled: l.throttled.Load(),
		Waiting: l.waiting.Load(), WaitSeconds: time.Duration(l.waitNanos.Load()).Seconds(), Limits: lim}
}
