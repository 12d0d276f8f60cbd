package worker

import (
	"errors"
	"fmt"
	"github.com/fadcedab/adk/observability"
	"sort"

	"github.com/fadcedab/adk/agent"
	"github.com/fadcedab/adk/bus"
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
// only names an agent.
func loadAgentFiles(files map[string]string, obs observability.Observer) (map[string]trustedAgent, error) {
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
		cfg, err := agent.LoadConfig(path)
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
func trustedAgents(cfg Config, tracer *observability.Tracer) (map[string]trustedAgent, error) {
	var obs observability.Observer // nil: the runtime's Nop (a nil *Tracer is not nil)
	if tracer != nil {
		obs = tracer
	}
	out, err := loadAgentFiles(cfg.AgentFiles, obs)
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
