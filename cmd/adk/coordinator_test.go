package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/internal/testutil"
)

// TestClusterCoordinatorWorkerCommands runs `adk coordinator` and `adk
// worker` against an external NATS server, evaluates the travel example
// on them with `adk eval run --cluster`, and stops both cleanly.
func TestClusterCoordinatorWorkerCommands(t *testing.T) {
	dir := t.TempDir()
	url := startTestNATS(t)

	start := func(name string, args ...string) func() {
		cmd := newRootCmd(io.Discard, io.Discard)
		cmd.SetArgs(args)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(ctx) }()
		return func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("%s did not stop", name)
			}
		}
	}
	stopCoord := start("coordinator", "coordinator", "--id", "c1", "--data-dir", filepath.Join(dir, "c1"), "--raft-addr", "127.0.0.1:0",
		"--nats", url, "--bootstrap", "--workers", "w1")
	defer stopCoord()
	stopWorker := start("worker", "worker", "--id", "w1", "--nats", url, "--capacity", "2", "--agent", "travel="+travelAgent)
	defer stopWorker()

	cl, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	testutil.WaitFor(t, 20*time.Second, "the coordinator service", func() bool {
		_, err := client.New(cl, time.Second).Capabilities(context.Background())
		return err == nil
	})

	local := runCLI(t, exitOK, "eval", "run", "--config", travelAgent, "--eval-set", travelSet, "--criteria", travelCriteria, "--format", "markdown")
	remote := runCLI(t, exitOK, "eval", "run", "--cluster", url, "--agent", "travel", "--eval-set", travelSet, "--criteria", travelCriteria, "--format", "markdown")
	if remote != local {
		t.Fatalf("cluster report differs from the local one:\n%s", remote)
	}
}

func TestWorkerAndCoordinatorFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--nats", "nats://127.0.0.1:1", "--agent", "a=x.json"}, "missing_required_options: --id"},
		{[]string{"worker", "--id", "w1", "--nats", "nats://127.0.0.1:1"}, "missing_required_options: --agent"},
		{[]string{"worker", "--id", "w1", "--nats", "nats://127.0.0.1:1", "--agent", "nopath"}, "is not NAME=AGENT.json"},
		{[]string{"worker", "--id", "w1", "--nats", "nats://127.0.0.1:1", "--agent", "a=x.json", "--capacity", "0"}, "invalid_settings: worker.capacity (must be 1..4096)"},
		{[]string{"coordinator", "--nats", "nats://127.0.0.1:1"}, "missing_required_options: --id,--data-dir,--workers"},
		{[]string{"coordinator", "--id", "c1", "--data-dir", "d", "--workers", "w1", "--peers", "c1=127.0.0.1:1", "--nats", "nats://127.0.0.1:1"}, "--peers needs --bootstrap"},
		{[]string{"eval", "run", "--cluster", "nats://127.0.0.1:1", "--config", "a.json", "--eval-set", "s.json"}, "--nats runs on a cluster, which takes --agent NAME"},
		{[]string{"eval", "run", "--cluster", "nats://127.0.0.1:1", "--agent", "travel", "--agent-url", "http://127.0.0.1:1/", "--eval-set", "s.json"}, "conflicting_options: --agent-url,--agent"},
		{[]string{"eval", "run", "--agent", "travel", "--eval-set", "s.json"}, "eval_file_unreadable: eval_set"},
		{[]string{"eval", "status", "j1"}, "missing_required_options: --nats"},
	} {
		var errb bytes.Buffer
		if code := run(tc.args, io.Discard, &errb); code != exitError || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
