package main

import (
	"bytes"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fadcedab/adk/coordinator"
)

// TestCoordinatorConfigFile: the file fills what the flags leave at their
// defaults, a flag given on the command line wins, a relative data_dir is
// relative to the file, and the result is the coordinator's Config.
func TestCoordinatorConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "coord.json", `{"id": "c1", "nats": "nats://n1:4222", "data_dir": "data", "raft_addr": "10.0.0.1:7100",
		"bootstrap": true, "peers": ["c1=10.0.0.1:7100", "c2=10.0.0.2:7100"], "workers": ["w1", "w2"],
		"coordinators": ["c3"], "replicas": 3, "log_level": "info"}`)
	o := coordinatorOptions{configFile: path, id: "c2", raftAddr: "127.0.0.1:7100", replicas: 1, logLevel: "warn", workers: []string{"w9"}}
	flags := map[string]bool{"id": true, "workers": true}
	if err := o.resolve(func(f string) bool { return flags[f] }); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	want := coordinator.Config{ID: "c2", DataDir: filepath.Join(dir, "data"), RaftAddr: "10.0.0.1:7100", Bootstrap: true,
		Peers: []coordinator.Peer{{ID: "c1", Addr: "10.0.0.1:7100"}, {ID: "c2", Addr: "10.0.0.2:7100"}}, Workers: []string{"w9"},
		Coordinators: []string{"c3"}}
	want.Streams.Replicas = 3
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config\n got %+v\nwant %+v", cfg, want)
	}
	if o.nats.url != "nats://n1:4222" || o.logLevel != "info" {
		t.Errorf("nats %q log level %q from the file", o.nats.url, o.logLevel)
	}

	// A flag set to its default value on the command line still wins.
	o = coordinatorOptions{configFile: path, replicas: 1}
	if err := o.resolve(func(f string) bool { return f == "replicas" || f == "bootstrap" }); err != nil {
		t.Fatal(err)
	}
	if o.replicas != 1 || o.bootstrap {
		t.Errorf("replicas %d bootstrap %v: the command line's must win", o.replicas, o.bootstrap)
	}
}

func TestCoordinatorConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	big := `{"workers": ["` + strings.Repeat("w", 1<<20) + `"]}`
	for _, tc := range []struct {
		name, content, want string
	}{
		{"unknown.json", `{"id": "c1", "password": "hunter2"}`, "invalid_coordinator_config: unknown_field (password)"},
		{"type.json", `{"replicas": "three"}`, "invalid_coordinator_config: "},
		{"syntax.json", `{"id": `, "invalid_coordinator_config: "},
		{"big.json", big, "file_too_large"},
		{"both.json", `{"id": "c1", "data_dir": "d", "workers": ["w1"], "bootstrap": true, "join": true}`, "--join and --bootstrap exclude each other"},
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
	if code := run([]string{"worker", "--config", writeFile(t, dir, "w.json", `{"id": "w1", "secret": "x"}`)}, io.Discard, &errb); code != exitError ||
		!strings.Contains(errb.String(), "invalid_worker_config: unknown_field (secret)") {
		t.Errorf("worker config with an unknown key: exit %d, stderr %q", code, errb.String())
	}
}
