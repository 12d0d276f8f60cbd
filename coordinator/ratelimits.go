package coordinator

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/fadcedab/adk/agent/model/ratelimit"
	"github.com/fadcedab/adk/coordinator/api"
)

// fleetLimits splits the provider rate limits the workers' agents declare
// among the workers that declare them, and runs one AIMD per limit for
// the whole fleet (DESIGN.md "Fleet rate limits"). Every node observes
// every heartbeat and runs the AIMD from them, so a new leader starts
// with the holders, what they hold, their throttle counts and the
// fleet's factor; only the leader grants. Nothing of it goes through
// Raft: a grant is a lease that lapses with the worker's heartbeat. A new
// leader grants nobody more than it holds until it knows every grant
// outstanding (leadershipSettled), then resumes from the factor the
// outstanding grants show.
type fleetLimits struct {
	mu     sync.Mutex
	limits map[limitKey]*fleetLimit
	// leaderSince is when this node began leading (zero: not leading, or
	// a test driving grant directly, which is settled at once).
	leaderSince time.Time
}

type limitKey struct{ agent, endpoint string }

type fleetLimit struct {
	aimd       ratelimit.AIMD
	pauseUntil time.Time
	holders    map[string]*limitHolder
	cuts       int64
	// resumed: this leadership took over the factor of the grants it
	// found outstanding (once per leadership).
	resumed time.Time
}

type limitHolder struct {
	spec      ratelimit.Spec
	held      ratelimit.Limits // what the worker reported holding
	sent      ratelimit.Limits // what this node granted it last
	sentAt    time.Time
	throttled int64 // the worker's 429 count at its last heartbeat
	seen      time.Time
	demand    int // ratelimit.Allot's: 0 idle, UnknownDemand (an earlier build)
}

func newFleetLimits() *fleetLimits { return &fleetLimits{limits: map[limitKey]*fleetLimit{}} }

// lead records that this node leads from at (zero: it no longer leads).
func (f *fleetLimits) lead(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaderSince = at
}

// RotatePeriods is how many worker TTLs a concurrency slot that does not
// divide evenly among the workers with demand stays with one before it
// moves on (with concurrent_requests 2 and 4 busy workers, two of them
// hold a slot at a time): often enough that no worker's tasks starve,
// rarely enough that the slot's hand-over (its holder reports it free)
// costs little. A worker with nothing waiting gives its slot back at
// once (ratelimit.Allot), whatever the rotation.
const RotatePeriods = 2

// validLimitReports bounds a heartbeat's limit reports.
func validLimitReports(rs []api.LimitReport) bool {
	if len(rs) > api.MaxHeartbeatLimits {
		return false
	}
	for _, r := range rs {
		if len(r.Endpoint) > api.MaxLimitEndpointBytes || len(r.Agent) > api.MaxLimitEndpointBytes ||
			r.Demand < 0 || r.Demand > api.MaxLimitDemand ||
			(ratelimit.Spec{RequestsPerMinute: r.RPM, TokensPerMinute: r.TPM, ConcurrentRequests: r.Concurrent}).Validate() != nil {
			return false
		}
	}
	return true
}

func toLimits(s api.LimitShare) ratelimit.Limits {
	return ratelimit.Limits{RPM: s.RPM, TPM: s.TPM, Concurrent: s.Concurrent}
}

func toShare(l ratelimit.Limits) api.LimitShare {
	return api.LimitShare{RPM: l.RPM, TPM: l.TPM, Concurrent: l.Concurrent}
}

// observe records a heartbeat's limit reports: a grown throttle count is
// a 429 somewhere in the fleet, which cuts the limit for everyone (at most
// once per ratelimit.Cooldown) and pauses it for the Retry-After.
func (f *fleetLimits) observe(worker string, reports []api.LimitReport, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range reports {
		k := limitKey{r.Agent, r.Endpoint}
		fl := f.limits[k]
		if fl == nil {
			fl = &fleetLimit{aimd: ratelimit.NewAIMD(), holders: map[string]*limitHolder{}}
			f.limits[k] = fl
		}
		h := fl.holders[worker]
		if h == nil {
			// The first report is the baseline: 429s before this node
			// heard of the worker were answered by another leader.
			h = &limitHolder{throttled: r.Throttled}
			fl.holders[worker] = h
		}
		h.spec = ratelimit.Spec{RequestsPerMinute: r.RPM, TokensPerMinute: r.TPM, ConcurrentRequests: r.Concurrent}
		h.held, h.seen = toLimits(r.Held), now
		switch {
		case r.Idle:
			h.demand = 0
		case r.Demand > 0:
			h.demand = int(r.Demand)
		default:
			h.demand = ratelimit.UnknownDemand
		}
		if r.Throttled > h.throttled || r.Throttled < h.throttled && r.Throttled > 0 {
			if fl.aimd.Throttled(now) {
				fl.cuts++
			}
			pause := ratelimit.DefaultPause
			if r.RetryAfterMS > 0 {
				pause = min(time.Duration(r.RetryAfterMS)*time.Millisecond, ratelimit.MaxPause)
			}
			if until := now.Add(pause); until.After(fl.pauseUntil) {
				fl.pauseUntil = until
			}
		}
		h.throttled = r.Throttled
		// Every node grows the factor as the leader does, from the same
		// heartbeats: a follower that takes over starts where the fleet
		// runs, not at the declared limit.
		fl.aimd.Tick(now)
	}
}

// grant answers worker's limit reports with its shares: each limit (the
// smallest declared by its live holders, scaled by the fleet's AIMD) split
// among the holders heard within ttl as their demand says (ratelimit.Allot:
// nothing to an idle one while others wait, concurrency up to each one's
// callers, the rate among those with a slot), less what the others still
// hold, so the grants outstanding never add up past the limit while
// shares move. heardSince is since when this node has
// heard heartbeats without a break (zero: not now).
//
// A new leader does not know what its predecessor granted in answer to
// the heartbeats it heard before it led. Until every live holder has
// reported since this node leads (its report is then the grant in force,
// and later grants are this node's), and this node has listened for a
// whole ttl (so no holder it never heard can hold a live grant), it grants
// nobody more than it reports holding: the old grants, which together fit
// the limit, are renewed or shrunk, never grown. Then it takes the
// fleet's factor from the grants outstanding (the lower of its own and
// theirs), so a failover during throttling does not reset the limit to
// the declared maximum and bring the 429s back.
func (f *fleetLimits) grant(worker string, reports []api.LimitReport, now time.Time, ttl time.Duration, heardSince time.Time) []api.LimitGrant {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]api.LimitGrant, 0, len(reports))
	for _, r := range reports {
		k := limitKey{r.Agent, r.Endpoint}
		fl := f.limits[k]
		if fl == nil || fl.holders[worker] == nil {
			continue
		}
		var ids []string
		total := ratelimit.Limits{RPM: math.Inf(1), TPM: math.Inf(1), Concurrent: ratelimit.UnlimitedConcurrent}
		settled := f.leaderSince.IsZero() || !heardSince.IsZero() && now.Sub(heardSince) >= ttl
		for id, h := range fl.holders {
			if now.Sub(h.seen) > ttl {
				if now.Sub(h.seen) > 10*ttl {
					delete(fl.holders, id)
				}
				continue
			}
			ids = append(ids, id)
			if h.seen.Before(f.leaderSince) {
				settled = false // its last grant may be the old leader's
			}
			d := h.spec.Limits()
			total = ratelimit.Limits{RPM: min(total.RPM, d.RPM), TPM: min(total.TPM, d.TPM), Concurrent: min(total.Concurrent, d.Concurrent)}
		}
		sort.Strings(ids)
		fl.aimd.Tick(now)
		if settled && !f.leaderSince.IsZero() && fl.resumed.Before(f.leaderSince) {
			fl.resumed = now
			if held := fl.heldFactor(ids, total); held > 0 && held < fl.aimd.Factor() {
				fl.aimd.Resume(held, now)
			}
		}
		eff := total.Scale(fl.aimd.Factor())
		var others ratelimit.Limits
		self := 0
		demands := make([]int, len(ids))
		for i, id := range ids {
			h := fl.holders[id]
			demands[i] = h.demand
			if id == worker {
				self = i
				continue
			}
			held := h.held
			if now.Sub(h.sentAt) <= ttl {
				held = maxLimits(held, h.sent)
			}
			others = others.Add(held)
		}
		// The concurrency slots that do not divide evenly go round.
		period := int64(max(RotatePeriods*ttl, time.Millisecond))
		turn := int(now.UnixNano() / period % int64(max(1, len(ids))))
		g := ratelimit.Allot(eff, demands, self, turn, others)
		h := fl.holders[worker]
		// Less than its due while others give theirs back: it asks again
		// soon (a new leader grows nobody before it settles: no asking).
		due := ratelimit.Allot(eff, demands, self, turn, ratelimit.Limits{})
		more := settled && (g.RPM < due.RPM || g.TPM < due.TPM || g.Concurrent < due.Concurrent)
		if !settled {
			g = minLimits(g, h.held)
		}
		h.sent, h.sentAt = g, now
		lg := api.LimitGrant{Agent: r.Agent, Endpoint: r.Endpoint, Share: toShare(g), More: more}
		if now.Before(fl.pauseUntil) {
			lg.PauseMS = max(1, fl.pauseUntil.Sub(now).Milliseconds())
		}
		out = append(out, lg)
	}
	return out
}

// heldFactor is the fraction of the declared limit total the live holders
// ids report holding (0: they hold nothing, e.g. a fleet starting): of the
// per-minute limits if any is declared, else of concurrency.
func (fl *fleetLimit) heldFactor(ids []string, total ratelimit.Limits) float64 {
	var sum ratelimit.Limits
	for _, id := range ids {
		sum = sum.Add(fl.holders[id].held)
	}
	f := math.Inf(1)
	if !math.IsInf(total.RPM, 1) {
		f = sum.RPM / total.RPM
	}
	if !math.IsInf(total.TPM, 1) {
		f = min(f, sum.TPM/total.TPM)
	}
	if math.IsInf(f, 1) && total.Concurrent != ratelimit.UnlimitedConcurrent {
		f = float64(sum.Concurrent) / float64(total.Concurrent)
	}
	if math.IsInf(f, 1) || f <= 0 {
		return 0
	}
	return min(1, f)
}

func minLimits(a, b ratelimit.Limits) ratelimit.Limits {
	return ratelimit.Limits{RPM: min(a.RPM, b.RPM), TPM: min(a.TPM, b.TPM), Concurrent: min(a.Concurrent, b.Concurrent)}
}

func maxLimits(a, b ratelimit.Limits) ratelimit.Limits {
	return ratelimit.Limits{RPM: max(a.RPM, b.RPM), TPM: max(a.TPM, b.TPM), Concurrent: max(a.Concurrent, b.Concurrent)}
}

// LimitState is the leader's view of one fleet rate limit (metrics).
type LimitState struct {
	Agent, Endpoint string
	// Factor is the AIMD fraction of the declared limit in force, Cuts
	// how often 429s cut it, Holders the workers sharing it.
	Factor  float64
	Cuts    int64
	Holders int
	// Demand is the callers (waiting or in flight) the holders reported
	// at their last heartbeats (earlier builds report none), Active the
	// holders with any.
	Demand, Active int
}

// LimitStates lists the fleet rate limits this node knows, sorted.
func (n *Node) LimitStates() []LimitState { return n.limits.states() }

func (f *fleetLimits) states() []LimitState {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]LimitState, 0, len(f.limits))
	for k, fl := range f.limits {
		st := LimitState{Agent: k.agent, Endpoint: k.endpoint, Factor: fl.aimd.Factor(), Cuts: fl.cuts, Holders: len(fl.holders)}
		for _, h := range fl.holders {
			if h.demand != 0 {
				st.Active++
				st.Demand += max(0, h.demand)
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Agent != out[j].Agent {
			return out[i].Agent < out[j].Agent
		}
		return out[i].Endpoint < out[j].Endpoint
	})
	return out
}
