package coordinator

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/nats-io/nats.go"
)

// liveness is what this node has heard from workers and owners, by its
// own clock. Every coordinator keeps it (heartbeats are core NATS
// messages every node receives) so a new leader starts with a warm view;
// only the leader acts on it, and only through Raft.
type liveness struct {
	mu      sync.Mutex
	workers map[string]workerSeen
	owners  map[string]time.Time

	ownersSwept   time.Time
	ownersDropped atomic.Int64 // renewals refused: too many owners

	queueScans atomic.Int64 // worker queues scanned by the leader
}

type workerSeen struct {
	at time.Time
	hb api.Heartbeat
}

func newLiveness() *liveness {
	return &liveness{workers: map[string]workerSeen{}, owners: map[string]time.Time{}}
}

func (l *liveness) worker(id string) (workerSeen, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.workers[id]
	return w, ok
}

func (l *liveness) owner(id string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.owners[id]
	return t, ok
}

// onHeartbeat records a worker heartbeat; the leader answers it with the
// tasks the worker must kill. The worker id is the subject token, which
// NATS permissions tie to the worker's credentials.
func (n *Node) onHeartbeat(m *nats.Msg) {
	id := strings.TrimPrefix(m.Subject, bus.HeartbeatSubjectPrefix)
	if !n.allow[id] {
		return // not allowlisted: never answered, never dispatched to
	}
	var hb api.Heartbeat
	if err := wire.Decode(m.Data, api.SmallLimits, api.KindHeartbeat, &hb); err != nil || hb.Worker != id || len(hb.Agents) > api.MaxHeartbeatAgents || !validLimitReports(hb.Limits) {
		return
	}
	now := time.Now()
	n.live.mu.Lock()
	n.live.workers[id] = workerSeen{at: now, hb: hb}
	n.live.mu.Unlock()
	n.limits.observe(id, hb.Limits, now)
	if !n.leading.Load() || m.Reply == "" {
		return
	}
	rep := api.HeartbeatReply{Leader: n.cfg.ID, WorkerTTLMS: n.cfg.Timing.WorkerTTL.Milliseconds(),
		Grants: n.limits.grant(id, hb.Limits, now, n.cfg.Timing.WorkerTTL)}
	for _, ref := range hb.Running {
		w, epoch, err := n.fsm.inflight.assignedTo(n.store, ref)
		if err != nil {
			return // no answer: the worker keeps its tasks until the next one
		}
		// Another worker's, decided, or addressed to another incarnation.
		if w != id || epoch != 0 && hb.Epoch != 0 && epoch != hb.Epoch {
			rep.Kill = append(rep.Kill, ref)
		}
	}
	if b, err := wire.Encode(api.KindHBReply, &rep); err == nil {
		_ = m.Respond(b)
	}
}

func (n *Node) onOwnerRenew(m *nats.Msg) {
	id := strings.TrimPrefix(m.Subject, bus.OwnerSubjectPrefix)
	if bus.ValidToken(id) != nil {
		return
	}
	n.live.renewOwner(id, time.Now())
}

// Owner renewals are kept for api.MaxOwnerTTL (no job's owner can matter
// longer), swept at most once a minute, and at most maxOwners of them:
// past that, renewals of unknown owners are dropped (their jobs, if any,
// are cancelled as the owner-lost rule says).
const (
	maxOwners       = 100_000
	ownerSweepEvery = time.Minute
)

func (l *liveness) renewOwner(id string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.ownersSwept) > ownerSweepEvery || len(l.owners) >= maxOwners {
		l.ownersSwept = now
		for o, at := range l.owners {
			if now.Sub(at) > api.MaxOwnerTTL {
				delete(l.owners, o)
			}
		}
	}
	if _, ok := l.owners[id]; !ok && len(l.owners) >= maxOwners {
		l.ownersDropped.Add(1)
		return
	}
	l.owners[id] = now
}

// states describes the workers of ids this node has heard from, in the
// order of ids.
func (l *liveness) states(ids []string, now time.Time) []api.WorkerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]api.WorkerState, 0, len(ids))
	for _, id := range ids {
		w, ok := l.workers[id]
		if !ok {
			continue
		}
		out = append(out, api.WorkerState{ID: id, Capacity: w.hb.Capacity, Running: len(w.hb.Running), SeenAgoMS: now.Sub(w.at).Milliseconds(), Agents: w.hb.Agents})
	}
	return out
}

// liveAgents returns the agents offered by the allowlisted workers heard
// from within the worker TTL, sorted and unique.
func (n *Node) liveAgents(now time.Time) []string {
	ttl := n.cfg.Timing.WorkerTTL
	seen := map[string]bool{}
	n.live.mu.Lock()
	for id, w := range n.live.workers {
		if !n.allow[id] || now.Sub(w.at) > ttl {
			continue
		}
		for _, a := range w.hb.Agents {
			seen[a] = true
		}
	}
	n.live.mu.Unlock()
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
