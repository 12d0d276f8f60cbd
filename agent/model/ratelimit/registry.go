package ratelimit

import (
	"sort"
	"strconv"
	"strings"
	"sync"
)

// EndpointKey identifies the endpoint a limit belongs to: the provider,
// its base URL (empty for an in-process provider) and the model. The
// model is part of it because providers limit per model: OpenAI's and
// Gemini's published limits are per (project, model), so two models at
// one base URL have separate budgets, and a rate_limit is the figure of
// one model's tier. The API key (the account) is not part of it: a key
// is a secret and never goes into a label, and two accounts on one
// endpoint and model sharing one limiter is only conservative.
func EndpointKey(provider, baseURL, model string) string {
	if model == provider {
		model = "" // an in-process provider names no model of its own
	}
	parts := make([]string, 0, 3)
	for _, p := range []string{provider, baseURL, model} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " ")
}

// Registry holds a process's limiters, one per endpoint (EndpointKey),
// shared by everything in the process that calls the endpoint: agents,
// LLM judges, LLM user simulators. Two callers declaring different limits
// for one endpoint is a ConflictError naming both. It is safe for
// concurrent use.
type Registry struct {
	mu      sync.Mutex
	managed bool
	notify  func()
	m       map[string]*registered
}

type registered struct {
	l      *Limiter
	source string // who declared the limit first
}

// NewRegistry returns an empty registry of local limiters.
func NewRegistry() *Registry { return &Registry{m: map[string]*registered{}} }

// ConflictError is a limit for an endpoint that differs from the one
// another source declared for it in the same process.
type ConflictError struct {
	Endpoint            string
	Source, OtherSource string
	Spec, OtherSpec     Spec
}

// Error names both sources first: callers that bound an error's detail
// (the eval engine keeps 128 bytes) still name both.
func (e *ConflictError) Error() string {
	return "rate_limit in " + e.Source + " differs from " + e.OtherSource + " (" + e.Spec.String() + " vs " + e.OtherSpec.String() +
		") for endpoint " + e.Endpoint + ": an endpoint has one limit per process"
}

// String is the spec's keys, for messages.
func (s Spec) String() string {
	var parts []string
	add := func(k string, v int64) {
		if v > 0 {
			parts = append(parts, k+"="+strconv.FormatInt(v, 10))
		}
	}
	add("requests_per_minute", s.RequestsPerMinute)
	add("tokens_per_minute", s.TokensPerMinute)
	add("concurrent_requests", s.ConcurrentRequests)
	return strings.Join(parts, " ")
}

// Manage switches every limiter of the registry, present and future, to
// managed mode (Limiter.Manage): a worker, whose limits are the
// coordinator leader's grants.
func (r *Registry) Manage() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.managed = true
	for _, e := range r.m {
		e.l.Manage()
	}
}

// SetNotify sets every limiter's notify function, present and future
// (Limiter.SetNotify): a worker's "heartbeat now".
func (r *Registry) SetNotify(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notify = f
	for _, e := range r.m {
		e.l.SetNotify(f)
	}
}

// Limiter returns endpoint's limiter, making it for spec on first use.
// source names the declaration for errors (an AGENT.json agent, a judge
// config); a spec differing from the first declaration is a
// *ConflictError.
func (r *Registry) Limiter(endpoint string, spec Spec, source string) (*Limiter, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[endpoint]; ok {
		if e.l.Spec() != spec {
			return nil, &ConflictError{Endpoint: endpoint, Source: source, OtherSource: e.source, Spec: spec, OtherSpec: e.l.Spec()}
		}
		return e.l, nil
	}
	l := New(endpoint, spec)
	if r.managed {
		l.Manage()
	}
	if r.notify != nil {
		l.SetNotify(r.notify)
	}
	r.m[endpoint] = &registered{l: l, source: source}
	return l, nil
}

// Limiters returns the registry's limiters, sorted by endpoint.
func (r *Registry) Limiters() []*Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Limiter, 0, len(r.m))
	for _, e := range r.m {
		out = append(out, e.l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Endpoint() < out[j].Endpoint() })
	return out
}
