package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/model/gemini"
	"github.com/fadcedab/adk/agent/model/openai"
	"github.com/fadcedab/adk/agent/model/ratelimit"
	"github.com/fadcedab/adk/agent/model/scripted"
	"github.com/fadcedab/adk/internal/jsonlimit"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/plugins"
	"github.com/fadcedab/adk/plugins/builtin"
)

// AGENT.json bounds.
const (
	// ConfigSchemaVersion is the AGENT.json schema version this runtime reads.
	ConfigSchemaVersion = 1
	// MaxConfigBytes bounds an AGENT.json file.
	MaxConfigBytes = 1 << 20
	// MaxAgents bounds the agents of one tree.
	MaxAgents = 256
)

// Agent types in AGENT.json ("type"; default "llm").
const (
	TypeLLM        = "llm"
	TypeSequential = WorkflowSequential
	TypeParallel   = WorkflowParallel
)

// AgentSpec is one agent of AGENT.json. The root carries schema_version
// and plugins; sub-agents may omit model (they inherit their parent's).
type AgentSpec struct {
	SchemaVersion int             `json:"schema_version,omitempty"`
	Name          string          `json:"name"`
	Type          string          `json:"type,omitempty"`
	Description   string          `json:"description,omitempty"`
	Instruction   string          `json:"instruction,omitempty"`
	Model         json.RawMessage `json:"model,omitempty"`
	Tools         []ToolSpec      `json:"tools,omitempty"`
	SubAgents     []AgentSpec     `json:"sub_agents,omitempty"`
	Plugins       []PluginSpec    `json:"plugins,omitempty"`
	MaxSteps      int             `json:"max_steps,omitempty"`
	OutputSchema  map[string]any  `json:"output_schema,omitempty"`
	OutputKey     string          `json:"output_key,omitempty"`
}

// ToolSpec declares a tool and its implementation: mock, http, or neither
// (then a Go function of that name must be given in BuildOptions.Funcs).
type ToolSpec struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
	Mock        *MockSpec      `json:"mock,omitempty"`
	HTTP        *HTTPSpec      `json:"http,omitempty"`
}

// PluginSpec is a built-in plugin descriptor in AGENT.json.
type PluginSpec struct {
	ID             string         `json:"id"`
	Plugin         string         `json:"plugin"`
	Mode           string         `json:"mode,omitempty"`
	FailurePolicy  string         `json:"failure_policy,omitempty"`
	TimeoutMS      int            `json:"timeout_ms,omitempty"`
	MaxResultBytes int            `json:"max_result_bytes,omitempty"`
	Config         map[string]any `json:"config,omitempty"`
}

// Config is a parsed and prepared AGENT.json: providers built, schemas
// compiled, tools constructed. Those parts are immutable and shared, so
// Build is cheap and may be called any number of times, concurrently, to
// get fresh runners.
type Config struct {
	Spec     AgentSpec
	root     *preparedAgent
	limiters []*ratelimit.Limiter // one per rate-limited endpoint, by endpoint
}

// Limiters returns the config's rate limiters, one per provider endpoint
// a model block declared a rate_limit for, sorted by endpoint. Every
// model call of every runner built from the config to that endpoint goes
// through it (a worker switches them to fleet grants, Limiter.Manage).
func (c *Config) Limiters() []*ratelimit.Limiter { return c.limiters }

type preparedAgent struct {
	spec         *AgentSpec
	provider     model.Provider
	modelName    string
	rateLimit    *ratelimit.Spec // the model block's rate_limit, if any
	tools        []Tool
	funcTools    []funcToolSpec // declared tools bound to BuildOptions.Funcs
	outputSchema *Schema
	subs         []*preparedAgent
}

type funcToolSpec struct {
	spec   ToolSpec
	schema *Schema
}

// configTool is a tool built from AGENT.json with its compiled schema.
type configTool struct {
	Tool
	schema *Schema
}

func (t configTool) paramSchema() *Schema { return t.schema }

// ConfigOptions are how a process prepares its agent configs.
type ConfigOptions struct {
	// RateLimits is the process's limiter registry: every endpoint limit
	// the config declares is taken from it, so the agents, judges and
	// simulators of one process that call one endpoint share one limiter
	// (a different limit declared elsewhere for the endpoint is refused,
	// naming both). nil: a registry of the config's own.
	RateLimits *ratelimit.Registry
	// Source names the config in a rate-limit conflict (e.g. the file);
	// the agent's name is added.
	Source string
}

// LoadConfig reads and prepares an AGENT.json file; files over
// MaxConfigBytes are refused.
func LoadConfig(path string) (*Config, error) { return LoadConfigWith(path, ConfigOptions{}) }

// LoadConfigWith is LoadConfig with options.
func LoadConfigWith(path string, o ConfigOptions) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load agent config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load agent config: %w", err)
	}
	return ParseConfigWith(data, o)
}

// ParseConfig decodes (bounded; unknown keys are errors) and prepares an
// AGENT.json document.
func ParseConfig(data []byte) (*Config, error) { return ParseConfigWith(data, ConfigOptions{}) }

// ParseConfigWith is ParseConfig with options.
func ParseConfigWith(data []byte, o ConfigOptions) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, &Error{Code: CodeConfigTooLarge, Detail: fmt.Sprintf("over %d bytes", MaxConfigBytes)}
	}
	var spec AgentSpec
	if err := jsonlimit.Unmarshal(data, jsonlimit.DefaultLimits(), &spec); err != nil {
		return nil, &Error{Code: CodeInvalidAgentConfig, Err: err}
	}
	return PrepareConfigWith(spec, o)
}

// PrepareConfig validates spec and prepares it (providers, schemas, tools).
func PrepareConfig(spec AgentSpec) (*Config, error) { return PrepareConfigWith(spec, ConfigOptions{}) }

// PrepareConfigWith is PrepareConfig with options.
func PrepareConfigWith(spec AgentSpec, o ConfigOptions) (*Config, error) {
	if spec.SchemaVersion != ConfigSchemaVersion {
		return nil, &Error{Code: CodeUnsupportedSchemaVer, Detail: fmt.Sprintf("schema_version %d, want %d", spec.SchemaVersion, ConfigSchemaVersion)}
	}
	count := 0
	root, err := prepareAgent(&spec, nil, true, &count)
	if err != nil {
		return nil, err
	}
	limiters, err := limitEndpoints(root, o)
	if err != nil {
		return nil, err
	}
	return &Config{Spec: spec, root: root, limiters: limiters}, nil
}

func prepareAgent(s *AgentSpec, parent *preparedAgent, isRoot bool, count *int) (*preparedAgent, error) {
	*count++
	if *count > MaxAgents {
		return nil, configErr("more than %d agents", MaxAgents)
	}
	if s.Name == "" {
		return nil, configErr("agent name is required")
	}
	if !isRoot && (s.SchemaVersion != 0 || len(s.Plugins) > 0) {
		return nil, configErr("agent %q: schema_version and plugins belong to the root agent only", s.Name)
	}
	p := &preparedAgent{spec: s}
	switch s.Type {
	case "", TypeLLM:
		if err := prepareLLM(s, p, parent); err != nil {
			return nil, err
		}
	case TypeSequential, TypeParallel:
		if len(s.Model) > 0 || len(s.Tools) > 0 || s.Instruction != "" || s.MaxSteps != 0 || s.OutputSchema != nil || s.OutputKey != "" {
			return nil, configErr("workflow agent %q takes only name, type, description and sub_agents", s.Name)
		}
		if len(s.SubAgents) == 0 {
			return nil, configErr("workflow agent %q has no sub_agents", s.Name)
		}
		// Nodes inherit the nearest model above them.
		p.provider, p.modelName = nil, ""
		if parent != nil {
			p.provider, p.modelName = parent.provider, parent.modelName
		}
	default:
		return nil, configErr("agent %q: unknown type %q", s.Name, s.Type)
	}
	for i := range s.SubAgents {
		sub, err := prepareAgent(&s.SubAgents[i], p, false, count)
		if err != nil {
			return nil, err
		}
		p.subs = append(p.subs, sub)
	}
	return p, nil
}

func prepareLLM(s *AgentSpec, p *preparedAgent, parent *preparedAgent) error {
	if len(s.Model) == 0 {
		if parent == nil || parent.provider == nil {
			return configErr("agent %q has no model", s.Name)
		}
		p.provider, p.modelName = parent.provider, parent.modelName
	} else {
		raw, limit, err := cutRateLimit(s.Model)
		if err != nil {
			return &Error{Code: CodeInvalidAgentConfig, Agent: s.Name, Detail: "model", Err: err}
		}
		prov, name, err := ParseModel(raw)
		if err != nil {
			return &Error{Code: CodeInvalidAgentConfig, Agent: s.Name, Detail: "model", Err: err}
		}
		p.provider, p.modelName, p.rateLimit = prov, name, limit
	}
	if s.MaxSteps < 0 || s.MaxSteps > MaxMaxSteps {
		return configErr("agent %q: max_steps %d out of range 1..%d", s.Name, s.MaxSteps, MaxMaxSteps)
	}
	if s.OutputSchema != nil {
		sch, err := CompileSchema(s.OutputSchema)
		if err != nil {
			return &Error{Code: CodeInvalidOutputSchemaCfg, Agent: s.Name, Detail: err.Error()}
		}
		p.outputSchema = sch
	}
	seen := map[string]bool{}
	for _, ts := range s.Tools {
		if ts.Name == "" || ts.Name == TransferToolName || seen[ts.Name] {
			return configErr("agent %q: tool name %q is empty, reserved or duplicate", s.Name, ts.Name)
		}
		seen[ts.Name] = true
		var sch *Schema
		if ts.Parameters != nil {
			var err error
			if sch, err = CompileSchema(ts.Parameters); err != nil {
				return configErr("agent %q: tool %q parameters: %v", s.Name, ts.Name, err)
			}
		}
		decl := model.ToolDeclaration{Name: ts.Name, Description: ts.Description, Parameters: ts.Parameters}
		switch {
		case ts.Mock != nil && ts.HTTP != nil:
			return configErr("agent %q: tool %q has both mock and http", s.Name, ts.Name)
		case ts.Mock != nil:
			p.tools = append(p.tools, configTool{Tool: NewMockTool(decl, *ts.Mock), schema: sch})
		case ts.HTTP != nil:
			ht, err := NewHTTPTool(decl, *ts.HTTP)
			if err != nil {
				return configErr("agent %q: %v", s.Name, err)
			}
			p.tools = append(p.tools, configTool{Tool: ht, schema: sch})
		default:
			p.funcTools = append(p.funcTools, funcToolSpec{spec: ts, schema: sch})
		}
	}
	return nil
}

// cutRateLimit takes the "rate_limit" block out of a model block (the
// providers' own parsers refuse unknown keys) and validates it.
func cutRateLimit(raw json.RawMessage) (json.RawMessage, *ratelimit.Spec, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return raw, nil, nil // ParseModel reports it
	}
	block, ok := keys["rate_limit"]
	if !ok {
		return raw, nil, nil
	}
	spec, err := ratelimit.ParseSpec(block)
	if err != nil {
		return nil, nil, err
	}
	delete(keys, "rate_limit")
	out, err := json.Marshal(keys)
	return out, &spec, err
}

// endpointKey names the endpoint a model block calls, for rate limits
// (ratelimit.EndpointKey: provider, base URL, model; never a credential).
func endpointKey(p *preparedAgent) string {
	base := ""
	if e, ok := p.provider.(interface{ Endpoint() string }); ok {
		base = e.Endpoint()
	}
	return ratelimit.EndpointKey(p.provider.Name(), base, p.modelName)
}

// limitEndpoints makes one limiter per endpoint some model block declared
// a rate_limit for, and puts every provider of the tree calling that
// endpoint behind it (a model block without the key shares its
// endpoint's limit). Two different rate_limit blocks for one endpoint
// are an error.
func limitEndpoints(root *preparedAgent, o ConfigOptions) ([]*ratelimit.Limiter, error) {
	specs := map[string]ratelimit.Spec{}
	declaredBy := map[string]string{} // endpoint: the agent declaring it
	var walk func(p *preparedAgent, f func(*preparedAgent) error) error
	walk = func(p *preparedAgent, f func(*preparedAgent) error) error {
		if err := f(p); err != nil {
			return err
		}
		for _, s := range p.subs {
			if err := walk(s, f); err != nil {
				return err
			}
		}
		return nil
	}
	err := walk(root, func(p *preparedAgent) error {
		if p.rateLimit == nil || p.provider == nil {
			return nil
		}
		key := endpointKey(p)
		if prev, ok := specs[key]; ok && prev != *p.rateLimit {
			return &Error{Code: CodeInvalidAgentConfig, Agent: p.spec.Name, Detail: "model.rate_limit: differs from another rate_limit for endpoint " + key}
		}
		if _, ok := specs[key]; !ok {
			declaredBy[key] = p.spec.Name
		}
		specs[key] = *p.rateLimit
		return nil
	})
	if err != nil || len(specs) == 0 {
		return nil, err
	}
	reg := o.RateLimits
	if reg == nil {
		reg = ratelimit.NewRegistry()
	}
	limiters := map[string]*ratelimit.Limiter{}
	keys := make([]string, 0, len(specs))
	for key := range specs {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		source := "agent " + strconv.Quote(declaredBy[key])
		if o.Source != "" {
			source = o.Source + " " + source
		}
		l, err := reg.Limiter(key, specs[key], source)
		if err != nil {
			return nil, &Error{Code: CodeInvalidAgentConfig, Agent: declaredBy[key], Detail: "model", Err: err}
		}
		limiters[key] = l
	}
	wrapped := map[model.Provider]model.Provider{}
	_ = walk(root, func(p *preparedAgent) error {
		if p.provider == nil {
			return nil
		}
		if w, ok := wrapped[p.provider]; ok {
			p.provider = w
			return nil
		}
		l := limiters[endpointKey(p)]
		if l == nil {
			return nil
		}
		w := ratelimit.Wrap(p.provider, l)
		wrapped[p.provider], wrapped[w] = w, w
		p.provider = w
		return nil
	})
	out := make([]*ratelimit.Limiter, 0, len(limiters))
	for _, l := range limiters {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Endpoint() < out[j].Endpoint() })
	return out, nil
}

// ParseModel builds the provider a model block names ("provider":
// scripted, openai or gemini) and returns it with its model name.
func ParseModel(raw json.RawMessage) (model.Provider, string, error) {
	var head struct {
		Provider string `json:"provider"`
		Model    string `json:"model"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, "", fmt.Errorf("model: %w", err)
	}
	switch head.Provider {
	case scripted.ProviderName:
		p, err := scripted.Parse(raw)
		return p, scripted.ProviderName, err
	case openai.ProviderName:
		p, err := openai.Parse(raw)
		return p, head.Model, err
	case "gemini", gemini.ProviderName:
		p, err := gemini.Parse(raw)
		return p, head.Model, err
	}
	return nil, "", fmt.Errorf("model: unknown provider %q", head.Provider)
}

// PluginFactory builds a built-in plugin descriptor by name from its
// config (builtin.New's shape); the AGENT.json id and any policy fields
// that are set override the descriptor's.
type PluginFactory func(name string, config map[string]any) (plugins.Descriptor, error)

// DefaultBuiltins resolves the plugins/builtin registry.
func DefaultBuiltins(name string, config map[string]any) (plugins.Descriptor, error) {
	return builtin.New(name, config)
}

// BuildOptions configure Config.Build. Zero fields take the Runner
// defaults.
type BuildOptions struct {
	AppName  string
	Observer observability.Observer
	Sessions *InMemorySessionService
	IDs      IDGenerator
	// Builtins resolves the AGENT.json plugins by name (default
	// DefaultBuiltins, the plugins/builtin registry).
	Builtins PluginFactory
	// Plugins are extra Runner-global descriptors, run after the config's.
	Plugins []plugins.Descriptor
	// Funcs implement the declared tools that have neither mock nor http.
	Funcs map[string]func(ctx context.Context, tc *ToolContext, args map[string]any) (any, error)
	// Callbacks attaches agent-local callbacks by agent name.
	Callbacks map[string]Callbacks
	// WrapModel, if set, wraps every agent's model provider of this build
	// (e.g. the eval response cache); modelName is the config's model.
	WrapModel func(p model.Provider, modelName string) model.Provider
}

// Build makes a fresh agent tree and Runner from the prepared config. The
// runner owns the compiled plugin pipeline: Close it when done.
func (c *Config) Build(opts BuildOptions) (*Runner, error) {
	root, err := c.buildAgent(c.root, &opts)
	if err != nil {
		return nil, err
	}
	descs := make([]plugins.Descriptor, 0, len(c.Spec.Plugins)+len(opts.Plugins))
	resolve := opts.Builtins
	if resolve == nil {
		resolve = DefaultBuiltins
	}
	for _, ps := range c.Spec.Plugins {
		d, err := resolve(ps.Plugin, ps.Config)
		if err != nil {
			return nil, &Error{Code: CodeInvalidAgentConfig, Detail: "plugin " + ps.ID, Err: err}
		}
		if ps.ID != "" {
			d.ID = ps.ID
		}
		if d.Config == nil {
			d.Config = ps.Config
		}
		if ps.Mode != "" {
			d.Mode = plugins.Mode(ps.Mode)
		}
		if ps.FailurePolicy != "" {
			d.FailurePolicy = plugins.FailurePolicy(ps.FailurePolicy)
		}
		if ps.TimeoutMS != 0 {
			d.TimeoutMs = ps.TimeoutMS
		}
		if ps.MaxResultBytes != 0 {
			d.MaxResultBytes = ps.MaxResultBytes
		}
		descs = append(descs, d)
	}
	descs = append(descs, opts.Plugins...)
	var pipe *plugins.Pipeline
	if len(descs) > 0 {
		if pipe, err = plugins.Compile(descs); err != nil {
			return nil, &Error{Code: CodeInvalidAgentConfig, Detail: "plugins", Err: err}
		}
	}
	r, err := NewRunner(root, RunnerOptions{AppName: opts.AppName, Sessions: opts.Sessions, Plugins: pipe, Observer: opts.Observer, IDs: opts.IDs})
	if err != nil {
		if pipe != nil {
			_ = pipe.Close()
		}
		return nil, err
	}
	r.ownsPipeline = true
	return r, nil
}

func (c *Config) buildAgent(p *preparedAgent, opts *BuildOptions) (Agent, error) {
	subs := make([]Agent, 0, len(p.subs))
	for _, s := range p.subs {
		a, err := c.buildAgent(s, opts)
		if err != nil {
			return nil, err
		}
		subs = append(subs, a)
	}
	s := p.spec
	cb := opts.Callbacks[s.Name]
	switch s.Type {
	case TypeSequential:
		return NewSequentialAgent(WorkflowConfig{Name: s.Name, Description: s.Description, SubAgents: subs, Callbacks: cb})
	case TypeParallel:
		return NewParallelAgent(WorkflowConfig{Name: s.Name, Description: s.Description, SubAgents: subs, Callbacks: cb})
	}
	tools := p.tools
	if len(p.funcTools) > 0 {
		tools = append(tools[:len(tools):len(tools)], make([]Tool, 0, len(p.funcTools))...)
		for _, ft := range p.funcTools {
			ts := ft.spec
			fn := opts.Funcs[ts.Name]
			if fn == nil {
				return nil, configErr("agent %q: tool %q has no mock, http or Go function", s.Name, ts.Name)
			}
			tools = append(tools, configTool{Tool: NewFuncTool(ts.Name, ts.Description, ts.Parameters, fn), schema: ft.schema})
		}
	}
	provider := p.provider
	if opts.WrapModel != nil && provider != nil {
		provider = opts.WrapModel(provider, p.modelName)
	}
	return NewLLMAgent(LLMConfig{
		Name:         s.Name,
		Description:  s.Description,
		Instruction:  s.Instruction,
		Model:        provider,
		ModelName:    p.modelName,
		Tools:        tools,
		SubAgents:    subs,
		MaxSteps:     s.MaxSteps,
		OutputSchema: p.outputSchema,
		OutputKey:    s.OutputKey,
		Callbacks:    cb,
	})
}
