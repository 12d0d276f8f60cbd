package worker

import (
	"errors"
	"fmt"
	"github.com/fadcedab/adk/observability"
	"sort"
	"time"

	"github.com/fadcedab/adk/agent"
	"github.com/fadcedab/adk/agent/model/ratelimit"
	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/evalengine/agentadapter"
)

// MaxAgentFiles bounds the agents one worker is configured with.
const MaxAgentFiles = 64

// trustedAgent is one agent a worker may run. Agents from AGENT.json files
// come in two flavours, because the default adapter converts runtime
// events only when asked to (its main per-turn cost) and a job's options
// decide whether the result keeps them.
type trustedAgent struct {
	events, plain evalengine.Adapter
}

func (a trustedAgent) adapter(captureEvents bool) evalengine.Adapter {
	if captureEvents {
		return a.events
	}
	return a.plain
}

// loadAgentFiles parses every AGENT.json once (agent.LoadConfig) into the
// default adapter. The files are the worker's own configuration: a job
// only names an agent. Their rate limits come from limits, the worker's
// one registry: agents calling one endpoint share its limiter (and its
// fleet share), and disagreeing limits for it are a configuration error.
func loadAgentFiles(files map[string]string, obs observability.Observer, limits *ratelimit.Registry) (map[string]trustedAgent, error) {
	if len(files) > MaxAgentFiles {
		return nil, fmt.Errorf("worker: %d agent files, at most %d", len(files), MaxAgentFiles)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(map[string]trustedAgent, len(files))
	for _, name := range names {
		if err := bus.ValidToken(name); err != nil {
			return nil, fmt.Errorf("worker: agent name %q: %w", name, err)
		}
		path := files[name]
		if path == "" {
			return nil, fmt.Errorf("worker: agent %s: empty path", name)
		}
		cfg, err := agent.LoadConfigWith(path, agent.ConfigOptions{RateLimits: limits, Source: "worker agent file " + name})
		if err != nil {
			return nil, fmt.Errorf("worker: agent %s: %w", name, err)
		}
		build := agent.BuildOptions{Observer: obs}
		events, err := agentadapter.New(cfg, agentadapter.Options{CaptureEvents: true, Build: build})
		if err != nil {
			return nil, fmt.Errorf("worker: agent %s: %w", name, err)
		}
		plain, err := agentadapter.New(cfg, agentadapter.Options{Build: build})
		if err != nil {
			return nil, fmt.Errorf("worker: agent %s: %w", name, err)
		}
		out[name] = trustedAgent{events: events, plain: plain}
	}
	return out, nil
}

// trustedAgents merges the configured adapters and agent files; a name
// given twice is a configuration error.
func trustedAgents(cfg Config, tracer *observability.Tracer, limits *ratelimit.Registry) (map[string]trustedAgent, error) {
	var obs observability.Observer // nil: the runtime's Nop (a nil *Tracer is not nil)
	if tracer != nil {
		obs = tracer
	}
	out, err := loadAgentFiles(cfg.AgentFiles, obs, limits)
	if err != nil {
		return nil, err
	}
	for name, a := range cfg.Agents {
		if a == nil {
			return nil, fmt.Errorf("worker: agent %s: nil adapter", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("worker: agent %s configured twice", name)
		}
		out[name] = trustedAgent{events: a, plain: a}
	}
	if len(out) == 0 {
		return nil, errNoAgents
	}
	return out, nil
}

var errNoAgents = errors.New("worker: no agents configured")

// limitReports are the heartbeat's rate limit reports, one per endpoint
// (whichever agents call it), in a stable order.
func (w *Worker) limitReports() []api.LimitReport {
	var out []api.LimitReport
	for _, l := range w.limits.Limiters() {
		r := l.Report(w.cfg.HeartbeatInterval)
		out = append(out, api.LimitReport{Endpoint: l.Endpoint(),
			RPM: r.Spec.RequestsPerMinute, TPM: r.Spec.TokensPerMinute, Concurrent: r.Spec.ConcurrentRequests,
			Held:      api.LimitShare{RPM: r.Held.RPM, TPM: r.Held.TPM, Concurrent: r.Held.Concurrent},
			Throttled: r.Throttled, RetryAfterMS: r.RetryAfter.Milliseconds(),
			Demand: int64(r.Demand), Idle: r.Idle})
	}
	return out
}

// applyGrants puts the leader's grants in force until the worker lease
// (ttl, counted from when the heartbeat was sent) runs out.
func (w *Worker) applyGrants(grants []api.LimitGrant, sent time.Time, ttl time.Duration) {
	left := ttl - time.Since(sent)
	if len(grants) == 0 || left <= 0 {
		return
	}
	more := false
	for _, l := range w.limits.Limiters() {
		for _, g := range grants {
			if g.Agent == "" && l.Endpoint() == g.Endpoint {
				l.SetGrant(ratelimit.Limits{RPM: g.Share.RPM, TPM: g.Share.TPM, Concurrent: g.Share.Concurrent},
					time.Duration(g.PauseMS)*time.Millisecond, left)
				more = more || g.More
			}
		}
	}
	if more {
		// The share waits for others to give theirs back: ask again soon.
		w.kickHeartbeat()
	}
}

// RateLimiter returns the limiter the worker's agents call endpoint
// (ratelimit.EndpointKey) through, nil if none declares a limit for it.
func (w *Worker) RateLimiter(endpoint string) *ratelimit.Limiter {
	for _, l := range w.limits.Limiters() {
		if l.Endpoint() == endpoint {
			return l
		}
	}
	return nil
}

// Limits returns the worker's rate limiters' counters, one per endpoint.
func (w *Worker) Limits() []ratelimit.Stats {
	var out []ratelimit.Stats
	for _, l := range w.limits.Limiters() {
		out = append(out, l.Stats())
	}
	return out
}
