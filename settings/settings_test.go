package settings

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/fadcedab/adk/store/tracestore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDefaultsValidateAndRoundTrip(t *testing.T) {
	d := Defaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	var back File
	if err := Parse(d.JSON(), &back); err != nil {
		t.Fatalf("parse the defaults file: %v", err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("defaults did not round-trip:\n%s", back.JSON())
	}
	// The trace store defaults are what serve and store hard-coded before
	// settings, and the store accepts them.
	want := tracestore.Options{MaxEvents: 1_000_000, MaxEventsPerPrincipal: 1_000_000, MaxBytes: 1 << 30,
		MaxBytesPerPrincipal: 1 << 30, Retention: 24 * time.Hour, MaxEventBytes: 256 << 10, MaxPrincipals: 1024,
		MaxQueryEvents: 256, MaxQueryBytes: 1 << 20, ContentPolicy: "reject"}
	if got := d.Store.Options(); got != want {
		t.Errorf("store options %+v, want %+v", got, want)
	}
	st, err := tracestore.Open(tracestore.Config{Dir: t.TempDir(), Options: d.Store.Options()})
	if err != nil {
		t.Fatalf("tracestore refuses the default options: %v", err)
	}
	_ = st.Close()
	if l := d.Coordinator.Limits(); l.MaxConcurrency != 4 || l.MaxQueue != 1000 || l.MaxQueueBytes != 64<<20 || l.TaskTimeout != time.Hour {
		t.Errorf("coordinator limits %+v", l)
	}
}

// TestBounds: every numeric key refuses one below its minimum and one above
// its maximum, naming the key; the bounds themselves pass.
func TestBounds(t *testing.T) {
	type bound struct {
		key    string
		set    func(f *File, v int64)
		lo, hi int64
	}
	i := func(p func(*File) *int) func(*File, int64) { return func(f *File, v int64) { *p(f) = int(v) } }
	i64 := func(p func(*File) *int64) func(*File, int64) { return func(f *File, v int64) { *p(f) = v } }
	dur := func(p func(*File) *Duration) func(*File, int64) {
		return func(f *File, v int64) { *p(f) = Duration(v) }
	}
	// Cross-constraints are relaxed around each bound so that only the
	// bound under test can fail.
	roomy := func(f *File) {
		f.Coordinator.EvalStore.MaxTotalBytes = MaxEvalStoreBytes
		f.Coordinator.EvalStore.MaxScopeBytes = MaxEvalStoreBytes
		f.Store = Store{MaxEvents: tracestore.MaxEventsLimit, MaxBytes: tracestore.MaxBytesLimit, MaxEventBytes: tracestore.MaxEventBytesLimit,
			MaxPrincipals: tracestore.MaxPrincipalsLimit, MaxEventsPerPrincipal: tracestore.MaxEventsLimit, MaxBytesPerPrincipal: tracestore.MaxBytesLimit,
			Retention: Duration(tracestore.MaxRetention), ContentPolicy: "prune", MaxQueryEvents: tracestore.MaxEventsLimit, MaxQueryBytes: tracestore.MaxBytesLimit}
		f.Signals.MaxBytes = MaxSignalBytes
	}
	tiny := func(f *File) {
		f.Store = Store{MaxEvents: 1, MaxBytes: 1, MaxEventBytes: 1, MaxPrincipals: 1, MaxEventsPerPrincipal: 1, MaxBytesPerPrincipal: 1,
			Retention: Duration(time.Second), ContentPolicy: "reject", MaxQueryEvents: 1, MaxQueryBytes: 1}
	}
	for _, b := range []bound{
		{"coordinator.max_running_jobs", i(func(f *File) *int { return &f.Coordinator.MaxRunningJobs }), 1, 256},
		{"coordinator.max_queued_jobs", i(func(f *File) *int { return &f.Coordinator.MaxQueuedJobs }), 0, 100_000},
		{"coordinator.max_queued_bytes", i64(func(f *File) *int64 { return &f.Coordinator.MaxQueuedBytes }), 1, 1 << 30},
		{"coordinator.max_pending_submits", i(func(f *File) *int { return &f.Coordinator.MaxPendingSubmits }), 1, 1024},
		{"coordinator.task_timeout", dur(func(f *File) *Duration { return &f.Coordinator.TaskTimeout }), int64(time.Millisecond), int64(24 * time.Hour)},
		{"coordinator.job_timeout", dur(func(f *File) *Duration { return &f.Coordinator.JobTimeout }), int64(time.Second), int64(time.Hour)},
		{"coordinator.eval_store.max_sets", i(func(f *File) *int { return &f.Coordinator.EvalStore.MaxSets }), 1, MaxEvalStoreCount},
		{"coordinator.eval_store.max_jobs", i(func(f *File) *int { return &f.Coordinator.EvalStore.MaxJobs }), 1, MaxEvalStoreCount},
		{"coordinator.eval_store.max_baselines", i(func(f *File) *int { return &f.Coordinator.EvalStore.MaxBaselines }), 1, MaxEvalStoreCount},
		{"coordinator.eval_store.max_page_limit", i(func(f *File) *int { return &f.Coordinator.EvalStore.MaxPageLimit }), 1, 1000},
		{"coordinator.eval_store.max_prune_limit", i(func(f *File) *int { return &f.Coordinator.EvalStore.MaxPruneLimit }), 1, 10_000},
		{"coordinator.eval_store.max_record_bytes", i64(func(f *File) *int64 { return &f.Coordinator.EvalStore.MaxRecordBytes }), 1 << 10, MaxEvalStoreBytes},
		{"worker.capacity", i(func(f *File) *int { return &f.Worker.Capacity }), 1, 4096},
		{"serve.worker_capacity", i(func(f *File) *int { return &f.Serve.WorkerCapacity }), 1, 4096},
		{"serve.port", i(func(f *File) *int { return &f.Serve.Port }), -1, 65535},
		{"store.max_events", i(func(f *File) *int { return &f.Store.MaxEvents }), 1, tracestore.MaxEventsLimit},
		{"store.max_bytes", i64(func(f *File) *int64 { return &f.Store.MaxBytes }), 1, tracestore.MaxBytesLimit},
		{"store.max_event_bytes", i(func(f *File) *int { return &f.Store.MaxEventBytes }), 1, tracestore.MaxEventBytesLimit},
		{"store.max_principals", i(func(f *File) *int { return &f.Store.MaxPrincipals }), 1, tracestore.MaxPrincipalsLimit},
		{"store.max_events_per_principal", i(func(f *File) *int { return &f.Store.MaxEventsPerPrincipal }), 1, tracestore.MaxEventsLimit},
		{"store.max_bytes_per_principal", i64(func(f *File) *int64 { return &f.Store.MaxBytesPerPrincipal }), 1, tracestore.MaxBytesLimit},
		{"store.retention", dur(func(f *File) *Duration { return &f.Store.Retention }), int64(time.Second), int64(24 * time.Hour)},
		{"store.max_query_events", i(func(f *File) *int { return &f.Store.MaxQueryEvents }), 1, tracestore.MaxEventsLimit},
		{"store.max_query_bytes", i(func(f *File) *int { return &f.Store.MaxQueryBytes }), 1, tracestore.MaxBytesLimit},
		{"signals.max_bytes", i64(func(f *File) *int64 { return &f.Signals.MaxBytes }), 1 << 20, MaxSignalBytes},
		{"signals.max_msgs", i64(func(f *File) *int64 { return &f.Signals.MaxMsgs }), 1, MaxSignalMsgs},
		{"signals.max_age", dur(func(f *File) *Duration { return &f.Signals.MaxAge }), int64(time.Second), int64(MaxSignalMaxAge)},
		{"log.signal_warn_interval", dur(func(f *File) *Duration { return &f.Log.SignalWarnInterval }), int64(time.Second), int64(time.Hour)},
	} {
		for n, v := range []int64{b.lo, b.hi} {
			f := Defaults()
			if n == 0 {
				tiny(&f)
			} else {
				roomy(&f)
			}
			b.set(&f, v)
			if err := f.Validate(); err != nil {
				t.Errorf("%s = %d (a bound) refused: %v", b.key, v, err)
			}
		}
		for n, v := range []int64{b.lo - 1, b.hi + 1} {
			f := Defaults()
			if n == 0 {
				tiny(&f)
			} else {
				roomy(&f)
			}
			b.set(&f, v)
			var se *Error
			if err := f.Validate(); !errors.As(err, &se) || se.Key != b.key {
				t.Errorf("%s = %d: got %v, want an error naming %s", b.key, v, err, b.key)
			}
		}
	}
	for _, tc := range []struct {
		key string
		mut func(*File)
	}{
		{"log.level", func(f *File) { f.Log.Level = "loud" }},
		{"log.format", func(f *File) { f.Log.Format = "xml" }},
		{"store.content_policy", func(f *File) { f.Store.ContentPolicy = "drop" }},
		{"coordinator.replicas", func(f *File) { f.Coordinator.Replicas = 2 }},
		{"signals.replicas", func(f *File) { f.Signals.Replicas = 2 }},
		{"signals.compression", func(f *File) { f.Signals.Compression = "zstd" }},
		{"signals.max_msg_size", func(f *File) { f.Signals.MaxMsgSize = MaxSignalMsgSize + 1 }},
		{"signals.max_msg_size", func(f *File) { f.Signals.MaxMsgSize = 1 }},
		{"worker.agents", func(f *File) { f.Worker.Agents = map[string]string{"a": ""} }},
	} {
		f := Defaults()
		tc.mut(&f)
		var se *Error
		if err := f.Validate(); !errors.As(err, &se) || se.Key != tc.key {
			t.Errorf("%s: got %v", tc.key, err)
		}
	}
}

func TestCrossConstraints(t *testing.T) {
	for _, tc := range []struct {
		key string
		mut func(*File)
	}{
		{"coordinator.eval_store.max_record_bytes", func(f *File) { f.Coordinator.EvalStore.MaxRecordBytes = f.Coordinator.EvalStore.MaxScopeBytes + 1 }},
		{"coordinator.eval_store.max_scope_bytes", func(f *File) { f.Coordinator.EvalStore.MaxScopeBytes = f.Coordinator.EvalStore.MaxTotalBytes + 1 }},
		{"coordinator.max_queued_bytes", func(f *File) {
			f.Coordinator.EvalStore.MaxTotalBytes = 32 << 20
			f.Coordinator.EvalStore.MaxScopeBytes = 16 << 20
		}},
		{"store.max_events_per_principal", func(f *File) { f.Store.MaxEvents = 1000; f.Store.MaxQueryEvents = 100 }},
		{"store.max_bytes_per_principal", func(f *File) { f.Store.MaxBytes = 512 << 20 }},
		{"store.max_event_bytes", func(f *File) { f.Store.MaxEventBytes = 2 << 20 }},
		{"store.max_query_events", func(f *File) { f.Store.MaxEvents, f.Store.MaxEventsPerPrincipal = 100, 100 }},
		{"signals.max_msg_size", func(f *File) { f.Signals.MaxBytes = 1 << 20; f.Signals.MaxMsgSize = 2 << 20 }},
	} {
		f := Defaults()
		tc.mut(&f)
		var se *Error
		if err := f.Validate(); !errors.As(err, &se) || se.Key != tc.key || !strings.Contains(se.Reason, "must not exceed") {
			t.Errorf("%s: got %v", tc.key, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ doc, key string }{
		{`{"coordinator": {"max_running_jobs": 2, "password": "hunter2"}}`, "password"},
		{`{"nope": {}}`, "nope"},
		{`{"store": {"retention": "a day"}}`, "$.store.retention"},
		{`{"store": {"retention": 5}}`, "$.store.retention"},
		{`{"coordinator": {"max_running_jobs": "four"}}`, "$.coordinator.max_running_jobs"},
		{`{"api": {"listen": "0.0.0.0:80"}}`, "listen"},
	} {
		f := Defaults()
		err := Parse([]byte(tc.doc), &f)
		var se *Error
		if !errors.As(err, &se) || se.Key != tc.key {
			t.Errorf("%s: got %v, want key %s", tc.doc, err, tc.key)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("a value leaked: %v", err)
		}
	}
}

// TestPrecedence: flag > file > default, key by key.
func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "adk.json")
	doc := `{"coordinator": {"max_running_jobs": 2, "max_queued_jobs": 7}, "log": {"format": "json"},
		"worker": {"agents": {"travel": "agents/travel.json"}}, "store": {"data_dir": "traces"}}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	b := Bind(fs, "coordinator.max_running_jobs", "coordinator.max_queued_jobs", "log.level", "log.format", "store.retention")
	if err := fs.Parse([]string{"--config", path, "--max-running-jobs", "1", "--retention", "1h"}); err != nil {
		t.Fatal(err)
	}
	f, err := b.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"flag over file", f.Coordinator.MaxRunningJobs, 1},
		{"file over default", f.Coordinator.MaxQueuedJobs, 7},
		{"file over default (no flag given)", f.Log.Format, "json"},
		{"flag over default", f.Store.Retention.D(), time.Hour},
		{"default", f.Log.Level, d.Log.Level},
		{"default (key absent from the file)", f.Coordinator.TaskTimeout, d.Coordinator.TaskTimeout},
		{"agent path relative to the file", f.Worker.Agents["travel"], filepath.Join(dir, "agents/travel.json")},
		{"data_dir relative to the file", f.Store.DataDir, filepath.Join(dir, "traces")},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	// A flag set to its default value on the command line still wins.
	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	b = Bind(fs, "coordinator.max_running_jobs")
	if err := fs.Parse([]string{"--config", path, "--max-running-jobs", "4"}); err != nil {
		t.Fatal(err)
	}
	if f, err = b.Resolve(); err != nil || f.Coordinator.MaxRunningJobs != 4 {
		t.Errorf("explicit default flag: %d, %v", f.Coordinator.MaxRunningJobs, err)
	}
	// A bad flag value is named by its key.
	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	b = Bind(fs, "coordinator.max_running_jobs")
	_ = fs.Parse([]string{"--max-running-jobs", "0"})
	var se *Error
	if _, err := b.Resolve(); !errors.As(err, &se) || se.Key != "coordinator.max_running_jobs" {
		t.Errorf("--max-running-jobs 0: %v", err)
	}
}

// TestPrecedence_EnvironmentBetweenFileAndFlag: a key with an
// environment variable (coordinator.result_tails) takes it over the file
// and under the flag, only where the command binds the key; a bad value
// from any of them is refused naming the key and the valid values.
func TestPrecedence_EnvironmentBetweenFileAndFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "adk.json")
	if err := os.WriteFile(path, []byte(`{"coordinator": {"result_tails": "never"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	resolve := func(env string, keys []string, args ...string) (File, error) {
		t.Helper()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		b := Bind(fs, keys...)
		b.getenv = func(name string) string {
			if name == EnvResultTails {
				return env
			}
			return ""
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return b.Resolve()
	}
	bound := []string{"coordinator.result_tails"}
	for _, c := range []struct {
		name, env string
		keys      []string
		args      []string
		want      string
	}{
		{"default", "", bound, nil, "completion"},
		{"file over default", "", bound, []string{"--config", path}, "never"},
		{"environment over file", "first_read", bound, []string{"--config", path}, "first_read"},
		{"flag over environment", "first_read", bound, []string{"--config", path, "--result-tails", "completion"}, "completion"},
		{"environment of a key the command does not bind", "first_read", []string{"log.level"}, []string{"--config", path}, "never"},
	} {
		f, err := resolve(c.env, c.keys, c.args...)
		if err != nil || f.Coordinator.ResultTails != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, f.Coordinator.ResultTails, err, c.want)
		}
	}
	for _, c := range []struct {
		env  string
		args []string
	}{
		{"lazy", nil},
		{"", []string{"--result-tails", "always"}},
	} {
		_, err := resolve(c.env, bound, c.args...)
		var se *Error
		if !errors.As(err, &se) || se.Key != "coordinator.result_tails" || se.Reason != "must be one of completion, first_read, never" {
			t.Errorf("env %q args %q: %v, want the key and its values", c.env, c.args, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Defaults().JSON())
	f.Add([]byte(`{"store": {"retention": "1h", "content_policy": "prune"}}`))
	f.Add([]byte(`{"coordinator": {"eval_store": {"max_sets": 1}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		f := Defaults()
		if err := Parse(data, &f); err != nil {
			var se *Error
			if !errors.As(err, &se) || se.Key == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if err := f.Validate(); err != nil {
			var se *Error
			if !errors.As(err, &se) || se.Key == "" {
				t.Fatalf("untyped error %v", err)
			}
		}
	})
}

// TestListenKeys: each role's HTTP listener keys are bounded and typed,
// naming the key; a non-loopback address needs TLS or insecure_listen.
func TestListenKeys(t *testing.T) {
	for _, tc := range []struct {
		key string
		mut func(*File)
	}{
		{"coordinator.metrics_addr", func(f *File) { f.Coordinator.MetricsAddr = "9090" }},
		{"coordinator.metrics_addr", func(f *File) { f.Coordinator.MetricsAddr = "127.0.0.1:65536" }},
		{"worker.metrics_addr", func(f *File) { f.Worker.MetricsAddr = "0.0.0.0:9090" }},
		{"store.tls_cert", func(f *File) { f.Store.TLSCert = "cert.pem" }},
		{"store.tls_cert", func(f *File) { f.Store.TLSCert, f.Store.TLSKey = strings.Repeat("c", MaxPathBytes+1), "k" }},
		{"serve.http_addr", func(f *File) { f.Serve.HTTPAddr = "10.0.0.1:8080" }},
		{"serve.http_addr", func(f *File) { f.Serve.HTTPAddr = "127.0.0.1:" + strings.Repeat("1", MaxAddrBytes) }},
		{"serve.max_report_bytes", func(f *File) { f.Serve.MaxReportBytes = 0 }},
		{"api.max_report_bytes", func(f *File) { f.API.MaxReportBytes = MaxReportBytes + 1 }},
		{"api.allowed_origins", func(f *File) { f.API.AllowedOrigins = []string{"https://ui.example/path"} }},
		{"api.allowed_origins", func(f *File) { f.API.AllowedOrigins = make([]string, MaxAllowedOrigins+1) }},
		{"api.http_addr", func(f *File) { f.API.HTTPAddr = ":8080" }},
	} {
		f := Defaults()
		tc.mut(&f)
		var se *Error
		if err := f.Validate(); !errors.As(err, &se) || se.Key != tc.key {
			t.Errorf("%s: got %v", tc.key, err)
		}
	}
	// Accepted: the bounds, TLS on a public address, an explicit
	// insecure_listen, origins up to the bound.
	f := Defaults()
	f.API.HTTPAddr, f.API.TLSCert, f.API.TLSKey = "0.0.0.0:8443", "c.pem", "k.pem"
	f.Worker.MetricsAddr, f.Worker.InsecureListen = "0.0.0.0:9090", true
	f.Serve.HTTPAddr, f.Serve.MaxReportBytes = "localhost:0", 1
	f.Store.MetricsAddr = "[::1]:9090"
	f.Coordinator.MetricsAddr = "127.0.0.1:65535"
	f.API.MaxReportBytes, f.API.AllowedOrigins = MaxReportBytes, []string{"https://ui.example", "http://127.0.0.1:3000"}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestPrecedenceLinkedFlags: a flag a command registered itself and
// linked to a key wins over the file, which wins over the default, and
// its bad value is named by the key.
func TestPrecedenceLinkedFlags(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "adk.json")
	doc := `{"api": {"http_addr": "127.0.0.1:9000", "metrics_addr": "127.0.0.1:9100", "tls_cert": "c.pem", "tls_key": "k.pem"}}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	bind := func(args ...string) (File, error) {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		b := Bind(fs)
		addr := fs.String("http-addr", "127.0.0.1:8080", "")
		report := fs.Int("max-report-bytes", MaxReportBytes, "")
		b.Link("http-addr", func(f *File) { f.API.HTTPAddr = *addr })
		b.Link("max-report-bytes", func(f *File) { f.API.MaxReportBytes = *report })
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return b.Resolve()
	}
	f, err := bind("--config", path, "--http-addr", "127.0.0.1:7000")
	if err != nil {
		t.Fatal(err)
	}
	if f.API.HTTPAddr != "127.0.0.1:7000" || f.API.MetricsAddr != "127.0.0.1:9100" || f.API.MaxReportBytes != MaxReportBytes ||
		f.API.TLSCert != filepath.Join(dir, "c.pem") {
		t.Errorf("flag > file > default: %+v", f.API)
	}
	if f, err = bind("--config", path); err != nil || f.API.HTTPAddr != "127.0.0.1:9000" {
		t.Errorf("file over default: %+v %v", f.API, err)
	}
	var se *Error
	if _, err := bind("--max-report-bytes", "0"); !errors.As(err, &se) || se.Key != "api.max_report_bytes" {
		t.Errorf("--max-report-bytes 0: %v", err)
	}
}
