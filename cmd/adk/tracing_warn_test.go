package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
	"github.com/fadcedab/adk/internal/testutil"
)

// TestEvalRun_TraceToWarnsWhileSignalsFail runs `adk eval run --trace-to`
// from the built binary against an HTTP agent the test answers turn by
// turn, and a NATS server whose ADK_SIGNALS stream the test deletes after
// the first turn: while its signals are lost the run warns (at once,
// naming the stream, the count and the reason), in the settings file's
// log format; once the stream exists again it says, within a turn or two,
// that its signals are delivered again; its exit line still counts the
// losses; and nothing it prints carries the token in the --trace-to URL,
// the principal, or an agent's answer.
func TestEvalRun_TraceToWarnsWhileSignalsFail(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t, bus.ServerConfig{Port: -1})
	srv.SignalStream(t, bus.SignalStreamConfig{})
	const token, scope, answer = "trace-to-token-0123456789", "team-principal-y", "answer-text-42"
	target := strings.Replace(srv.ClientURL(), "nats://", "nats://"+token+"@", 1)

	// The agent hands each turn to the test and answers once told to; after
	// release, at once.
	turns := make(chan chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := make(chan struct{})
		select {
		case turns <- ok:
			select {
			case <-ok:
			case <-release:
			case <-r.Context().Done():
				return
			}
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"output":"`+answer+`"}`)
	}))
	t.Cleanup(agent.Close)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // runs first: no handler stays blocked

	dir := t.TempDir()
	const cases = 16
	var cs []string
	for i := range cases {
		cs = append(cs, fmt.Sprintf(`{"id":"c%02d","input":"q%02d","expected":%q}`, i, i, answer))
	}
	set := writeFile(t, dir, "set.json", `{"id":"warn","version":"1","cases":[`+strings.Join(cs, ",")+`]}`)
	cfg := writeFile(t, dir, "adk.json", `{"log": {"signal_warn_interval": "1s"}}`)
	run := newFleet(t).start("eval", "eval", "run", "--agent-url", agent.URL, "--eval-set", set, "--concurrency", "1",
		"--trace-to", target, "--scope", scope, "--settings", cfg, "--format", "markdown", "--trace-drain", "2s")

	answered := 0
	next := func() chan struct{} {
		t.Helper()
		select {
		case ok := <-turns:
			answered++
			return ok
		case <-run.done:
			t.Fatalf("the run ended after %d turns: %v\nstderr:\n%s", answered, run.err, run.stderr.String())
		case <-time.After(30 * time.Second):
			t.Fatalf("no turn %d within 30 s; stderr:\n%s", answered+1, run.stderr.String())
		}
		return nil
	}
	// lines returns the run's log lines about its signals.
	lines := func() []string {
		var out []string
		for _, l := range strings.Split(run.stderr.String(), "\n") {
			if strings.Contains(l, "adk eval run --trace-to: signals ") {
				out = append(out, l)
			}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	delivered := func() uint64 {
		t.Helper()
		st, err := srv.JS.Stream(ctx, bus.SignalStreamName)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}

	// The first turn's signals find no stream; the second turn waits for
	// the warning.
	first := next()
	if err := srv.JS.DeleteStream(ctx, bus.SignalStreamName); err != nil {
		t.Fatal(err)
	}
	close(first)
	held := next()
	testutil.WaitFor(t, 30*time.Second, "the warning while signals are lost", func() bool { return len(lines()) > 0 })
	warning := lines()[0]
	for _, want := range []string{"level=WARN", "adk eval run --trace-to: signals not delivered", "stream=ADK_SIGNALS", "lost=",
		"reason=not_acknowledged", "hint="} {
		if !strings.Contains(warning, want) {
			t.Errorf("warning %q lacks %q", warning, want)
		}
	}

	// With the stream back, each turn's signals are delivered; after
	// each delivery the watch logs a line at its next check: the losses
	// it held back, or the recovery.
	srv.SignalStream(t, bus.SignalStreamConfig{})
	ok := held
	for {
		before, seen := delivered(), len(lines())
		close(ok)
		testutil.WaitFor(t, 30*time.Second, "the turn's signals in the stream", func() bool { return delivered() > before })
		testutil.WaitFor(t, 30*time.Second, "the watch's next line", func() bool { return len(lines()) > seen })
		if l := lines(); strings.Contains(l[len(l)-1], "signals delivered again") {
			break
		}
		if answered == cases {
			t.Fatalf("no recovery line after %d turns:\n%s", answered, run.stderr.String())
		}
		ok = next()
	}
	releaseOnce.Do(func() { close(release) })
	select {
	case <-run.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the run did not end; stderr:\n%s", run.stderr.String())
	}
	out, errOut := run.stdout.String(), run.stderr.String()
	if run.err != nil || !strings.Contains(out, "PASS") {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", run.err, out, errOut)
	}
	if !strings.Contains(errOut, "signals not published to --trace-to") {
		t.Errorf("no exit line counting the losses:\n%s", errOut)
	}
	for _, never := range []string{token, scope, answer} {
		if strings.Contains(errOut, never) {
			t.Errorf("stderr carries %q:\n%s", never, errOut)
		}
	}
	t.Logf("stderr:\n%s", errOut)
}

// TestEvalRun_SettingsFile: --settings is checked before anything runs,
// as every command's settings file is: a bad key and a file that cannot
// be read are one typed error naming the key or the flag.
func TestEvalRun_SettingsFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ file, want string }{
		{writeFile(t, dir, "fast.json", `{"log": {"signal_warn_interval": "10ms"}}`), "adk: invalid_settings: log.signal_warn_interval (must be 1s..1h0m0s)"},
		{writeFile(t, dir, "soon.json", `{"log": {"signal_warn_interval": "soon"}}`), "adk: invalid_settings: $.log.signal_warn_interval"},
		{filepath.Join(dir, "none.json"), "adk: invalid_settings: --settings (cannot read the file)"},
	} {
		var out, errb bytes.Buffer
		code := run([]string{"eval", "run", "--config", travelAgent, "--eval-set", travelSet, "--trace-to", "nats://127.0.0.1:1",
			"--settings", tc.file}, &out, &errb)
		if code != exitError || out.Len() != 0 || !strings.HasPrefix(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q, want %q", tc.file, code, errb.String(), tc.want)
		}
	}
}
