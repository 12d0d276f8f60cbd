package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/settings"
)

// parseCoordinator parses args into a coordinatorOptions as the command
// does and resolves them.
func parseCoordinator(t *testing.T, args ...string) (*coordinatorOptions, error) {
	t.Helper()
	o := &coordinatorOptions{}
	fl := pflag.NewFlagSet("coordinator", pflag.ContinueOnError)
	registerCoordinatorFlags(fl, o)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o, o.resolve(fl.Changed)
}

// TestCoordinatorConfigFile: the settings file's coordinator section fills
// what the flags leave at their defaults, a flag given on the command line
// wins, a relative data_dir is relative to the file, and the result is the
// coordinator's Config with the file's limits.
func TestCoordinatorConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "coord.json", `{"coordinator": {"id": "c1", "nats": "nats://n1:4222", "data_dir": "data", "raft_addr": "10.0.0.1:7100",
		"bootstrap": true, "peers": ["c1=10.0.0.1:7100", "c2=10.0.0.2:7100"], "workers": ["w1", "w2"],
		"coordinators": ["c3"], "replicas": 3, "max_running_jobs": 2, "max_queued_jobs": 0}, "log": {"level": "info"},
		"signals": {"replicas": 3, "max_bytes": 8388608}}`)
	o, err := parseCoordinator(t, "--config", path, "--id", "c2", "--workers", "w9", "--max-running-jobs", "1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	want := coordinator.Config{ID: "c2", DataDir: filepath.Join(dir, "data"), RaftAddr: "10.0.0.1:7100", Bootstrap: true,
		Peers: []coordinator.Peer{{ID: "c1", Addr: "10.0.0.1:7100"}, {ID: "c2", Addr: "10.0.0.2:7100"}}, Workers: []string{"w9"},
		Coordinators: []string{"c3"}, Limits: o.file.Coordinator.Limits(), StoreLimits: o.file.Coordinator.StoreLimits(),
		ResultTails: coordinator.TailsAtCompletion}
	want.Streams.Replicas = 3
	// The leader creates ADK_SIGNALS with the file's signals section.
	signals := o.file.Signals.StreamConfig()
	want.Signals = &signals
	if signals.Replicas != 3 || signals.MaxBytes != 8<<20 {
		t.Errorf("signal stream %+v: want the file's replicas and max_bytes", signals)
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config\n got %+v\nwant %+v", cfg, want)
	}
	if o.nats.url != "nats://n1:4222" || o.file.Log.Level != "info" {
		t.Errorf("nats %q log level %q from the file", o.nats.url, o.file.Log.Level)
	}
	if cfg.Limits.MaxConcurrency != 1 || cfg.Limits.MaxQueue != -1 {
		t.Errorf("limits %+v: want the flag's 1 running job and the file's empty queue", cfg.Limits)
	}

	// A flag set to its default value on the command line still wins.
	o, err = parseCoordinator(t, "--config", path, "--replicas", "1", "--bootstrap=false")
	if err != nil {
		t.Fatal(err)
	}
	if o.replicas != 1 || o.bootstrap {
		t.Errorf("replicas %d bootstrap %v: the command line's must win", o.replicas, o.bootstrap)
	}
}

func TestCoordinatorConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	big := `{"coordinator": {"workers": ["` + strings.Repeat("w", 1<<20) + `"]}}`
	for _, tc := range []struct {
		name, content, want string
	}{
		{"unknown.json", `{"coordinator": {"id": "c1", "password": "hunter2"}}`, "invalid_settings: password (unknown_field)"},
		{"flat.json", `{"id": "c1"}`, "invalid_settings: id (unknown_field)"},
		{"type.json", `{"coordinator": {"replicas": "three"}}`, "invalid_settings: $.coordinator.replicas"},
		{"syntax.json", `{"coordinator": `, "invalid_settings: "},
		{"big.json", big, "invalid_settings: --config (file above 1048576 bytes)"},
		{"bound.json", `{"coordinator": {"max_running_jobs": 300}}`, "invalid_settings: coordinator.max_running_jobs (must be 1..256)"},
		{"both.json", `{"coordinator": {"id": "c1", "data_dir": "d", "workers": ["w1"], "bootstrap": true, "join": true}}`, "--join and --bootstrap exclude each other"},
	} {
		path := writeFile(t, dir, tc.name, tc.content)
		var errb bytes.Buffer
		code := run([]string{"coordinator", "--config", path, "--nats", "nats://127.0.0.1:1"}, io.Discard, &errb)
		if code != exitError || !strings.Contains(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q, want one line with %q", tc.name, code, errb.String(), tc.want)
		}
		if strings.Contains(errb.String(), "hunter2") {
			t.Errorf("%s: a config value leaked into the error: %q", tc.name, errb.String())
		}
	}
	var errb bytes.Buffer
	if code := run([]string{"worker", "--config", writeFile(t, dir, "w.json", `{"worker": {"id": "w1", "secret": "x"}}`)}, io.Discard, &errb); code != exitError ||
		!strings.Contains(errb.String(), "invalid_settings: secret (unknown_field)") {
		t.Errorf("worker config with an unknown key: exit %d, stderr %q", code, errb.String())
	}
}

// TestReadme_ResultTails runs the README's result tails sentence: each
// value it lists is the coordinator's (coordinator.ResultTailsValues, the
// default first), taken from the file key, the environment variable and
// the flag it names, in that order of precedence, and into
// coordinator.Config; a value it does not list is refused naming the key.
func TestReadme_ResultTails(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	at := strings.Index(text, "`coordinator.result_tails`, `--result-tails` or `$"+settings.EnvResultTails+"`")
	if at < 0 {
		t.Fatal("the README names no key, flag and variable of result tails")
	}
	sentence := text[at : at+strings.Index(text[at:], ". ")]
	var values []coordinator.ResultTails
	for _, span := range regexp.MustCompile("`([a-z_]+)` \\(").FindAllStringSubmatch(sentence, -1) {
		values = append(values, coordinator.ResultTails(span[1]))
	}
	if !reflect.DeepEqual(values, coordinator.ResultTailsValues) || !strings.Contains(sentence, "`completion` (the default") {
		t.Fatalf("the README lists %q, the coordinator takes %q (the default first)", values, coordinator.ResultTailsValues)
	}
	dir := t.TempDir()
	for i, v := range values {
		other := values[(i+1)%len(values)]
		file := writeFile(t, dir, "tails.json", `{"coordinator": {"id": "c1", "data_dir": "d", "workers": ["w1"], "result_tails": "`+string(v)+`"}}`)
		for _, c := range []struct {
			name, env string
			args      []string
			want      coordinator.ResultTails
		}{
			{"file", "", []string{"--config", file}, v},
			{"variable over file", string(other), []string{"--config", file}, other},
			{"flag over variable", string(other), []string{"--config", file, "--result-tails", string(v)}, v},
		} {
			t.Setenv(settings.EnvResultTails, c.env)
			o, err := parseCoordinator(t, c.args...)
			if err != nil {
				t.Fatalf("%s %s: %v", v, c.name, err)
			}
			cfg, err := o.config()
			if err != nil || cfg.ResultTails != c.want {
				t.Fatalf("%s %s: %q, %v; want %q", v, c.name, cfg.ResultTails, err, c.want)
			}
		}
	}
	// A bad value, from the variable, stops both commands that bind the
	// key, naming the key and never echoing the value (a variable may
	// hold anything, a pasted secret included).
	const bad = "lazy-s3cr3t-value"
	t.Setenv(settings.EnvResultTails, bad)
	for _, args := range [][]string{
		{"coordinator", "--id", "c1", "--data-dir", dir, "--workers", "w1", "--nats", "nats://127.0.0.1:1"},
		{"serve", "--data-dir", filepath.Join(dir, "serve"), "--port", "-1"},
	} {
		var errb bytes.Buffer
		code := run(args, io.Discard, &errb)
		if want := "invalid_settings: coordinator.result_tails (must be one of completion, first_read, never)"; code != exitError || !strings.Contains(errb.String(), want) {
			t.Fatalf("%s %s=%s: exit %d, stderr %q, want %q", args[0], settings.EnvResultTails, bad, code, errb.String(), want)
		}
		if strings.Contains(errb.String(), "s3cr3t") {
			t.Fatalf("%s echoed the variable's value: %q", args[0], errb.String())
		}
	}
}
