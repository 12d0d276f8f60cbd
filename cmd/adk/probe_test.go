package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fadcedab/adk/devapi"
)

// opsServer serves the real ops endpoints (/healthz, /readyz, /metrics)
// on 127.0.0.1, with ready answering /readyz.
func opsServer(t *testing.T, ready func(context.Context) error) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(devapi.OpsHandler(devapi.OpsOptions{Ready: ready, Gatherer: devapi.NewRegistry()}))
	t.Cleanup(srv.Close)
	return srv
}

func TestProbe(t *testing.T) {
	ops := opsServer(t, func(context.Context) error { return errors.New("no raft leader") })
	// A server that never answers until the probe gives up.
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	redirect := httptest.NewServer(http.RedirectHandler("/healthz", http.StatusFound))
	t.Cleanup(redirect.Close)
	// A port nothing listens on: bind, note it, close.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/healthz"
	l.Close()

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout when code is 0, else in the one stderr line
	}{
		{"healthy", []string{ops.URL + "/healthz"}, exitOK, "ok " + ops.URL + "/healthz 200"},
		{"not ready", []string{ops.URL + "/readyz"}, exitError, "probe_failed: " + ops.URL + "/readyz (status 503: "},
		{"not found", []string{ops.URL + "/nope"}, exitError, "(status 404"},
		{"refused", []string{refused}, exitError, "probe_failed: " + refused + " (dial: "},
		{"timeout", []string{"--timeout", "50ms", hang.URL}, exitError, "(no answer within --timeout 50ms)"},
		{"redirect not followed", []string{redirect.URL}, exitError, "(status 302"},
		{"no scheme", []string{"//127.0.0.1:9090/healthz"}, exitError, "invalid_probe_url: URL (scheme must be http or https"},
		{"host:port only", []string{"127.0.0.1:9090/healthz"}, exitError, "invalid_probe_url: URL (not a URL"},
		{"ftp", []string{"ftp://127.0.0.1/healthz"}, exitError, `scheme must be http or https, got "ftp"`},
		{"no host", []string{"http:///healthz"}, exitError, "invalid_probe_url: URL (no host"},
		{"user info", []string{"http://u:hunter2@127.0.0.1:1/healthz"}, exitError, "invalid_probe_url: URL (must not carry user info"},
		{"bad url", []string{"http://[::1"}, exitError, "invalid_probe_url: URL (not a URL"},
		{"timeout too long", []string{"--timeout", "2m", ops.URL}, exitError, "invalid_probe_timeout: --timeout (must be 1ms..1m0s, got 2m0s)"},
		{"timeout zero", []string{"--timeout", "0s", ops.URL}, exitError, "invalid_probe_timeout: --timeout"},
		{"timeout not a duration", []string{"--timeout", "soon", ops.URL}, exitError, `invalid argument "soon" for "--timeout"`},
		{"no url", nil, exitError, "accepts 1 arg(s), received 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"probe"}, tc.args...), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errb.String())
			}
			got := out.String()
			if code != exitOK {
				got = errb.String()
				if strings.Count(got, "\n") != 1 || out.Len() != 0 {
					t.Errorf("want one stderr line and no stdout, got stdout %q stderr %q", out.String(), got)
				}
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
			if strings.Contains(errb.String(), "hunter2") {
				t.Errorf("the password leaked: %q", errb.String())
			}
		})
	}
	var out bytes.Buffer
	if code := run([]string{"probe", "-q", ops.URL + "/healthz"}, &out, io.Discard); code != exitOK || out.Len() != 0 {
		t.Errorf("--quiet: exit %d, stdout %q", code, out.String())
	}
}

func FuzzParseProbeURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:9090/healthz", "https://h/readyz", "ftp://x", "http:///x", "http://u:p@h/", "%zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := parseProbeURL(raw)
		if err != nil {
			var ce *cliError
			if !errors.As(err, &ce) || ce.Code != codeInvalidProbeURL {
				t.Fatalf("%q: untyped error %v", raw, err)
			}
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
			t.Fatalf("%q accepted as %#v", raw, u)
		}
	})
}

// TestReadme_Deploy runs the adk commands of the README's first "Deploy"
// block: the probes hit a real ops server (devapi.OpsHandler) standing in
// for a container's --metrics-addr 127.0.0.1:9090. The block after it
// needs a container engine (checked by TestDeployCompose instead).
func TestReadme_Deploy(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := strings.CutPrefix(string(readme)[strings.Index(string(readme), "\n## Deploy\n")+1:], "## Deploy\n")
	if !ok {
		t.Fatal(`README has no "## Deploy" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 2 {
		t.Fatalf("found %d sh blocks in Deploy", len(blocks))
	}
	ops := opsServer(t, nil)
	addr := strings.TrimPrefix(ops.URL, "http://")
	n := 0
	for _, line := range strings.Split(blocks[0][1], "\n") {
		args, ok := strings.CutPrefix(line, "./bin/adk ")
		if !ok {
			continue
		}
		n++
		argv := strings.Fields(strings.ReplaceAll(args, "127.0.0.1:9090", addr))
		var out, errb bytes.Buffer
		if code := run(argv, &out, &errb); code != exitOK {
			t.Errorf("%s: exit %d, stderr %q", line, code, errb.String())
		}
	}
	if n < 2 {
		t.Fatalf("found %d adk commands in the Deploy block", n)
	}
}
