package plugins

import (
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"
)

// Mode says whether a plugin may change a phase.
type Mode string

// Plugin modes. The zero Mode means ModeObserve.
const (
	ModeObserve   Mode = "observe"
	ModeIntervene Mode = "intervene"
)

// FailurePolicy says what a plugin failure does to the phase.
type FailurePolicy string

// Failure policies. The zero FailurePolicy means PolicyOpen.
const (
	// PolicyOpen records the failure in the trace and continues with the
	// previous value.
	PolicyOpen FailurePolicy = "open"
	// PolicyClosed stops the phase with a plugin_failed error.
	PolicyClosed FailurePolicy = "closed"
)

// Descriptor is one entry of a Runner's ordered plugin list. Zero values take
// the pipeline defaults (the contract's unless WithDefaults overrides them):
// mode observe, failure policy open, timeout 1000 ms, result 262 144 bytes.
type Descriptor struct {
	ID             string         // 1..256 bytes of UTF-8, unique in the pipeline
	Plugin         Plugin         // must implement at least one hook
	Mode           Mode           // observe | intervene
	FailurePolicy  FailurePolicy  // open | closed
	TimeoutMs      int            // per hook call, 1..120 000
	MaxResultBytes int            // JSON-encoded Amend/Return value, 1..1 048 576
	Config         map[string]any // handed to every hook; JSON-encodable, ≤ 1 MiB encoded
}

// Defaults are pipeline-wide replacements for the contract's descriptor
// defaults; zero fields keep the contract's.
type Defaults struct {
	Mode           Mode
	FailurePolicy  FailurePolicy
	TimeoutMs      int
	MaxResultBytes int
}

// CompileOption changes how Compile builds a pipeline.
type CompileOption func(*compileOptions)

type compileOptions struct {
	defaults Defaults
}

// WithDefaults overrides the descriptor defaults for every descriptor that
// leaves a field zero. The overrides obey the same bounds as descriptors.
func WithDefaults(d Defaults) CompileOption {
	return func(o *compileOptions) { o.defaults = d }
}

// Description is the config-free view of a pipeline (describe/1).
type Description struct {
	SchemaVersion int                 `json:"schema_version"`
	Plugins       []PluginDescription `json:"plugins"`
}

// PluginDescription is one plugin in a Description.
type PluginDescription struct {
	ID             string        `json:"id"`
	Mode           Mode          `json:"mode"`
	FailurePolicy  FailurePolicy `json:"failure_policy"`
	TimeoutMs      int           `json:"timeout_ms"`
	MaxResultBytes int           `json:"max_result_bytes"`
}

// compiled is a validated descriptor with its callback table.
type compiled struct {
	id             string
	mode           Mode
	policy         FailurePolicy
	timeoutMs      int
	maxResultBytes int
	config         map[string]any
	calls          [numHooks]callFunc
	closer         io.Closer
}

// Compile validates descs once, in order, and returns the pipeline. The first
// violation is returned as an *Error: invalid_plugin_descriptor{Index,
// Reason} for a bad field, duplicate_plugin_id{PluginID}, or plugin_limit
// (more than 128 descriptors). Plugins implementing io.Closer are closed by
// Pipeline.Close.
func Compile(descs []Descriptor, opts ...CompileOption) (*Pipeline, error) {
	var o compileOptions
	for _, opt := range opts {
		opt(&o)
	}
	def, err := resolveDefaults(o.defaults)
	if err != nil {
		return nil, err
	}
	if len(descs) > PluginLimit {
		return nil, &Error{Code: CodePluginLimit, Limit: PluginLimit}
	}
	p := &Pipeline{plugins: make([]compiled, 0, len(descs))}
	seen := make(map[string]struct{}, len(descs))
	for i, d := range descs {
		c, err := compileDescriptor(i, d, def)
		if err != nil {
			return nil, err
		}
		if _, dup := seen[c.id]; dup {
			return nil, &Error{Code: CodeDuplicatePluginID, PluginID: c.id}
		}
		seen[c.id] = struct{}{}
		p.plugins = append(p.plugins, c)
	}
	for h := range numHooks {
		for _, c := range p.plugins {
			if c.callFor(hookIndex(h)) != nil {
				p.active[h] = true
				break
			}
		}
	}
	return p, nil
}

func resolveDefaults(d Defaults) (Defaults, error) {
	bad := func(reason string) error {
		return &Error{Code: CodeInvalidPluginDescriptor, Index: -1, Reason: reason}
	}
	if d.Mode == "" {
		d.Mode = ModeObserve
	}
	if d.FailurePolicy == "" {
		d.FailurePolicy = PolicyOpen
	}
	if d.TimeoutMs == 0 {
		d.TimeoutMs = DefaultTimeoutMs
	}
	if d.MaxResultBytes == 0 {
		d.MaxResultBytes = DefaultMaxResultBytes
	}
	switch {
	case d.Mode != ModeObserve && d.Mode != ModeIntervene:
		return d, bad(ReasonInvalidMode)
	case d.FailurePolicy != PolicyOpen && d.FailurePolicy != PolicyClosed:
		return d, bad(ReasonInvalidFailurePolicy)
	case d.TimeoutMs < 1 || d.TimeoutMs > MaxTimeoutMs:
		return d, bad(ReasonInvalidTimeoutMs)
	case d.MaxResultBytes < 1 || d.MaxResultBytes > MaxMaxResultBytes:
		return d, bad(ReasonInvalidMaxResultSize)
	}
	return d, nil
}

func compileDescriptor(i int, d Descriptor, def Defaults) (compiled, error) {
	c := compiled{
		id: d.ID, mode: d.Mode, policy: d.FailurePolicy,
		timeoutMs: d.TimeoutMs, maxResultBytes: d.MaxResultBytes, config: d.Config,
	}
	if c.id == "" || len(c.id) > MaxIDBytes || !utf8.ValidString(c.id) {
		return c, descriptorError(i, ReasonInvalidID)
	}
	if d.Plugin == nil {
		return c, descriptorError(i, ReasonInvalidPlugin)
	}
	if c.mode == "" {
		c.mode = def.Mode
	}
	if c.mode != ModeObserve && c.mode != ModeIntervene {
		return c, descriptorError(i, ReasonInvalidMode+": "+strconv.Quote(string(c.mode)))
	}
	if c.policy == "" {
		c.policy = def.FailurePolicy
	}
	if c.policy != PolicyOpen && c.policy != PolicyClosed {
		return c, descriptorError(i, ReasonInvalidFailurePolicy+": "+strconv.Quote(string(c.policy)))
	}
	if c.timeoutMs == 0 {
		c.timeoutMs = def.TimeoutMs
	}
	if c.timeoutMs < 1 || c.timeoutMs > MaxTimeoutMs {
		return c, descriptorError(i, ReasonInvalidTimeoutMs+": "+strconv.Itoa(c.timeoutMs))
	}
	if c.maxResultBytes == 0 {
		c.maxResultBytes = def.MaxResultBytes
	}
	if c.maxResultBytes < 1 || c.maxResultBytes > MaxMaxResultBytes {
		return c, descriptorError(i, ReasonInvalidMaxResultSize+": "+strconv.Itoa(c.maxResultBytes))
	}
	if c.config == nil {
		c.config = map[string]any{}
	}
	if b, err := json.Marshal(c.config); err != nil || len(b) > MaxConfigBytes {
		return c, descriptorError(i, ReasonInvalidPluginConfig)
	}
	c.calls = d.Plugin.Hooks().table()
	any := false
	for _, f := range c.calls {
		any = any || f != nil
	}
	if !any {
		return c, descriptorError(i, ReasonNoCallbacks)
	}
	if cl, ok := d.Plugin.(io.Closer); ok {
		c.closer = cl
	}
	return c, nil
}

// callFor returns the callback the plugin runs for hook h, applying the
// on_error fallback for on_agent_error and on_run_error.
func (c *compiled) callFor(h hookIndex) callFunc {
	f := c.calls[h]
	if f == nil && (h == hkOnAgentError || h == hkOnRunError) {
		f = c.calls[hkOnError]
	}
	return f
}

// Describe returns the pipeline's plugins without their configs.
func (p *Pipeline) Describe() Description {
	d := Description{SchemaVersion: 1, Plugins: make([]PluginDescription, len(p.plugins))}
	for i, c := range p.plugins {
		d.Plugins[i] = PluginDescription{
			ID: c.id, Mode: c.mode, FailurePolicy: c.policy,
			TimeoutMs: c.timeoutMs, MaxResultBytes: c.maxResultBytes,
		}
	}
	return d
}
