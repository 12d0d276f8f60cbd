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
// every heartbeat, so a new leader starts with the holders, what they
// hold and their throttle counts; only the leader grants. Nothing of it
// goes through Raft: a grant is a lease that lapses with the worker's
// heartbeat, and a new leader rebuilds the split from the next round of
// heartbeats (its AIMD starts at the declared limits).
type fleetLimits struct {
	mu     sync.Mutex
	limits map[limitKey]*fleetLimit
}

type limitKey struct{ agent, endpoint string }

type fleetLimit struct {
	aimd       ratelimit.AIMD
	pauseUntil time.Time
	holders    map[string]*limitHolder
	cuts       int64
}

type limitHolder struct {
	spec      ratelimit.Spec
	held      ratelimit.Limits // what the worker reported holding
	sent      ratelimit.Limits // what this node granted it last
	sentAt    time.Time
	throttled int64 // the worker's 429 count at its last heartbeat
	seen      time.Time
}

func newFleetLimits() *fleetLimits { return &fleetLimits{limits: map[limitKey]*fleetLimit{}} }

// validLimitReports bounds a heartbeat's limit reports.
func validLimitReports(rs []api.LimitReport) bool {
	if len(rs) > api.MaxHeartbeatLimits {
		return false
	}
	for _, r := range rs {
		if len(r.Endpoint) > api.MaxLimitEndpointBytes || len(r.Agent) > api.MaxLimitEndpointBytes ||
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
	}
}

// grant answers worker's limit reports with its shares: each limit (the
// smallest declared by its live holders, scaled by the fleet's AIMD) split
// equally among the holders heard within ttl, less what the others still
// hold (ratelimit.Share), so the grants outstanding never add up past
// the limit while shares move.
func (f *fleetLimits) grant(worker string, reports []api.LimitReport, now time.Time, ttl time.Duration) []api.LimitGrant {
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
		for id, h := range fl.holders {
			if now.Sub(h.seen) > ttl {
				if now.Sub(h.seen) > 10*ttl {
					delete(fl.holders, id)
				}
				continue
			}
			ids = append(ids, id)
			d := h.spec.Limits()
			total = ratelimit.Limits{RPM: min(total.RPM, d.RPM), TPM: min(total.TPM, d.TPM), Concurrent: min(total.Concurrent, d.Concurrent)}
		}
		sort.Strings(ids)
		fl.aimd.Tick(now)
		eff := total.Scale(fl.aimd.Factor())
		var others ratelimit.Limits
		rank := 0
		for i, id := range ids {
			if id == worker {
				rank = i
				continue
			}
			h := fl.holders[id]
			held := h.held
			if now.Sub(h.sentAt) <= ttl {
				held = maxLimits(held, h.sent)
			}
			others = others.Add(held)
		}
		g := ratelimit.Share(eff, len(ids), rank, others)
		h := fl.holders[worker]
		h.sent, h.sentAt = g, now
		lg := api.LimitGrant{Agent: r.Agent, Endpoint: r.Endpoint, Share: toShare(g)}
		if now.Before(fl.pauseUntil) {
			lg.PauseMS = max(1, fl.pauseUntil.Sub(now).Milliseconds())
		}
		out = append(out, lg)
	}
	return out
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
}

// LimitStates lists the fleet rate limits this node knows, sorted.
func (n *Node) LimitStates() []LimitState {
	f := n.limits
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]LimitState, 0, len(f.limits))
	for k, fl := range f.limits {
		out = append(out, LimitState{Agent: k.agent, Endpoint: k.endpoint, Factor: fl.aimd.Factor(), Cuts: fl.cuts, Holders: len(fl.holders)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Agent != out[j].Agent {
			return out[i].Agent < out[j].Agent
		}
		return out[i].Endpoint < out[j].Endpoint
	})
	return out
}
