package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/internal/testutil"
)

// TestClusterWorker_WarnsWhileSignalsFail runs `adk coordinator` and
// `adk worker` from the built binary on a NATS server whose ADK_SIGNALS
// stream the test deletes after the leader created it: a job still
// passes, and the worker logs one warning naming the stream, the count
// and the reason, with no signal content and no principal; a second job's
// losses are logged after the settings file's log.signal_warn_interval
// (1s here, not the default 30s); once the stream exists again, a later
// job's signals are delivered and the worker logs that, and nothing more
// is lost.
func TestClusterWorker_WarnsWhileSignalsFail(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	set := filepath.Join(root, "examples", "travel", "evalset.json")
	criteria := filepath.Join(root, "examples", "travel", "criteria.json")
	agent := filepath.Join(root, "examples", "travel", "AGENT.json")
	url := startTestNATS(t)
	procs := newFleet(t)
	procs.start("c1", "coordinator", "--id", "c1", "--data-dir", filepath.Join(dir, "c1"), "--raft-addr", "127.0.0.1:0",
		"--nats", url, "--bootstrap", "--workers", "w1", "--log-level", "error")
	cfg := writeFile(t, dir, "adk.json", `{"log": {"signal_warn_interval": "1s"}}`)
	w1 := procs.start("w1", "worker", "--id", "w1", "--nats", url, "--capacity", "2", "--agent", "travel="+agent, "--config", cfg)

	nc, err := bus.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	testutil.WaitFor(t, 30*time.Second, "the leader's "+bus.SignalStreamName, func() bool {
		_, err := js.Stream(ctx, bus.SignalStreamName)
		return err == nil
	})
	if err := js.DeleteStream(ctx, bus.SignalStreamName); err != nil {
		t.Fatal(err)
	}

	const scope = "team-principal-x"
	evalArgs := []string{"eval", "run", "--cluster", url, "--scope", scope, "--agent", "travel", "--eval-set", set, "--criteria", criteria, "--format", "markdown"}
	if r := runADK(t, dir, nil, evalArgs...); r.code != exitOK {
		t.Fatalf("job without a stream: exit %d, stderr %q", r.code, r.stderr)
	}
	warning := ""
	testutil.WaitFor(t, 20*time.Second, "the worker's warning", func() bool {
		for _, l := range strings.Split(w1.stderr.String(), "\n") {
			if strings.Contains(l, "signals not delivered") {
				warning = l
			}
		}
		return warning != ""
	})
	for _, want := range []string{"level=WARN", "adk worker w1: signals not delivered", "stream=ADK_SIGNALS", "lost=", "reason=not_acknowledged", "hint="} {
		if !strings.Contains(warning, want) {
			t.Errorf("warning %q lacks %q", warning, want)
		}
	}
	for _, never := range []string{scope, "Pune", "weather"} {
		if strings.Contains(w1.stderr.String(), never) {
			t.Errorf("the worker's log names %q: %s", never, w1.stderr.String())
		}
	}

	// The second job loses its signals after the first line: they are
	// logged one interval later, with the time since that line.
	if r := runADK(t, dir, nil, evalArgs...); r.code != exitOK {
		t.Fatalf("second job without a stream: exit %d, stderr %q", r.code, r.stderr)
	}
	testutil.WaitFor(t, 10*time.Second, "the worker's second warning, one signal_warn_interval later", func() bool {
		return strings.Contains(w1.stderr.String(), "adk worker w1: signals not delivered") && strings.Contains(w1.stderr.String(), " since=")
	})

	if _, err := bus.EnsureSignalStream(ctx, js, bus.SignalStreamConfig{}); err != nil {
		t.Fatal(err)
	}
	// The second job's last losses may still be counted once the stream
	// is back (its publishes retry), in the same one-second check as the
	// next job's deliveries: the watch cannot order those and waits for
	// a delivery after the loss. So jobs run until one delivers after
	// every loss, at most three.
	recovered := func() bool { return strings.Contains(w1.stderr.String(), "adk worker w1: signals delivered again") }
	for job := 1; ; job++ {
		if r := runADK(t, dir, nil, evalArgs...); r.code != exitOK {
			t.Fatalf("job %d with the stream again: exit %d, stderr %q", job, r.code, r.stderr)
		}
		if waitUntil(15*time.Second, recovered) {
			break
		}
		if job == 3 {
			t.Fatalf("no recovery line after %d jobs with the stream again", job)
		}
	}
	log := w1.stderr.String()
	if after := log[strings.Index(log, "signals delivered again"):]; strings.Contains(after, "signals not delivered") {
		t.Errorf("a warning after the recovery (the third job lost nothing):\n%s", log)
	}
	t.Logf("the worker's log:\n%s", w1.stderr.String())
	st, err := js.Stream(ctx, bus.SignalStreamName)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs == 0 {
		t.Fatalf("the second job's signals are not in the stream: %+v %v", info, err)
	}
}

// waitUntil polls cond until it holds (true) or timeout passes (false).
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
