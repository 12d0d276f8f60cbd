package settings

import (
	"fmt"
	"os"
	"sort"

	"github.com/spf13/pflag"
)

// flagDef is one key a command may expose as a flag.
type flagDef struct {
	name, usage string
	add         func(fs *pflag.FlagSet, name, usage string) func(*File)
}

// envDef is the environment variable that sets a key too: set writes
// its value.
type envDef struct {
	name string
	set  func(f *File, v string)
}

// envs are the keys an environment variable sets, by key: a command that
// binds the key takes it (flag > variable > file > default).
var envs = map[string]envDef{
	"coordinator.result_tails": {EnvResultTails, func(f *File, v string) { f.Coordinator.ResultTails = v }},
}

func intFlag(get func(*File) *int) func(*pflag.FlagSet, string, string) func(*File) {
	return func(fs *pflag.FlagSet, name, usage string) func(*File) {
		d := Defaults()
		v := fs.Int(name, *get(&d), usage)
		return func(f *File) { *get(f) = *v }
	}
}

func int64Flag(get func(*File) *int64) func(*pflag.FlagSet, string, string) func(*File) {
	return func(fs *pflag.FlagSet, name, usage string) func(*File) {
		d := Defaults()
		v := fs.Int64(name, *get(&d), usage)
		return func(f *File) { *get(f) = *v }
	}
}

func strFlag(get func(*File) *string) func(*pflag.FlagSet, string, string) func(*File) {
	return func(fs *pflag.FlagSet, name, usage string) func(*File) {
		d := Defaults()
		v := fs.String(name, *get(&d), usage)
		return func(f *File) { *get(f) = *v }
	}
}

func durFlag(get func(*File) *Duration) func(*pflag.FlagSet, string, string) func(*File) {
	return func(fs *pflag.FlagSet, name, usage string) func(*File) {
		d := Defaults()
		v := fs.Duration(name, get(&d).D(), usage)
		return func(f *File) { *get(f) = Duration(*v) }
	}
}

// flags are the common keys, by settings key. A command binds the ones
// that concern it.
var flags = map[string]flagDef{
	"log.level":  {"log-level", "log level: debug, info, warn, error (log.level)", strFlag(func(f *File) *string { return &f.Log.Level })},
	"log.format": {"log-format", "log format: text or json (log.format)", strFlag(func(f *File) *string { return &f.Log.Format })},
	"coordinator.max_running_jobs": {"max-running-jobs", fmt.Sprintf("jobs running at once, 1..%d (coordinator.max_running_jobs)", MaxRunningJobs),
		intFlag(func(f *File) *int { return &f.Coordinator.MaxRunningJobs })},
	"coordinator.max_queued_jobs": {"max-queued-jobs", fmt.Sprintf("jobs waiting to run, 0..%d (coordinator.max_queued_jobs)", MaxQueuedJobs),
		intFlag(func(f *File) *int { return &f.Coordinator.MaxQueuedJobs })},
	"coordinator.max_queued_bytes": {"max-queued-bytes", "bytes of queued job records (coordinator.max_queued_bytes)",
		int64Flag(func(f *File) *int64 { return &f.Coordinator.MaxQueuedBytes })},
	"coordinator.task_timeout": {"task-timeout", "upper bound of one task (coordinator.task_timeout)",
		durFlag(func(f *File) *Duration { return &f.Coordinator.TaskTimeout })},
	"coordinator.job_timeout": {"job-timeout", "upper bound of a job's timeout (coordinator.job_timeout)",
		durFlag(func(f *File) *Duration { return &f.Coordinator.JobTimeout })},
	"coordinator.result_tails": {"result-tails", "when a completed job's result tail is built: completion, first_read or never (coordinator.result_tails, $" + EnvResultTails + ")",
		strFlag(func(f *File) *string { return &f.Coordinator.ResultTails })},
	"worker.capacity": {"capacity", fmt.Sprintf("samples run at once, 1..%d (worker.capacity)", MaxWorkerCapacity),
		intFlag(func(f *File) *int { return &f.Worker.Capacity })},
	"serve.worker_capacity": {"capacity", fmt.Sprintf("samples the embedded worker runs at once, 1..%d (serve.worker_capacity)", MaxWorkerCapacity),
		intFlag(func(f *File) *int { return &f.Serve.WorkerCapacity })},
	"store.max_events": {"max-events", "trace store capacity in events (store.max_events)", intFlag(func(f *File) *int { return &f.Store.MaxEvents })},
	"store.max_bytes":  {"max-bytes", "trace store capacity in bytes (store.max_bytes)", int64Flag(func(f *File) *int64 { return &f.Store.MaxBytes })},
	"store.retention":  {"retention", "trace retention, at most 24h (store.retention)", durFlag(func(f *File) *Duration { return &f.Store.Retention })},
	"store.content_policy": {"content-policy", "events with fields outside the projection: reject or prune (store.content_policy)",
		strFlag(func(f *File) *string { return &f.Store.ContentPolicy })},
}

// EnvResultTails sets coordinator.result_tails (over the file, under the
// flag).
const EnvResultTails = "ADK_COORDINATOR_RESULT_TAILS"

// Flags binds a command's settings flags and its --config.
type Flags struct {
	fs     *pflag.FlagSet
	config string
	apply  map[string]func(*File) // by flag name
	env    []envDef               // bound keys an environment variable sets
	getenv func(string) string
}

// Bind registers --config and the flags of keys on fs. A key with an
// environment variable takes it too.
func Bind(fs *pflag.FlagSet, keys ...string) *Flags {
	b := &Flags{fs: fs, apply: map[string]func(*File){}, getenv: os.Getenv}
	fs.StringVar(&b.config, "config", "", "settings file (JSON; adk config defaults prints every key); flags win over it")
	for _, k := range keys {
		d, ok := flags[k]
		if !ok {
			panic("settings: no flag for key " + k)
		}
		b.apply[d.name] = d.add(fs, d.name, d.usage)
		if e, ok := envs[k]; ok {
			b.env = append(b.env, e)
		}
	}
	return b
}

// Link ties a flag the command registered itself (a listener flag shared
// by several commands) to a settings key: when the flag is given on the
// command line, set writes its value over the file's before Resolve
// validates, so flag > file > default holds and a bad value is refused
// naming the key.
func (b *Flags) Link(flag string, set func(*File)) {
	if _, dup := b.apply[flag]; dup || b.fs.Lookup(flag) == nil {
		panic("settings: cannot link flag " + flag)
	}
	b.apply[flag] = set
}

// ConfigPath is the --config value.
func (b *Flags) ConfigPath() string { return b.config }

// Resolve returns the settings in force: the defaults, the --config file
// over them, the bound keys' environment variables (when set, non-empty)
// over that, and every flag given on the command line over all; then
// validated.
func (b *Flags) Resolve() (File, error) {
	f := Defaults()
	if b.config != "" {
		var err error
		if f, err = Load(b.config); err != nil {
			return f, err
		}
	}
	for _, e := range b.env {
		if v := b.getenv(e.name); v != "" {
			e.set(&f, v)
		}
	}
	names := make([]string, 0, len(b.apply))
	for n := range b.apply {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if b.fs.Changed(n) {
			b.apply[n](&f)
		}
	}
	return f, f.Validate()
}
