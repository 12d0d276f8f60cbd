package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fadcedab/adk/settings"
)

// TestReadme_Operating runs the README's "Operating adk" commands: each
// ./bin/adk line runs in-process from the repository root and exits 0;
// `config defaults` prints a file that itself validates.
func TestReadme_Operating(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "\n## Operating adk\n")
	if start < 0 {
		t.Fatal(`README has no "## Operating adk" section`)
	}
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	n := 0
	for _, b := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(b[1], "\n") {
			args, ok := strings.CutPrefix(line, "./bin/adk ")
			if !ok {
				continue
			}
			n++
			argv := strings.Fields(args)
			for i, a := range argv {
				if strings.HasPrefix(a, "examples/") {
					argv[i] = filepath.Join(root, a)
				}
			}
			var out, errb bytes.Buffer
			if code := run(argv, &out, &errb); code != exitOK {
				t.Errorf("%s: exit %d, stderr %q", line, code, errb.String())
			}
			if argv[0] == "config" && argv[1] == "defaults" {
				path := writeFile(t, t.TempDir(), "defaults.json", out.String())
				if code := run([]string{"config", "validate", path}, io.Discard, &errb); code != exitOK {
					t.Errorf("the defaults file does not validate: %s", errb.String())
				}
			}
		}
	}
	if n < 2 {
		t.Fatalf("found %d adk commands in the Operating section", n)
	}
}

func TestConfigValidateErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, want string }{
		{`{"store": {"max_event_bytes": 2097152}}`, "invalid_settings: store.max_event_bytes (must not exceed store.max_query_bytes)"},
		{`{"coordinator": {"task_timeout": "forever"}}`, "invalid_settings: $.coordinator.task_timeout"},
		{`{"store": {"content_policy": "drop"}}`, "invalid_settings: store.content_policy (must be one of reject, prune)"},
		{`{"log": {"format": "xml"}}`, "invalid_settings: log.format (must be one of text, json)"},
		{`{"log": {"signal_warn_interval": "500ms"}}`, "invalid_settings: log.signal_warn_interval (must be 1s..1h0m0s)"},
		{`{"worker": {"metrics_addr": "0.0.0.0:9090"}}`, "invalid_settings: worker.metrics_addr (a non-loopback address needs worker.tls_cert and worker.tls_key, or worker.insecure_listen)"},
		{`{"api": {"tls_cert": "c.pem"}}`, "invalid_settings: api.tls_cert (goes with api.tls_key: give both or neither)"},
		{`{"serve": {"max_report_bytes": 0}}`, "invalid_settings: serve.max_report_bytes (must be 1..16777216)"},
		{`{"api": {"report_spool_bytes": 4096}}`, "invalid_settings: api.report_spool_bytes (must be 1048576..1099511627776)"},
	} {
		var errb bytes.Buffer
		code := run([]string{"config", "validate", writeFile(t, dir, "s.json", tc.content)}, io.Discard, &errb)
		if code != exitError || !strings.Contains(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q, want %q", tc.content, code, errb.String(), tc.want)
		}
	}
	var errb bytes.Buffer
	if code := run([]string{"serve", "--data-dir", dir, "--max-running-jobs", "0"}, io.Discard, &errb); code != exitError ||
		!strings.Contains(errb.String(), "invalid_settings: coordinator.max_running_jobs (must be 1..256)") {
		t.Errorf("serve --max-running-jobs 0: exit %d, stderr %q", code, errb.String())
	}
	// Listener flags are checked as their keys, on every role, before
	// anything starts; a flag wins over the file (the file's good
	// metrics_addr is replaced by a bad one).
	cfg := writeFile(t, dir, "listen.json", `{"api": {"metrics_addr": "127.0.0.1:0"}, "store": {"metrics_addr": "127.0.0.1:0"}}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"api", "--config", cfg, "--tokens", "t", "--metrics-addr", "10.1.2.3:9090"}, "invalid_settings: api.metrics_addr"},
		{[]string{"api", "--tokens", "t", "--max-report-bytes", "0"}, "invalid_settings: api.max_report_bytes"},
		{[]string{"api", "--tokens", "t", "--report-spool-bytes", "0"}, "invalid_settings: api.report_spool_bytes"},
		{[]string{"api", "--tokens", "t", "--log-level", "loud"}, "invalid_settings: log.level (must be one of debug, info, warn, error)"},
		{[]string{"coordinator", "--metrics-addr", "10.1.2.3:9090"}, "invalid_settings: coordinator.metrics_addr"},
		{[]string{"worker", "--tls-key", "k.pem"}, "invalid_settings: worker.tls_cert"},
		{[]string{"store", "--config", cfg, "--metrics-addr", "nope"}, "invalid_settings: store.metrics_addr"},
		{[]string{"serve", "--data-dir", dir, "--http-addr", "10.1.2.3:8080"}, "invalid_settings: serve.http_addr"},
	} {
		errb.Reset()
		if code := run(tc.args, io.Discard, &errb); code != exitError || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// TestClusterSettings_MaxRunningJobsQueuesSecondJob: a limit changed in the
// settings file takes effect without a rebuild. `adk serve` with
// coordinator.max_running_jobs 1 and a worker whose agent's model (a fake
// OpenAI server on 127.0.0.1) never answers admits the first job (running)
// and queues the second.
func TestClusterSettings_MaxRunningJobsQueuesSecondJob(t *testing.T) {
	release := make(chan struct{})
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // hold every model call until the test ends
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(model.Close)
	t.Cleanup(func() { close(release) })
	t.Setenv("ADK_TEST_SLOW_KEY", "k")
	dir := t.TempDir()
	writeFile(t, dir, "slow.json", `{"schema_version":1,"name":"slow","model":{"provider":"openai","model":"m",
		"base_url":"`+model.URL+`/v1","api_key_env":"ADK_TEST_SLOW_KEY","max_attempts":1}}`)
	cfg := writeFile(t, dir, "adk.json", `{"coordinator": {"max_running_jobs": 1}, "serve": {"port": -1},
		"worker": {"agents": {"slow": "slow.json"}}}`)
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	var o serveOptions
	o.set = settings.Bind(fs, serveSettingsKeys...)
	fs.StringVar(&o.dataDir, "data-dir", "", "")
	if err := fs.Parse([]string{"--config", cfg, "--data-dir", filepath.Join(dir, "data")}); err != nil {
		t.Fatal(err)
	}
	if err := o.resolve(fs.Changed); err != nil {
		t.Fatal(err)
	}
	if o.port != -1 || o.file.Coordinator.MaxRunningJobs != 1 {
		t.Fatalf("settings not applied: port %d, max running %d", o.port, o.file.Coordinator.MaxRunningJobs)
	}
	urlc := make(chan string, 1)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	o.ready = func(u string) { urlc <- u }
	go func() { done <- runServe(ctx, o, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var url string
	select {
	case url = <-urlc:
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve not ready")
	}
	phase := regexp.MustCompile(`"phase":\s*"(\w+)"`)
	var phases []string
	for range 2 {
		out := runCLI(t, exitOK, "eval", "submit", "--nats", url, "--agent", "slow", "--eval-set", travelSet, "--detach")
		m := phase.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("submit: %s", out)
		}
		phases = append(phases, m[1])
	}
	if phases[0] != "running" || phases[1] != "queued" {
		t.Fatalf("phases %v, want [running queued] with max_running_jobs 1", phases)
	}
}
