package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fadcedab/adk/store/tracenode"
)

// readmeSectionCommands returns the ./bin/adk lines (with any leading
// VAR=value words) of the ```sh blocks of a README section.
func readmeSectionCommands(t *testing.T, title string) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "\n## "+title+"\n")
	if start < 0 {
		t.Fatalf("README has no %q section", title)
	}
	section := string(readme)[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var out []string
	for _, b := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(b[1], "\n") {
			if strings.Contains(line, "./bin/adk ") {
				out = append(out, strings.TrimSpace(line))
			}
		}
	}
	return out
}

// TestReadme_TracingEveryRun runs the README's "Tracing every run"
// commands through the built binary, in order: the two local runs export
// to a real OTLP/HTTP receiver on 127.0.0.1 (instead of :4318), `adk serve`
// starts on a free port with a temp data dir and a tokens file, and the
// cluster eval's job is then read back by job and as a tree, then by case
// and sample (JOB_ID and SAMPLE_ID are taken from the outputs before).
func TestReadme_TracingEveryRun(t *testing.T) {
	t.Parallel()
	cmds := readmeSectionCommands(t, "Tracing every run")
	if len(cmds) != 8 {
		t.Fatalf("found %d commands, the test expects the section's 8", len(cmds))
	}
	sink := newOTLPSink(t)
	dir := t.TempDir()
	const token = "tok-readme-team"
	if err := os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte(tracenode.HashToken(token)+" team\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := repoRoot(t)
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	var natsURL, jobID, sampleID string
	for _, line := range cmds {
		line = strings.ReplaceAll(line, "http://127.0.0.1:4318", sink.srv.URL)
		line = strings.ReplaceAll(line, "$ADK_TRACE_TOKEN", token)
		if natsURL != "" {
			line = strings.ReplaceAll(line, "nats://127.0.0.1:4222", natsURL)
		}
		line = strings.ReplaceAll(line, "JOB_ID", jobID)
		line = strings.ReplaceAll(line, "SAMPLE_ID", sampleID)
		env, args := splitReadmeLine(line)
		if args[0] == "serve" {
			localServeArgs(args, dir)
			natsURL = startServeBinary(t, dir, args)
			continue
		}
		r := runADK(t, dir, env, args...)
		if r.code != exitOK {
			t.Fatalf("README command %q: exit %d, stderr %q", line, r.code, r.stderr)
		}
		switch {
		case args[0] == "eval" && args[1] == "run" && strings.Contains(line, "--cluster"):
			var doc struct {
				Cases []struct {
					CaseID  string `json:"case_id"`
					Samples []struct {
						SampleID string `json:"sample_id"`
					} `json:"samples"`
				} `json:"cases"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
				t.Fatal(err)
			}
			for _, c := range doc.Cases {
				if c.CaseID == "weather-pune" {
					sampleID = c.Samples[0].SampleID
				}
			}
		case args[0] == "eval" && strings.Contains(line, "--trace-to"):
			// The settings file's log section is taken; a cluster that
			// takes every signal is never warned about.
			if strings.Contains(r.stderr, "signals not") {
				t.Fatalf("--trace-to to a working cluster: %s", r.stderr)
			}
		case args[0] == "eval" && args[1] == "jobs":
			var page struct {
				Items []struct {
					JobID string `json:"job_id"`
				} `json:"items"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Items) != 1 {
				t.Fatalf("jobs: %v %s", err, r.stdout)
			}
			jobID = page.Items[0].JobID
		case args[0] == "trace" && strings.Contains(line, "tree"):
			if !strings.Contains(r.stdout, "gen_ai.evaluate") || !strings.Contains(r.stdout, "gen_ai.execute_tool") {
				// The store applies asynchronously: wait for the spans.
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) && !strings.Contains(r.stdout, "gen_ai.execute_tool") {
					r = runADK(t, dir, env, args...)
				}
				if !strings.Contains(r.stdout, "gen_ai.execute_tool") {
					t.Fatalf("tree: %s", r.stdout)
				}
			}
		case args[0] == "trace":
			var page tracePage
			if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Events) == 0 {
				t.Fatalf("query by case and sample: %v %s", err, r.stdout)
			}
		}
	}
	if spans, _, _ := sink.snapshot(); len(spans) == 0 {
		t.Fatal("the local runs exported no span")
	}
}

// startServeBinary starts `adk serve` from the built binary and returns
// its NATS URL once its eval coordinator is up; the test's cleanup stops
// it with SIGTERM.
func startServeBinary(t *testing.T, dir string, args []string) string {
	t.Helper()
	url, _ := startServeBinaryLines(t, dir, args)
	return url
}

// startServeBinaryLines is startServeBinary that also returns what serve
// printed until it was ready.
func startServeBinaryLines(t *testing.T, dir string, args []string) (string, []string) {
	t.Helper()
	var seen []string
	serve := exec.Command(adkBinary(t), args...)
	serve.Dir = dir
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var serveErr bytes.Buffer
	serve.Stderr = &serveErr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- serve.Wait()
	}()
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = serve.Process.Kill()
			<-exited
		}
	})
	var url string
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve exited early: %s", serveErr.String())
			}
			seen = append(seen, l)
			if rest, found := strings.CutPrefix(l, "adk serve: nats "); found {
				url, _, _ = strings.Cut(rest, ",")
			}
			if url != "" && strings.HasPrefix(l, "adk serve: eval coordinator") {
				go func() {
					for range lines {
					}
				}()
				return url, seen
			}
		case <-deadline:
			t.Fatalf("serve not ready: %s", serveErr.String())
		}
	}
}

// splitReadmeLine splits a README command line ("A=1 ./bin/adk eval run
// ... &") into its environment assignments and the adk arguments.
func splitReadmeLine(line string) (env, args []string) {
	for _, w := range strings.Fields(strings.TrimSuffix(line, "&")) {
		switch {
		case args == nil && w != "./bin/adk" && strings.Contains(w, "="):
			env = append(env, w)
		case w == "./bin/adk":
			args = []string{}
		default:
			args = append(args, w)
		}
	}
	return env, args
}

// localServeArgs points a README `adk serve` line at the test: an
// ephemeral NATS port and a data directory under dir.
func localServeArgs(args []string, dir string) {
	for i := 1; i < len(args); i++ {
		switch args[i-1] {
		case "--port":
			args[i] = "-1"
		case "--data-dir":
			args[i] = filepath.Join(dir, "data")
		}
	}
}
