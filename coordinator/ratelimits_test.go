package coordinator

import (
	"math"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model/ratelimit"
	"github.com/fadcedab/adk/coordinator/api"
)

func limitReport(held float64, throttled int64) []api.LimitReport {
	return []api.LimitReport{{Agent: "a", Endpoint: "openai http://x", RPM: 1200, Held: api.LimitShare{RPM: held}, Throttled: throttled}}
}

// TestFleetLimits_SharesStayUnderTheLimit: workers joining and leaving
// never hold more than the limit together, and settle on equal shares.
func TestFleetLimits_SharesStayUnderTheLimit(t *testing.T) {
	f := newFleetLimits()
	ttl := 5 * time.Second
	now := time.Unix(1000, 0)
	held := map[string]float64{}
	beat := func(w string) float64 {
		f.observe(w, limitReport(held[w], 0), now)
		g := f.grant(w, limitReport(held[w], 0), now, ttl, time.Time{})
		if len(g) != 1 {
			t.Fatalf("%s: grants %+v", w, g)
		}
		held[w] = g[0].Share.RPM
		sum := 0.0
		for _, h := range held {
			sum += h
		}
		if sum > 1200+1e-9 {
			t.Fatalf("after %s's heartbeat the grants add up to %v: %v", w, sum, held)
		}
		return held[w]
	}
	if g := beat("w1"); g != 1200 {
		t.Fatalf("alone: %v", g)
	}
	for round := 0; round < 3; round++ {
		for _, w := range []string{"w1", "w2", "w3", "w4"} {
			beat(w)
		}
		now = now.Add(time.Second)
	}
	for w, h := range held {
		if h != 300 {
			t.Fatalf("settled shares %v (%s)", held, w)
		}
	}
	// w4 leaves: its grant counts until its lease ends, then the others
	// share its part.
	left := now.Add(-time.Second) // its last heartbeat: its lease runs from there
	for range 8 {
		now = now.Add(time.Second)
		if now.Sub(left) > ttl {
			delete(held, "w4")
		}
		for _, w := range []string{"w1", "w2", "w3"} {
			beat(w)
		}
	}
	if held["w1"] != 400 || held["w3"] != 400 {
		t.Fatalf("after w4 left: %v", held)
	}
}

// TestFleetLimits_ThrottleCutsForEveryoneOnce: 429s reported by several
// workers at once cut the fleet's limit once, pause every worker for the
// Retry-After, and the limit grows back after a quiet period.
func TestFleetLimits_ThrottleCutsForEveryoneOnce(t *testing.T) {
	f := newFleetLimits()
	ttl := 5 * time.Second
	now := time.Unix(1000, 0)
	for _, w := range []string{"w1", "w2"} {
		f.observe(w, limitReport(0, 0), now)
	}
	g := f.grant("w1", limitReport(0, 0), now, ttl, time.Time{})
	if g[0].Share.RPM != 600 || g[0].PauseMS != 0 {
		t.Fatalf("before: %+v", g)
	}
	r := limitReport(600, 3)
	r[0].RetryAfterMS = 1500
	f.observe("w1", r, now)
	f.observe("w2", limitReport(600, 2), now)
	// The first grants after the cut respect what the other still holds;
	// a round later both run at half the cut limit.
	g1 := f.grant("w1", limitReport(600, 3), now, ttl, time.Time{})
	g2 := f.grant("w2", limitReport(600, 2), now, ttl, time.Time{})
	want := 1200 * ratelimit.Decrease / 2
	if g1[0].Share.RPM > want || g2[0].Share.RPM > want || g1[0].PauseMS != 1500 || g2[0].PauseMS != 1500 {
		t.Fatalf("after 429s from both: %+v %+v, want at most %v and a 1500 ms pause", g1, g2, want)
	}
	now = now.Add(time.Second)
	f.observe("w1", limitReport(g1[0].Share.RPM, 3), now)
	f.observe("w2", limitReport(g2[0].Share.RPM, 2), now)
	g1 = f.grant("w1", limitReport(g1[0].Share.RPM, 3), now, ttl, time.Time{})
	g2 = f.grant("w2", limitReport(g2[0].Share.RPM, 2), now, ttl, time.Time{})
	if g1[0].Share.RPM+g2[0].Share.RPM > 2*want+1e-9 {
		t.Fatalf("second round: %+v %+v", g1, g2)
	}
	now = now.Add(time.Second)
	g1 = f.grant("w1", limitReport(g1[0].Share.RPM, 3), now, ttl, time.Time{})
	if g1[0].Share.RPM != want {
		t.Fatalf("settled: %+v, want %v", g1, want)
	}
	if st := (&Node{limits: f}).LimitStates(); len(st) != 1 || st[0].Cuts != 1 || st[0].Holders != 2 {
		t.Fatalf("states %+v", st)
	}
	// Quiet: it grows back.
	for range 20 {
		now = now.Add(ratelimit.Quiet)
		f.observe("w1", limitReport(600, 3), now)
		f.observe("w2", limitReport(600, 2), now)
		f.grant("w1", limitReport(600, 3), now, ttl, time.Time{})
	}
	if g := f.grant("w2", limitReport(600, 2), now, ttl, time.Time{}); g[0].Share.RPM != 600 {
		t.Fatalf("after quiet: %+v", g)
	}
}

// TestFleetLimits_FailoverNeverOverGrants: a new leader does not know what
// its predecessor granted in answer to the last heartbeats. Until every
// live holder has reported to it, and it has listened for a whole TTL, it
// grows nobody's grant (so the grants outstanding, old and new, never add
// up past the limit); then it resumes from the factor the outstanding
// grants show, not from the declared limit.
func TestFleetLimits_FailoverNeverOverGrants(t *testing.T) {
	ttl := time.Second
	now := time.Unix(1000, 0)
	old := newFleetLimits()
	old.lead(now.Add(-time.Hour))
	heard := now.Add(-time.Hour)
	// The new leader is a node restarted just now: it knows nothing, its
	// factor is 1.
	nu := newFleetLimits()
	held := map[string]float64{}
	check := func(when string) {
		t.Helper()
		sum := 0.0
		for _, h := range held {
			sum += h
		}
		if sum > 1200+1e-9 {
			t.Fatalf("%s: grants in force add up to %v: %v", when, sum, held)
		}
	}
	// Two workers under the old leader, which cut the limit to 70%.
	for range 3 {
		for _, w := range []string{"w1", "w2"} {
			old.observe(w, limitReport(held[w], 0), now)
			held[w] = old.grant(w, limitReport(held[w], 0), now, ttl, heard)[0].Share.RPM
		}
		now = now.Add(100 * time.Millisecond)
	}
	old.observe("w1", limitReport(held["w1"], 1), now)
	for range 3 {
		for _, w := range []string{"w1", "w2"} {
			thr := int64(0)
			if w == "w1" {
				thr = 1
			}
			old.observe(w, limitReport(held[w], thr), now)
			held[w] = old.grant(w, limitReport(held[w], thr), now, ttl, heard)[0].Share.RPM
		}
		now = now.Add(100 * time.Millisecond)
	}
	if cut := 1200 * ratelimit.Decrease; held["w1"]+held["w2"] > cut+1e-9 {
		t.Fatalf("old leader after a 429: %v, want at most %v", held, cut)
	}
	// A third worker joins; the old leader answers its first heartbeat
	// and dies. The new leader never heard it.
	old.observe("w3", limitReport(0, 0), now)
	held["w3"] = old.grant("w3", limitReport(0, 0), now, ttl, heard)[0].Share.RPM
	check("old leader's last answer")

	nu.lead(now)
	since := now // the new leader listens from its start
	beat := func(w string) {
		thr := int64(0)
		if w == "w1" {
			thr = 1
		}
		nu.observe(w, limitReport(held[w], thr), now)
		g := nu.grant(w, limitReport(held[w], thr), now, ttl, since)
		if len(g) != 1 {
			t.Fatalf("%s: grants %+v", w, g)
		}
		if g[0].Share.RPM > held[w]+1e-9 && now.Sub(since) < ttl {
			t.Fatalf("%s: grown from %v to %v before the new leader knew the grants outstanding", w, held[w], g[0].Share.RPM)
		}
		held[w] = g[0].Share.RPM
		check("new leader, " + w)
	}
	for range 30 {
		for _, w := range []string{"w1", "w2", "w3"} {
			beat(w)
		}
		now = now.Add(100 * time.Millisecond)
	}
	// Settled: equal shares of the factor the old grants showed, not of
	// the declared 1200.
	st := (&Node{limits: nu}).LimitStates()
	if len(st) != 1 || st[0].Factor > ratelimit.Decrease+1e-9 {
		t.Fatalf("new leader's factor %+v, want at most %v (what the fleet ran at)", st, ratelimit.Decrease)
	}
	want := 1200 * st[0].Factor / 3
	for w, h := range held {
		if math.Abs(h-want) > 1e-6 {
			t.Fatalf("settled shares %v (%s), want %v each", held, w, want)
		}
	}
}

// TestFleetLimits_ConcurrencyGoesRound: concurrent_requests 2 among four
// workers: never more than 2 slots held together, and within a few
// rotation periods every worker has held one.
func TestFleetLimits_ConcurrencyGoesRound(t *testing.T) {
	f := newFleetLimits()
	ttl := time.Second
	now := time.Unix(1000, 0)
	held := map[string]int{}
	had := map[string]bool{}
	rep := func(w string) []api.LimitReport {
		return []api.LimitReport{{Endpoint: "openai http://x fake", Concurrent: 2, Held: api.LimitShare{Concurrent: held[w]}}}
	}
	for range 100 {
		for _, w := range []string{"w1", "w2", "w3", "w4"} {
			f.observe(w, rep(w), now)
			g := f.grant(w, rep(w), now, ttl, time.Time{})
			held[w] = g[0].Share.Concurrent
			if held[w] > 0 {
				had[w] = true
			}
			if sum := held["w1"] + held["w2"] + held["w3"] + held["w4"]; sum > 2 {
				t.Fatalf("slots held %v", held)
			}
		}
		now = now.Add(100 * time.Millisecond)
	}
	if len(had) != 4 {
		t.Fatalf("in %d rotation periods only %v held a slot", 100/(10*RotatePeriods), had)
	}
}

// TestFleetLimits_SharesFollowDemand: of two workers sharing 1200/min
// and 2 concurrent calls, one goes idle: within two of its heartbeats its
// share is given back and the busy one holds the whole limit, and the
// answers that leave it short say More (it asks again at once). When the
// idle one has callers again, it gets its half back. The grants never
// add up past the limit.
func TestFleetLimits_SharesFollowDemand(t *testing.T) {
	f := newFleetLimits()
	ttl := 5 * time.Second
	now := time.Unix(1000, 0)
	held := map[string]api.LimitShare{}
	demand := map[string]int64{"w1": 4, "w2": 4}
	beat := func(w string) api.LimitGrant {
		rep := []api.LimitReport{{Endpoint: "openai http://x fake", RPM: 1200, Concurrent: 2, Held: held[w],
			Demand: demand[w], Idle: demand[w] == 0}}
		f.observe(w, rep, now)
		g := f.grant(w, rep, now, ttl, time.Time{})
		held[w] = g[0].Share
		if sum := held["w1"].RPM + held["w2"].RPM; sum > 1200+1e-9 {
			t.Fatalf("after %s: rpm grants %v", w, held)
		}
		if sum := held["w1"].Concurrent + held["w2"].Concurrent; sum > 2 {
			t.Fatalf("after %s: slots %v", w, held)
		}
		return g[0]
	}
	for range 3 {
		beat("w1")
		beat("w2")
		now = now.Add(time.Second)
	}
	if held["w1"].RPM != 600 || held["w2"].RPM != 600 || held["w1"].Concurrent != 1 {
		t.Fatalf("both busy: %v", held)
	}
	demand["w2"] = 0
	var more bool
	beats := 0
	for ; held["w1"].RPM != 1200 || held["w1"].Concurrent != 2; beats++ {
		if beats > 4 {
			t.Fatalf("after %d rounds w1 holds %+v, w2 %+v", beats, held["w1"], held["w2"])
		}
		beat("w2")
		if g := beat("w1"); beats == 0 {
			more = g.More
		}
		now = now.Add(time.Second)
	}
	// w2's first idle heartbeat is answered 0, its next reports it gave
	// the share back, and w1's next (asked at once: More) gets it all.
	if beats != 2 || !more {
		t.Fatalf("w1 got the whole limit after %d rounds (first answer's More %v)", beats, more)
	}
	if held["w2"].RPM != 0 || held["w2"].Concurrent != 0 {
		t.Fatalf("idle w2 holds %+v", held["w2"])
	}
	demand["w2"] = 1
	for beats = 0; held["w2"].RPM != 600 || held["w2"].Concurrent != 1; beats++ {
		if beats > 4 {
			t.Fatalf("after %d rounds w2 holds %+v", beats, held["w2"])
		}
		beat("w2")
		beat("w1")
		beat("w2")
		now = now.Add(time.Second)
	}
	states := f.states()
	if len(states) != 1 || states[0].Active != 2 || states[0].Demand != 5 {
		t.Fatalf("states %+v", states)
	}
}
