package builtin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/fadcedab/adk/plugins"
)

// Built-in plugin names, as AGENT.json spells them.
const (
	GlobalInstructionName = "global_instruction"
	ContextFilterName     = "context_filter"
	ReflectRetryName      = "reflect_retry"
	MetadataLoggerName    = "metadata_logger"
)

// Names lists the built-in plugins.
func Names() []string {
	return []string{GlobalInstructionName, ContextFilterName, ReflectRetryName, MetadataLoggerName}
}

// Option adjusts how New builds a built-in.
type Option func(*options)

type options struct {
	sink   func(Metadata)
	logger *slog.Logger
}

// WithMetadataSink makes metadata_logger hand every record to sink (in the
// hook's goroutine; sink must be safe for concurrent use and quick).
func WithMetadataSink(sink func(Metadata)) Option {
	return func(o *options) { o.sink = sink }
}

// WithLogger sets the logger metadata_logger writes to when its log_level is
// not "none" (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// New builds the named built-in as an ordinary descriptor: ID is the name
// (callers may change it, and the policy fields, before Compile), Mode is
// intervene for global_instruction, context_filter and reflect_retry and
// observe for metadata_logger, Config is config. The config is validated
// now with the contract's bounds; unknown keys are rejected. Errors are
// *plugins.Error with Code invalid_plugin_config or unknown_builtin_plugin.
func New(name string, config map[string]any, opts ...Option) (plugins.Descriptor, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	d := plugins.Descriptor{ID: name, Mode: plugins.ModeIntervene, Config: config}
	var err error
	switch name {
	case GlobalInstructionName:
		d.Plugin, err = NewGlobalInstruction(config)
	case ContextFilterName:
		d.Plugin, err = NewContextFilter(config)
	case ReflectRetryName:
		d.Plugin, err = NewReflectRetry(config)
	case MetadataLoggerName:
		d.Mode = plugins.ModeObserve
		d.Plugin, err = NewMetadataLogger(config, o.sink, o.logger)
	default:
		return plugins.Descriptor{}, &plugins.Error{Code: plugins.CodeUnknownBuiltinPlugin, Reason: fmt.Sprintf("%q", name)}
	}
	if err != nil {
		return plugins.Descriptor{}, err
	}
	return d, nil
}

// config reads one built-in's config map, recording the first violation.
type config struct {
	plugin string
	m      map[string]any
	err    error
}

func newConfig(plugin string, m map[string]any, allowed ...string) *config {
	c := &config{plugin: plugin, m: m}
	var unknown []string
	for k := range m {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		c.fail("unknown keys: " + strings.Join(unknown, ","))
	}
	return c
}

func (c *config) fail(reason string) {
	if c.err == nil {
		c.err = &plugins.Error{Code: plugins.CodeInvalidPluginConfig, PluginID: c.plugin, Reason: reason}
	}
}

// str reads a UTF-8 string of minLen..maxLen bytes.
func (c *config) str(key, def string, minLen, maxLen int) string {
	v, ok := c.m[key]
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if !isStr || len(s) < minLen || len(s) > maxLen || !utf8.ValidString(s) {
		c.fail(fmt.Sprintf("%s: want a UTF-8 string of %d..%d bytes", key, minLen, maxLen))
		return def
	}
	return s
}

func (c *config) oneOf(key, def string, allowed ...string) string {
	s := c.str(key, def, 1, 64)
	if !slices.Contains(allowed, s) {
		c.fail(fmt.Sprintf("%s: want one of %s", key, strings.Join(allowed, "|")))
	}
	return s
}

func (c *config) boolean(key string, def bool) bool {
	v, ok := c.m[key]
	if !ok {
		return def
	}
	b, isBool := v.(bool)
	if !isBool {
		c.fail(key + ": want a boolean")
	}
	return b
}

// integer reads an integer in lo..hi; JSON numbers (float64, json.Number)
// must be integral.
func (c *config) integer(key string, def, lo, hi int) int {
	v, ok := c.m[key]
	if !ok {
		return def
	}
	n, isInt := toInt(v)
	if !isInt || n < lo || n > hi {
		c.fail(fmt.Sprintf("%s: want an integer in %d..%d", key, lo, hi))
		return def
	}
	return n
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), x >= math.MinInt32 && x <= math.MaxInt32
	case float64:
		return int(x), x == math.Trunc(x) && math.Abs(x) <= math.MaxInt32
	case json.Number:
		n, err := x.Int64()
		return int(n), err == nil && n >= math.MinInt32 && n <= math.MaxInt32
	}
	return 0, false
}

// strings reads a list of strings ([]string or []any of strings).
func (c *config) strings(key string) ([]string, bool) {
	v, ok := c.m[key]
	if !ok {
		return nil, false
	}
	switch x := v.(type) {
	case []string:
		return x, true
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, isStr := e.(string)
			if !isStr {
				c.fail(key + ": want a list of strings")
				return nil, true
			}
			out = append(out, s)
		}
		return out, true
	}
	c.fail(key + ": want a list of strings")
	return nil, true
}
