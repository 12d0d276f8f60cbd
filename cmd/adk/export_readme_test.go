package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/tracenode"
)

// TestReadme_ForwardingTraces runs the README's "Forwarding traces to
// Jaeger, Langfuse or Phoenix" commands through the built binary: adk
// serve on a free port, the three exporters against three real OTLP/HTTP
// backends on 127.0.0.1 standing in for Jaeger, Langfuse and Phoenix (at
// the same paths), and a local run whose traces go into the cluster. Every
// backend receives every sample's root span, Langfuse's with the basic
// auth header, and each exporter stops cleanly on SIGINT.
func TestReadme_ForwardingTraces(t *testing.T) {
	t.Parallel()
	cmds := readmeSectionCommands(t, "Forwarding traces to Jaeger, Langfuse or Phoenix")
	if len(cmds) != 5 {
		t.Fatalf("found %d commands, the test expects the section's 5", len(cmds))
	}
	jaeger, langfuse, phoenix := newOTLPSink(t), newOTLPSink(t), newOTLPSink(t)
	auth := base64.StdEncoding.EncodeToString([]byte("pk-lf-readme:sk-lf-readme"))
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(repoRoot(t), "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	var natsURL string
	var exporters []*exportProc
	samples := 0
	for _, line := range cmds {
		line = strings.ReplaceAll(line, "http://127.0.0.1:4318", jaeger.srv.URL)
		line = strings.ReplaceAll(line, "https://cloud.langfuse.com", langfuse.srv.URL)
		line = strings.ReplaceAll(line, "http://127.0.0.1:6006", phoenix.srv.URL)
		line = strings.ReplaceAll(line, "$LANGFUSE_AUTH", auth)
		if natsURL != "" {
			line = strings.ReplaceAll(line, "nats://127.0.0.1:4222", natsURL)
		}
		env, args := splitReadmeLine(line)
		switch args[0] {
		case "serve":
			localServeArgs(args, dir)
			natsURL = startServeBinary(t, dir, args)
		case "export":
			exporters = append(exporters, startExport(t, dir, env, args))
		default:
			r := runADK(t, dir, env, args...)
			if r.code != exitOK {
				t.Fatalf("README command %q: exit %d, stderr %q", line, r.code, r.stderr)
			}
			var doc struct {
				Cases []struct {
					Samples []json.RawMessage `json:"samples"`
				} `json:"cases"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
				t.Fatal(err)
			}
			for _, c := range doc.Cases {
				samples += len(c.Samples)
			}
		}
	}
	if samples == 0 || len(exporters) != 3 {
		t.Fatalf("%d samples, %d exporters", samples, len(exporters))
	}
	for name, sink := range map[string]*otlpSink{"jaeger": jaeger, "langfuse": langfuse, "phoenix": phoenix} {
		testutil.WaitFor(t, 60*time.Second, name+" receiving every sample's trace", func() bool {
			spans, _, _ := sink.snapshot()
			roots := 0
			for _, s := range spans {
				if s.Name() == "gen_ai.evaluate" {
					roots++
				}
			}
			return roots >= samples
		})
	}
	langfuse.mu.Lock()
	got := langfuse.headers[0].Get("Authorization")
	langfuse.mu.Unlock()
	if got != "Basic "+auth {
		t.Fatal("langfuse did not get the basic auth header")
	}
	for _, e := range exporters {
		out := e.stop(t)
		if !strings.Contains(out, "spans forwarded, 0 dropped") || strings.Contains(out, auth) {
			t.Fatalf("exporter output %q", out)
		}
	}
}

// exportProc is a running `adk export otlp`.
type exportProc struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	errb   bytes.Buffer
	exited chan error
	done   chan struct{} // closed once the process is reaped
}

func startExport(t *testing.T, dir string, env, args []string) *exportProc {
	t.Helper()
	p := &exportProc{cmd: exec.Command(adkBinary(t), args...), exited: make(chan error, 1), done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = &p.errb
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "forwarding ADK_SIGNALS") {
				started <- true
			}
			p.out.WriteString(sc.Text() + "\n")
		}
		close(started)
		p.exited <- p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case ok := <-started:
		if !ok {
			t.Fatalf("export exited: %s", p.errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("export not started: %s", p.errb.String())
	}
	return p
}

// stop sends SIGINT and returns stdout once the process has exited 0.
func (p *exportProc) stop(t *testing.T) string {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("export exit: %v, stderr %s", err, p.errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("export did not stop on SIGINT")
	}
	return p.out.String()
}

// Bad input fails before anything connects, naming the flag or variable
// and never echoing a value.
func TestExportOTLP_BadInputNamesTheFlagOrVariable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runADK(t, dir, nil, "export", "otlp", "--nats", "nats://127.0.0.1:1", "--endpoint", "http://user:hunter2@127.0.0.1:4318")
	oneErrorLine(t, r, codeInvalidExportEndpoint+": --endpoint")
	if strings.Contains(r.stderr, "hunter2") {
		t.Fatal("the endpoint's password was echoed")
	}
	r = runADK(t, dir, []string{"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Basic hunter2,broken"}, "export", "otlp", "--nats", "nats://127.0.0.1:1", "--endpoint", "http://127.0.0.1:4318")
	oneErrorLine(t, r, "invalid_deployment_env: OTEL_EXPORTER_OTLP_HEADERS")
	if strings.Contains(r.stderr, "hunter2") {
		t.Fatal("a header value was echoed")
	}
	r = runADK(t, dir, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=", "ADK_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="}, "export", "otlp", "--nats", "nats://127.0.0.1:1")
	oneErrorLine(t, r, codeMissingRequired+": --endpoint")
}

// TestReadme_TracesFromAnySDK runs the README's "Traces from any
// OpenTelemetry SDK" commands: adk serve with the OTLP receiver on a free
// port, a local run exporting its spans to it under a bearer token and a
// service name, and the query of one of its traces, whose tree shows the
// service name and the sample's eval ids.
func TestReadme_TracesFromAnySDK(t *testing.T) {
	t.Parallel()
	cmds := readmeSectionCommands(t, "Traces from any OpenTelemetry SDK")
	if len(cmds) != 3 {
		t.Fatalf("found %d commands, the test expects the section's 3", len(cmds))
	}
	dir := t.TempDir()
	const token = "tok-readme-sdk"
	if err := os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte(tracenode.HashToken(token)+" team\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(repoRoot(t), "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	var natsURL, otlpOrigin, traceID string
	for _, line := range cmds {
		line = strings.ReplaceAll(line, "$ADK_TRACE_TOKEN", token)
		if natsURL != "" {
			line = strings.ReplaceAll(line, "nats://127.0.0.1:4222", natsURL)
			line = strings.ReplaceAll(line, "http://127.0.0.1:4318", otlpOrigin)
		}
		line = strings.ReplaceAll(line, "TRACE_ID", traceID)
		env, args := splitReadmeLine(line)
		switch {
		case args[0] == "serve":
			localServeArgs(args, dir)
			for i := 1; i < len(args); i++ {
				if args[i-1] == "--otlp-addr" {
					args[i] = "127.0.0.1:0"
				}
			}
			var lines []string
			natsURL, lines = startServeBinaryLines(t, dir, args)
			for _, l := range lines {
				if rest, ok := strings.CutPrefix(l, "adk serve: otlp "); ok {
					otlpOrigin, _, _ = strings.Cut(rest, "/v1/traces")
				}
			}
			if otlpOrigin == "" {
				t.Fatalf("serve printed no otlp address: %q", lines)
			}
		case args[0] == "eval":
			r := runADK(t, dir, env, args...)
			if r.code != exitOK {
				t.Fatalf("README command %q: exit %d, stderr %q", line, r.code, r.stderr)
			}
			var doc struct {
				Cases []struct {
					Samples []struct {
						TraceID string `json:"trace_id"`
					} `json:"samples"`
				} `json:"cases"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Cases) == 0 || len(doc.Cases[0].Samples) == 0 {
				t.Fatalf("result: %v %s", err, r.stdout)
			}
			traceID = doc.Cases[0].Samples[0].TraceID
		default:
			var r execResult
			testutil.WaitFor(t, 30*time.Second, "the trace's spans in the store", func() bool {
				r = runADK(t, dir, env, args...)
				return r.code == exitOK && strings.Contains(r.stdout, "gen_ai.evaluate") && strings.Contains(r.stdout, "gen_ai.invoke_agent")
			})
			for _, want := range []string{"service.name=travel-evals", "adk.eval.case_id="} {
				if !strings.Contains(r.stdout, want) {
					t.Fatalf("tree lacks %s:\n%s", want, r.stdout)
				}
			}
		}
	}
}
