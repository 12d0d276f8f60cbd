package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/fadcedab/adk/store/tracenode"
)

// TestReadme_APIGatewayLogs runs the README's `adk api` logging line (in
// "Developer HTTP API", in a block of its own: the cluster README test
// runs only that section's first block) through the built binary
// against a NATS server on a free port, with a settings file asking for
// text logs at error level: the flags win, so a refused request and a
// health check come out as JSON lines at debug, naming the route template
// and never the job id, the scope or the token.
func TestReadme_APIGatewayLogs(t *testing.T) {
	t.Parallel()
	line := ""
	for _, l := range readmeSectionCommands(t, "Developer HTTP API") {
		if strings.HasPrefix(l, "./bin/adk api ") {
			line = l
		}
	}
	if line == "" {
		t.Fatal(`the "Developer HTTP API" section has no adk api line`)
	}

	dir := t.TempDir()
	natsURL := startTestNATS(t)
	const token = "readme-gateway-token-0123"
	writeFile(t, dir, "tokens", tracenode.HashToken(token)+" alice\n")
	writeFile(t, dir, "adk.json", `{"log": {"level": "error", "format": "text"}}`)
	args := strings.Fields(strings.ReplaceAll(line, "$NATS", natsURL))[1:]
	for i := range args {
		if args[i] == "--http-addr" {
			args[i+1] = "127.0.0.1:0"
		}
	}
	cmd := exec.Command(adkBinary(t), append(args, "--config", "adk.json")...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	base := ""
	sc := bufio.NewScanner(stdout)
	for base == "" && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "adk api: "); ok && strings.Contains(u, "/dev/v1/") {
			base = strings.TrimSuffix(strings.Fields(u)[0], "/dev/v1/")
		}
	}
	if base == "" {
		t.Fatalf("adk api printed no address; stderr %s", stderr.String())
	}
	const job = "eval-0123456789abcdef0123456789abcdef"
	req, _ := http.NewRequest("GET", base+"/dev/v1/evaluation/jobs/"+job+"?scope=secret-scope", nil)
	req.Header.Set("authorization", "Bearer "+token)
	for _, r := range []*http.Request{req, mustRequest(t, base+"/healthz")} {
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// SIGTERM ends the gateway cleanly; its log is then complete.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("adk api: %v; stderr %s", err, stderr.String())
	}
	exited = true
	logs := stderr.String()
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec struct{ Level, Msg, Route, Code string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not a JSON log line (the flag should win over the file's text): %q", l)
		}
		if rec.Msg == "devapi request" {
			got = append(got, rec.Level+" "+rec.Route+" "+rec.Code)
		}
	}
	want := []string{"DEBUG /dev/v1/evaluation/jobs/{job_id} forbidden", "DEBUG /healthz "}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("request lines %q, want %q; stderr:\n%s", got, want, logs)
	}
	for _, secret := range []string{job, "secret-scope", token} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log repeats %q:\n%s", secret, logs)
		}
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	r, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
