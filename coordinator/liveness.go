package coordinator

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/store/evalrecord"
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
	// listenFrom is since when this node has been subscribed to owner
	// renewals without a break (zero while its NATS connection is down):
	// an owner silent through all of it is silent, whoever led meanwhile.
	listenFrom time.Time

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

// setListening records that this node's owner subscription is live from
// at (zero: NATS is down).
func (l *liveness) setListening(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listenFrom = at
}

// listening returns since when this node has heard owner renewals without
// a break; zero when it is not connected. connected is the connection's
// state now: a status event the watcher missed cannot leave a connected
// node deaf forever, it only makes it listen from now.
func (l *liveness) listening(now time.Time, connected bool) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !connected:
		return time.Time{}
	case l.listenFrom.IsZero():
		l.listenFrom = now
	}
	return l.listenFrom
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
		Grants: n.limits.grant(id, hb.Limits, now, n.cfg.Timing.WorkerTTL, n.live.listening(now, n.nc.IsConnected()))}
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
	rep.Owners = n.ownersSeen(hb.Running, now)
	if len(hb.Recent) > 0 {
		// The worker stops listing the decided ones: a heartbeat then
		// carries the results still in flight, not every task finished
		// in the last 30 s (up to MaxRecentRefs, decoded by every node).
		rep.RecentChecked = true
		rep.RecentPending = n.fsm.inflight.undecided(hb.Recent)
	}
	if b, err := wire.Encode(api.KindHBReply, &rep); err == nil {
		_ = m.Respond(b)
	}
}

// ownedJob is what a heartbeat answer needs of a running job that has an
// owner (the leader's last tick's view).
type ownedJob struct {
	owner   string
	created time.Time
}

// setOwned records the running owned jobs of the leader's view; nil
// clears it (leadership ended).
func (n *Node) setOwned(active []*evalrecord.Job) {
	if active == nil {
		n.owned.Store(nil)
		return
	}
	m := map[string]ownedJob{}
	for _, j := range active {
		if j.Spec.Owner != "" {
			m[j.JobID] = ownedJob{owner: j.Spec.Owner, created: time.UnixMilli(j.CreatedAt)}
		}
	}
	n.owned.Store(&m)
}

// ownersSeen answers, for the owned jobs among refs, when their owners
// were last known alive (api.HeartbeatReply.Owners).
func (n *Node) ownersSeen(refs []api.TaskRef, now time.Time) []api.OwnerSeen {
	p := n.owned.Load()
	if p == nil || len(*p) == 0 {
		return nil
	}
	var out []api.OwnerSeen
	for _, ref := range refs {
		o, ok := (*p)[ref.JobID]
		if !ok || slices.ContainsFunc(out, func(s api.OwnerSeen) bool { return s.JobID == ref.JobID }) {
			continue
		}
		out = append(out, api.OwnerSeen{JobID: ref.JobID, AgoMS: max(now.Sub(n.ownerAlive(o.owner, o.created)).Milliseconds(), 0)})
	}
	return out
}

// ownerAlive is when this node last knew an owner alive: its last renewal
// heard, or the job's submit (created), whichever is later. Only what was
// heard: unlike the lease (ownerExpired), a gap in listening gives no
// credit.
func (n *Node) ownerAlive(owner string, created time.Time) time.Time {
	if last, ok := n.live.owner(owner); ok && last.After(created) {
		return last
	}
	return created
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
