package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/internal/jsonlimit"
	"github.com/fadcedab/adk/store/evalstore"
	"github.com/fadcedab/adk/store/tracestore"
)

// MaxFileBytes bounds a settings file.
const MaxFileBytes = 1 << 20

// File is the settings file. Durations are Go duration strings ("90s",
// "24h"); sizes are bytes.
type File struct {
	Log         Log         `json:"log"`
	Coordinator Coordinator `json:"coordinator"`
	Worker      Worker      `json:"worker"`
	Store       Store       `json:"store"`
	Signals     Signals     `json:"signals"`
	Serve       Serve       `json:"serve"`
	API         API         `json:"api"`
}

// Log configures the process's log/slog logger.
type Log struct {
	Level  string `json:"level"`  // debug | info | warn | error
	Format string `json:"format"` // text | json
	// SignalWarnInterval is how often, at most, a process that publishes
	// signals (adk worker, serve, store) logs that they are not delivered:
	// the first loss at once, then a line per interval with the count
	// since the last. MinSignalWarnInterval..MaxSignalWarnInterval.
	SignalWarnInterval Duration `json:"signal_warn_interval"`
}

// Coordinator configures `adk coordinator` (node identity and cluster
// membership) and the job service every coordinator runs, including the
// embedded one of `adk serve` (admission, timeouts, eval-store quotas).
// Admission, timeouts and quotas must be identical on every coordinator of
// a cluster: the eval store applies them in the Raft state machine.
type Coordinator struct {
	ID           string   `json:"id"`
	NATS         string   `json:"nats"`
	DataDir      string   `json:"data_dir"`
	RaftAddr     string   `json:"raft_addr"`
	Bootstrap    bool     `json:"bootstrap"`
	Join         bool     `json:"join"`
	Peers        []string `json:"peers"` // id=raft-address
	Workers      []string `json:"workers"`
	Coordinators []string `json:"coordinators"`
	Replicas     int      `json:"replicas"` // of ADK_TASKS and ADK_RESULTS: 1 or 3
	Listen

	MaxRunningJobs    int       `json:"max_running_jobs"`    // 1..256
	MaxQueuedJobs     int       `json:"max_queued_jobs"`     // 0..100000
	MaxQueuedBytes    int64     `json:"max_queued_bytes"`    // 1..1 GiB
	MaxPendingSubmits int       `json:"max_pending_submits"` // validations at once, 1..1024
	TaskTimeout       Duration  `json:"task_timeout"`        // 1ms..24h, upper bound of one task
	JobTimeout        Duration  `json:"job_timeout"`         // 1s..1h, upper bound of a job's timeout_ms
	EvalStore         EvalStore `json:"eval_store"`
	// ResultTails is when a coordinator builds a completed records job's
	// result tail: completion (every node, read or not), first_read (a
	// node's first read of the job), or never (coordinator.ResultTails).
	// Node-local: coordinators of a cluster may differ.
	ResultTails string `json:"result_tails"`
}

// EvalStore is the eval store's quotas (CONTRACTS §6 store contract).
type EvalStore struct {
	MaxSets        int   `json:"max_sets"`
	MaxJobs        int   `json:"max_jobs"`
	MaxBaselines   int   `json:"max_baselines"`
	MaxPageLimit   int   `json:"max_page_limit"`  // ≤ 1000
	MaxPruneLimit  int   `json:"max_prune_limit"` // ≤ 10000
	MaxRecordBytes int64 `json:"max_record_bytes"`
	MaxScopeBytes  int64 `json:"max_scope_bytes"`
	MaxTotalBytes  int64 `json:"max_total_bytes"` // record ≤ scope ≤ total
}

// Worker configures `adk worker` and the worker of `adk serve`.
type Worker struct {
	ID       string            `json:"id"`
	NATS     string            `json:"nats"`
	Capacity int               `json:"capacity"` // samples at once, 1..4096
	Agents   map[string]string `json:"agents"`   // name → AGENT.json, relative to the file
	Listen
}

// Store configures a trace store node (`adk store`, and the one of `adk
// serve`): its identity and the trace store options of CONTRACTS §4.
type Store struct {
	Name    string `json:"name"`
	NATS    string `json:"nats"`
	DataDir string `json:"data_dir"`

	MaxEvents             int      `json:"max_events"`
	MaxBytes              int64    `json:"max_bytes"`
	MaxEventBytes         int      `json:"max_event_bytes"`
	MaxPrincipals         int      `json:"max_principals"`
	MaxEventsPerPrincipal int      `json:"max_events_per_principal"`
	MaxBytesPerPrincipal  int64    `json:"max_bytes_per_principal"`
	Retention             Duration `json:"retention"`
	ContentPolicy         string   `json:"content_policy"` // reject | prune
	MaxQueryEvents        int      `json:"max_query_events"`
	MaxQueryBytes         int      `json:"max_query_bytes"`
	Listen
}

// Signals bounds the ADK_SIGNALS stream. A stream that exists keeps its
// limits; these apply when a node creates it.
type Signals struct {
	MaxBytes   int64    `json:"max_bytes"`
	MaxMsgs    int64    `json:"max_msgs"`
	MaxAge     Duration `json:"max_age"`
	MaxMsgSize int32    `json:"max_msg_size"`
	Replicas   int      `json:"replicas"` // 1 or 3
	DiscardNew bool     `json:"discard_new"`
	// Compression of the stream's file blocks: none (the default:
	// publishers already compress each batch) or s2. Limits count
	// messages as published, before any block compression.
	Compression string `json:"compression"`
}

// Serve configures `adk serve`: its data directory, embedded NATS server
// and Raft address, and the capacity of its embedded worker (whose agents
// are worker.agents).
type Serve struct {
	DataDir        string `json:"data_dir"`
	Host           string `json:"host"`
	Port           int    `json:"port"`
	RaftAddr       string `json:"raft_addr"`
	WorkerCapacity int    `json:"worker_capacity"` // 1..4096
	HTTPAPI
	Listen
}

// API configures the developer HTTP API gateway, `adk api`.
type API struct {
	HTTPAPI
	Listen
}

// Listen configures a process's HTTP listeners: metrics_addr serves
// /healthz, /readyz and /metrics (off when empty); the TLS pair and
// insecure_listen apply to every HTTP listener of the process. A
// non-loopback address needs tls_cert and tls_key, or insecure_listen.
// Relative TLS paths are relative to the file.
type Listen struct {
	MetricsAddr    string `json:"metrics_addr"`
	TLSCert        string `json:"tls_cert"`
	TLSKey         string `json:"tls_key"`
	InsecureListen bool   `json:"insecure_listen"`
}

// HTTPAPI configures the developer HTTP API and web UI of `adk serve`
// (off while http_addr is empty) and `adk api`.
type HTTPAPI struct {
	HTTPAddr       string   `json:"http_addr"`
	MaxReportBytes int      `json:"max_report_bytes"` // 1..16 MiB
	AllowedOrigins []string `json:"allowed_origins"`  // scheme://host[:port], at most MaxAllowedOrigins
	NoUI           bool     `json:"no_ui"`
	// ReportSpoolBytes bounds the temporary disk the reports rendered
	// from result streams hold together (devapi.Options.ReportSpoolBytes).
	ReportSpoolBytes int64 `json:"report_spool_bytes"`
}

// Bounds of the keys (CONTRACTS §4 and §6 where the contract names them).
const (
	MaxRunningJobs    = 256
	MaxQueuedJobs     = 100_000
	MaxQueuedBytes    = 1 << 30
	MaxPendingSubmits = 1024
	MaxTaskTimeout    = 24 * time.Hour
	MaxJobTimeout     = time.Hour // evalengine's timeout_ms maximum
	MaxWorkerCapacity = 4096
	MaxEvalStoreCount = 10_000_000
	MaxEvalStoreBytes = 1 << 40
	MaxSignalBytes    = 1 << 40
	MaxSignalMsgs     = 1 << 40
	MaxSignalMsgSize  = 8 << 20 // NATS max_payload ceiling
	MinSignalMaxAge   = time.Second
	MaxSignalMaxAge   = 365 * 24 * time.Hour
	MinRetention      = time.Second
	// A process checks its signal counters once a second, so a shorter
	// warning interval would not be kept; an hour is far past any
	// operator's patience with a silent loss.
	MinSignalWarnInterval = time.Second
	MaxSignalWarnInterval = time.Hour
	maxPageLimitBound     = 1000
	// MaxReportBytes is the ceiling of *.max_report_bytes (devapi's).
	MaxReportBytes = devapi.MaxReportBytes
	// MaxAllowedOrigins bounds *.allowed_origins; MaxAddrBytes an
	// address, MaxPathBytes a TLS file path.
	MaxAllowedOrigins  = 16
	MaxAddrBytes       = 255
	MaxPathBytes       = 4096
	maxPruneLimitBound = 10_000
)

// Defaults returns the default settings: what the commands did before
// settings existed.
func Defaults() File {
	es := evalstore.DefaultLimits()
	return File{
		Log: Log{Level: "warn", Format: "text", SignalWarnInterval: Duration(30 * time.Second)},
		Coordinator: Coordinator{
			RaftAddr: "127.0.0.1:7100", Replicas: 1,
			MaxRunningJobs: 4, MaxQueuedJobs: 1000, MaxQueuedBytes: 64 << 20, MaxPendingSubmits: 64,
			TaskTimeout: Duration(time.Hour), JobTimeout: Duration(MaxJobTimeout),
			ResultTails: string(coordinator.TailsAtCompletion),
			EvalStore: EvalStore{MaxSets: es.MaxSets, MaxJobs: es.MaxJobs, MaxBaselines: es.MaxBaselines,
				MaxPageLimit: es.MaxPageLimit, MaxPruneLimit: es.MaxPruneLimit, MaxRecordBytes: es.MaxRecordBytes,
				MaxScopeBytes: es.MaxScopeBytes, MaxTotalBytes: es.MaxTotalBytes},
		},
		Worker: Worker{Capacity: 4, Agents: map[string]string{}},
		Store: Store{Name: "store-1",
			MaxEvents: 1_000_000, MaxBytes: 1 << 30, MaxEventBytes: 256 << 10, MaxPrincipals: 1024,
			MaxEventsPerPrincipal: 1_000_000, MaxBytesPerPrincipal: 1 << 30, Retention: Duration(24 * time.Hour),
			ContentPolicy: tracestore.ContentReject, MaxQueryEvents: 256, MaxQueryBytes: 1 << 20},
		Signals: Signals{MaxBytes: bus.DefaultSignalMaxBytes, MaxMsgs: bus.DefaultSignalMaxMsgs,
			MaxAge: Duration(bus.DefaultSignalMaxAge), MaxMsgSize: bus.DefaultSignalMaxMsgSize, Replicas: 1,
			Compression: bus.DefaultSignalCompression},
		Serve: Serve{Host: "127.0.0.1", Port: 4222, RaftAddr: "127.0.0.1:0", WorkerCapacity: 8,
			HTTPAPI: HTTPAPI{MaxReportBytes: MaxReportBytes, AllowedOrigins: []string{}, ReportSpoolBytes: devapi.DefaultReportSpoolBytes}},
		API: API{HTTPAPI: HTTPAPI{HTTPAddr: "127.0.0.1:8080", MaxReportBytes: MaxReportBytes, AllowedOrigins: []string{},
			ReportSpoolBytes: devapi.DefaultReportSpoolBytes}},
	}
}

// Error is a refused settings value: Key is the dotted key
// ("coordinator.max_running_jobs"), Reason what is valid. It never repeats
// a value from the file.
type Error struct {
	Key    string
	Reason string
	Err    error
}

// Code is the stable code of every settings error.
const Code = "invalid_settings"

func (e *Error) Error() string { return Code + ": " + e.Key + ": " + e.Reason }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Load reads a settings file over the defaults: keys the file leaves out
// keep their default. Unknown keys, bad JSON and files over MaxFileBytes
// are an *Error; relative paths in the file are made relative to it. Load
// does not Validate (flags may still change values).
func Load(path string) (File, error) {
	f := Defaults()
	fh, err := os.Open(path)
	if err != nil {
		return f, &Error{Key: "--config", Reason: "cannot read the file", Err: err}
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return f, &Error{Key: "--config", Reason: "cannot read the file", Err: err}
	}
	if len(data) > MaxFileBytes {
		return f, &Error{Key: "--config", Reason: fmt.Sprintf("file above %d bytes", MaxFileBytes)}
	}
	if err := Parse(data, &f); err != nil {
		return f, err
	}
	f.Worker.Agents = resolvePaths(filepath.Dir(path), f.Worker.Agents)
	dir := filepath.Dir(path)
	for _, p := range []*string{&f.Coordinator.DataDir, &f.Store.DataDir, &f.Serve.DataDir,
		&f.Coordinator.TLSCert, &f.Coordinator.TLSKey, &f.Worker.TLSCert, &f.Worker.TLSKey, &f.Store.TLSCert, &f.Store.TLSKey,
		&f.Serve.TLSCert, &f.Serve.TLSKey, &f.API.TLSCert, &f.API.TLSKey} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return f, nil
}

func resolvePaths(dir string, agents map[string]string) map[string]string {
	for name, p := range agents {
		if !filepath.IsAbs(p) {
			agents[name] = filepath.Join(dir, p)
		}
	}
	return agents
}

// Parse decodes a settings document into f (over what f holds):
// internal/jsonlimit's bounds, unknown keys refused. The error names the
// offending key, never a value.
func Parse(data []byte, f *File) error {
	if err := jsonlimit.Unmarshal(data, jsonlimit.Limits{MaxBytes: MaxFileBytes}, f); err != nil {
		key, reason := "$", jsonlimit.ErrorCode(err)
		var je *jsonlimit.Error
		if errors.As(err, &je) {
			if je.Key != "" {
				key = je.Key
			} else if je.Path != "" {
				key = je.Path
			}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Type == reflect.TypeFor[Duration]() {
			reason = "not a duration like \"90s\" or \"24h\""
		}
		if reason == "" {
			reason = "invalid_json"
		}
		return &Error{Key: key, Reason: reason, Err: err}
	}
	if f.Worker.Agents == nil {
		f.Worker.Agents = map[string]string{}
	}
	return nil
}

// JSON renders f as an indented settings file.
func (f File) JSON() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		panic(err) // every field is plain data
	}
	return b.Bytes()
}

// Duration is a time.Duration written as a Go duration string.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes "1h0m0s"-style strings.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// durationError is a *json.UnmarshalTypeError so that encoding/json adds
// the key's path to it.
func durationError(b []byte) error {
	return &json.UnmarshalTypeError{Value: "value", Type: reflect.TypeFor[Duration]()}
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return durationError(b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return durationError(b)
	}
	*d = Duration(v)
	return nil
}

// Logger returns the log/slog logger the log section asks for, writing to
// w. Call it on a validated File.
func (l Log) Logger(w io.Writer) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(l.Level))
	opts := &slog.HandlerOptions{Level: lv}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Limits maps the admission and timeout keys to coordinator.Limits.
func (c Coordinator) Limits() coordinator.Limits {
	q := c.MaxQueuedJobs
	if q == 0 {
		q = -1 // coordinator.Limits: negative means no queue, zero the default
	}
	return coordinator.Limits{MaxConcurrency: c.MaxRunningJobs, MaxQueue: q, MaxQueueBytes: c.MaxQueuedBytes,
		TaskTimeout: c.TaskTimeout.D(), JobTimeout: c.JobTimeout.D(), MaxPendingSubmits: c.MaxPendingSubmits}
}

// Tails maps result_tails to coordinator.ResultTails.
func (c Coordinator) Tails() coordinator.ResultTails { return coordinator.ResultTails(c.ResultTails) }

// StoreLimits maps the eval_store keys to evalstore.Limits.
func (c Coordinator) StoreLimits() evalstore.Limits {
	e := c.EvalStore
	l := evalstore.DefaultLimits()
	l.MaxSets, l.MaxJobs, l.MaxBaselines = e.MaxSets, e.MaxJobs, e.MaxBaselines
	l.MaxPageLimit, l.MaxPruneLimit = e.MaxPageLimit, e.MaxPruneLimit
	l.MaxRecordBytes, l.MaxScopeBytes, l.MaxTotalBytes = e.MaxRecordBytes, e.MaxScopeBytes, e.MaxTotalBytes
	return l
}

// Options maps the trace store keys to tracestore.Options.
func (s Store) Options() tracestore.Options {
	return tracestore.Options{MaxEvents: s.MaxEvents, MaxBytes: s.MaxBytes, MaxEventBytes: s.MaxEventBytes,
		MaxPrincipals: s.MaxPrincipals, MaxEventsPerPrincipal: s.MaxEventsPerPrincipal,
		MaxBytesPerPrincipal: s.MaxBytesPerPrincipal, Retention: s.Retention.D(), ContentPolicy: s.ContentPolicy,
		MaxQueryEvents: s.MaxQueryEvents, MaxQueryBytes: s.MaxQueryBytes}
}

// StreamConfig maps the signals keys to bus.SignalStreamConfig.
func (s Signals) StreamConfig() bus.SignalStreamConfig {
	return bus.SignalStreamConfig{MaxBytes: s.MaxBytes, MaxMsgs: s.MaxMsgs, MaxAge: s.MaxAge.D(),
		MaxMsgSize: s.MaxMsgSize, Replicas: s.Replicas, DiscardNew: s.DiscardNew, Compression: s.Compression}
}
