package coordinator

import (
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
		g := f.grant(w, limitReport(held[w], 0), now, ttl)
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
	g := f.grant("w1", limitReport(0, 0), now, ttl)
	if g[0].Share.RPM != 600 || g[0].PauseMS != 0 {
		t.Fatalf("before: %+v", g)
	}
	r := limitReport(600, 3)
	r[0].RetryAfterMS = 1500
	f.observe("w1", r, now)
	f.observe("w2", limitReport(600, 2), now)
	// The first grants after the cut respect what the other still holds;
	// a round later both run at half the cut limit.
	g1 := f.grant("w1", limitReport(600, 3), now, ttl)
	g2 := f.grant("w2", limitReport(600, 2), now, ttl)
	want := 1200 * ratelimit.Decrease / 2
	if g1[0].Share.RPM > want || g2[0].Share.RPM > want || g1[0].PauseMS != 1500 || g2[0].PauseMS != 1500 {
		t.Fatalf("after 429s from both: %+v %+v, want at most %v and a 1500 ms pause", g1, g2, want)
	}
	now = now.Add(time.Second)
	f.observe("w1", limitReport(g1[0].Share.RPM, 3), now)
	f.observe("w2", limitReport(g2[0].Share.RPM, 2), now)
	g1 = f.grant("w1", limitReport(g1[0].Share.RPM, 3), now, ttl)
	g2 = f.grant("w2", limitReport(g2[0].Share.RPM, 2), now, ttl)
	if g1[0].Share.RPM+g2[0].Share.RPM > 2*want+1e-9 {
		t.Fatalf("second round: %+v %+v", g1, g2)
	}
	now = now.Add(time.Second)
	g1 = f.grant("w1", limitReport(g1[0].Share.RPM, 3), now, ttl)
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
		f.grant("w1", limitReport(600, 3), now, ttl)
	}
	if g := f.grant("w2", limitReport(600, 2), now, ttl); g[0].Share.RPM != 600 {
		t.Fatalf("after quiet: %+v", g)
	}
}
