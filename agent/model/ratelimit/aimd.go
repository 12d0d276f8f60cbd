package ratelimit

import "time"

// AIMD tuning: a 429 cuts the limits to Decrease of what they were (at
// most once per Cooldown, so one burst of 429s seen by every worker is one
// cut); after Quiet without a 429 they grow back by Increase of the
// declared limits per Quiet, up to the declared limits.
const (
	Decrease  = 0.7
	Increase  = 0.05
	MinFactor = 0.05
	Cooldown  = 2 * time.Second
	Quiet     = 5 * time.Second
)

// AIMD is additive-increase / multiplicative-decrease of a fraction of the
// declared limits. Its methods take the time, so it is deterministic to
// test. The zero value is not ready: use NewAIMD.
type AIMD struct {
	factor  float64
	lastCut time.Time // last decrease
	lastUp  time.Time // last increase (or cut: quiet counts from either)
}

// NewAIMD starts at the declared limits.
func NewAIMD() AIMD { return AIMD{factor: 1} }

// Factor is the fraction of the declared limits in force, in
// [MinFactor, 1].
func (a *AIMD) Factor() float64 { return a.factor }

// Throttled records a 429 at now and reports whether it cut the limits.
func (a *AIMD) Throttled(now time.Time) bool {
	if !a.lastCut.IsZero() && now.Sub(a.lastCut) < Cooldown {
		return false
	}
	a.factor = max(MinFactor, a.factor*Decrease)
	a.lastCut, a.lastUp = now, now
	return true
}

// Tick raises the limits by Increase if nothing was throttled for Quiet
// since the last change, and reports whether it did.
func (a *AIMD) Tick(now time.Time) bool {
	if a.factor >= 1 || now.Sub(a.lastUp) < Quiet {
		return false
	}
	a.factor = min(1, a.factor+Increase)
	a.lastUp = now
	return true
}

// Resume puts factor in force at now (clamped to [MinFactor, 1]), as a
// change: the next increase is a Quiet period away. A coordinator that
// takes over the fleet's limits resumes from the factor the grants
// outstanding show.
func (a *AIMD) Resume(factor float64, now time.Time) {
	a.factor = min(1, max(MinFactor, factor))
	a.lastUp = now
}
