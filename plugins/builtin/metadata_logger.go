package builtin

import (
	"context"
	"log/slog"
	"reflect"

	"github.com/fadcedab/adk/plugins"
)

// Metadata is everything metadata_logger ever emits: correlation ids and
// names from the call context, the hook, the plugin id and the kind of the
// phase value — never content, arguments, results or secrets.
type Metadata struct {
	RunID        string       `json:"run_id,omitempty"`
	InvocationID string       `json:"invocation_id,omitempty"`
	Session      string       `json:"session,omitempty"`
	AppName      string       `json:"app_name,omitempty"`
	UserID       string       `json:"user_id,omitempty"`
	Agent        string       `json:"agent,omitempty"`
	Model        string       `json:"model,omitempty"`
	Phase        string       `json:"phase,omitempty"` // CallContext.Extra["phase"] when it is a string
	Tool         string       `json:"tool,omitempty"`
	CallID       string       `json:"call_id,omitempty"`
	Hook         plugins.Hook `json:"hook"`
	PluginID     string       `json:"plugin_id"`
	ValueType    string       `json:"value_type"` // binary|map|list|tuple|atom|number|other
}

// MetadataLogger records structural lifecycle metadata on every hook and
// always observes. Config: log_level none|debug|info|notice|warning (default
// none). Records go to the sink given to New (WithMetadataSink), if any,
// and, unless log_level is none, to the logger at that level (notice is
// logged as info+2).
type MetadataLogger struct {
	sink   func(Metadata)
	logger *slog.Logger
	level  slog.Level
	log    bool
}

// NewMetadataLogger validates config and returns the plugin. sink and logger
// may be nil (logger defaults to slog.Default()).
func NewMetadataLogger(config map[string]any, sink func(Metadata), logger *slog.Logger) (*MetadataLogger, error) {
	c := newConfig(MetadataLoggerName, config, "log_level")
	l := &MetadataLogger{sink: sink, logger: logger, log: true}
	switch c.oneOf("log_level", "none", "none", "debug", "info", "notice", "warning") {
	case "none":
		l.log = false
	case "debug":
		l.level = slog.LevelDebug
	case "info":
		l.level = slog.LevelInfo
	case "notice":
		l.level = slog.LevelInfo + 2
	case "warning":
		l.level = slog.LevelWarn
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	return l, c.err
}

// Hooks implements plugins.Plugin: all fifteen hooks.
func (l *MetadataLogger) Hooks() plugins.Hooks {
	return plugins.Dispatch(l.emit)
}

func (l *MetadataLogger) emit(ctx context.Context, hook plugins.Hook, cc plugins.CallContext, v any, _ map[string]any) (plugins.Outcome, error) {
	m := Metadata{
		RunID: cc.RunID, InvocationID: cc.InvocationID, Session: cc.SessionID, AppName: cc.AppName,
		UserID: cc.UserID, Agent: cc.Agent, Model: cc.Model, Tool: cc.Tool, CallID: cc.CallID,
		Hook: hook, PluginID: cc.PluginID, ValueType: valueType(v),
	}
	if phase, ok := cc.Extra["phase"].(string); ok {
		m.Phase = phase
	}
	if l.sink != nil {
		l.sink(m)
	}
	if l.log {
		l.logger.LogAttrs(ctx, l.level, "adk plugin lifecycle metadata",
			slog.String("hook", string(m.Hook)), slog.String("plugin_id", m.PluginID),
			slog.String("value_type", m.ValueType), slog.String("run_id", m.RunID),
			slog.String("invocation_id", m.InvocationID), slog.String("session", m.Session),
			slog.String("app_name", m.AppName), slog.String("user_id", m.UserID),
			slog.String("agent", m.Agent), slog.String("model", m.Model), slog.String("phase", m.Phase),
			slog.String("tool", m.Tool), slog.String("call_id", m.CallID))
	}
	return plugins.Observe(), nil
}

// valueType names the JSON kind of v in the contract's (Erlang) vocabulary:
// strings are binary, objects and structs map, arrays list, booleans and nil
// atom, numbers number.
func valueType(v any) string {
	if v == nil {
		return "atom"
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return "atom"
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.String:
		return "binary"
	case reflect.Map, reflect.Struct:
		return "map"
	case reflect.Slice, reflect.Array:
		return "list"
	case reflect.Bool:
		return "atom"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "number"
	}
	return "other"
}
