package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/evalengine"
)

// TestClusterReadme_DeveloperHTTPAPI runs the README's "Developer HTTP
// API" block in order: the export line sets the environment, `adk serve
// ... &` starts the built binary (on free ports, in a scratch data dir),
// and every curl and adk line runs through sh and must exit 0 (a retried
// submission with the same Idempotency-Key prints the first one's job
// id, or its diff fails). Then the
// report the README fetched over HTTP is checked byte for byte against the
// Go client's and `adk eval report JOB_ID --nats`.
func TestClusterReadme_DeveloperHTTPAPI(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "\n## Developer HTTP API\n")
	if start < 0 {
		t.Fatal(`README has no "## Developer HTTP API" section`)
	}
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	if block == nil {
		t.Fatal("no sh block")
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	bin := adkBinary(t)
	env := os.Environ()
	var serve *exec.Cmd
	natsURL := ""
	defer func() {
		if serve != nil {
			_ = serve.Process.Signal(syscall.SIGTERM)
			_ = serve.Wait()
		}
	}()
	sh := func(line string) string {
		t.Helper()
		line = strings.ReplaceAll(line, "./bin/adk ", bin+" ")
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("README line %q: %v\nstdout %s\nstderr %s", line, err, out.String(), errb.String())
		}
		return out.String()
	}
	var reportHTTP string
	curls, retried := 0, 0
	for _, line := range strings.Split(block[1], "\n") {
		switch {
		case strings.HasPrefix(line, "export "):
			env = append(env, strings.Fields(strings.TrimPrefix(line, "export "))...)
		case strings.HasPrefix(line, "./bin/adk serve "):
			args := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), "&"))[1:]
			for i := range args {
				switch {
				case args[i] == "--http-addr":
					args[i+1] = "127.0.0.1:0"
				case args[i] == "--data-dir":
					args[i+1] = filepath.Join(dir, "data")
				case args[i] == "--port":
					args[i+1] = "-1"
				}
			}
			serve = exec.Command(bin, args...)
			serve.Dir, serve.Env = dir, env
			stdout, err := serve.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var serveErr bytes.Buffer
			serve.Stderr = &serveErr
			defer func() {
				if t.Failed() {
					t.Logf("adk serve stderr: %s", serveErr.String())
				}
			}()
			if err := serve.Start(); err != nil {
				t.Fatal(err)
			}
			api := ""
			sc := bufio.NewScanner(stdout)
			for api == "" && sc.Scan() {
				l := sc.Text()
				if u, ok := strings.CutPrefix(l, "adk serve: api "); ok {
					api = strings.TrimSuffix(strings.Fields(u)[0], "/dev/v1/")
				}
				if u, ok := strings.CutPrefix(l, "adk serve: nats "); ok {
					natsURL = strings.TrimSuffix(strings.Fields(u)[0], ",")
				}
			}
			if api == "" || natsURL == "" {
				t.Fatalf("adk serve printed no API (%q) or NATS (%q) address", api, natsURL)
			}
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			env = append(env, "API="+api, "NATS="+natsURL)
		case strings.HasPrefix(line, "curl ") || strings.HasPrefix(line, "./bin/adk ") || strings.HasPrefix(line, "echo "):
			out := sh(line)
			if strings.HasPrefix(line, "curl ") {
				curls++
			}
			// The retried submission (same Idempotency-Key, same body)
			// answers the first one's job: its line diffs the ids.
			if strings.Contains(line, "idempotency-key: ") && strings.HasSuffix(line, "| diff - job") {
				retried++
			}
			if strings.Contains(line, "format=markdown") {
				reportHTTP = out
			}
			// Both baseline listings (HTTP and CLI) show the one the
			// README named, without its result; prune kept it.
			if strings.Contains(line, "baselines?") || strings.Contains(line, "baselines list") {
				if !regexp.MustCompile(`"name": ?"main"`).MatchString(out) || strings.Contains(out, `"result"`) {
					t.Fatalf("%q printed %s", line, out)
				}
			}
			// The cluster view (HTTP and CLI) has the store node's own
			// counters beside its consumer's lag.
			if (strings.Contains(line, "/dev/v1/cluster") || strings.Contains(line, "cluster status")) &&
				(!strings.Contains(out, `"capacity_evictions"`) || !strings.Contains(out, `"stream_gap_messages"`)) {
				t.Fatalf("%q printed no store node counters: %s", line, out)
			}
			// One case with its samples.
			if strings.Contains(line, "/cases/0") && (!strings.Contains(out, `"case_index":0`) || !strings.Contains(out, `"samples":[{`)) {
				t.Fatalf("%q printed no case with its samples: %.300s", line, out)
			}
			if strings.Contains(line, "/prune") && !regexp.MustCompile(`"jobs_deleted": ?0\b`).MatchString(out) {
				t.Fatalf("prune of records older than 720h deleted the README's: %s", out)
			}
		}
	}
	if curls < 8 || retried != 1 || reportHTTP == "" || natsURL == "" {
		t.Fatalf("%d curl lines, %d retried submissions, report %d bytes, nats %q", curls, retried, len(reportHTTP), natsURL)
	}
	job, err := os.ReadFile(filepath.Join(dir, "job"))
	if err != nil {
		t.Fatal(err)
	}
	jobID := strings.TrimSpace(string(job))
	// Report parity: HTTP (above), the Go client, and the CLI over NATS.
	cli := sh(bin + " eval report " + jobID + " --nats " + natsURL + " --scope alice --format markdown")
	nc, err := (&natsFlags{url: natsURL}).connect("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	goc, err := devapi.JobReport(ctx, client.New(nc, 0), "alice", jobID, evalengine.FormatMarkdown, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if reportHTTP != string(goc) || cli != string(goc) {
		t.Fatalf("reports differ:\n--- http\n%s\n--- go\n%s\n--- cli\n%s", reportHTTP, goc, cli)
	}
}
