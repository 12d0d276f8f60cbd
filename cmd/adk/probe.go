package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Error codes of `adk probe`.
const (
	codeInvalidProbeURL     = "invalid_probe_url"
	codeInvalidProbeTimeout = "invalid_probe_timeout"
	codeProbeFailed         = "probe_failed"
)

// Bounds of --timeout: a health check that may hang forever is no health
// check, and one shorter than a millisecond cannot succeed.
const (
	defaultProbeTimeout = 2 * time.Second
	minProbeTimeout     = time.Millisecond
	maxProbeTimeout     = time.Minute
	// probeBodyMax is how much of a failing answer's body the error
	// quotes: the ops endpoints answer in one short line.
	probeBodyMax = 256
)

// newProbeCmd is `adk probe URL`: one GET with a bounded timeout, exit 0
// on a 2xx answer and 1 otherwise. It exists because the container image
// (FROM scratch) has no curl or wget for its HEALTHCHECK.
func newProbeCmd() *cobra.Command {
	timeout := defaultProbeTimeout
	cmd := &cobra.Command{
		Use:   "probe URL",
		Short: "GET an HTTP health endpoint (e.g. /healthz); exit 0 on 2xx, 1 otherwise",
		Long: `Probe sends one GET to URL and exits 0 when the answer is 2xx, 1 otherwise
(refused, timed out, redirected or any other status). It is the container
image's HEALTHCHECK, for images without curl:

  adk probe http://127.0.0.1:9090/healthz

Redirects are not followed and no proxy is used.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < minProbeTimeout || timeout > maxProbeTimeout {
				return &cliError{Code: codeInvalidProbeTimeout, Reason: "--timeout",
					Detail: fmt.Sprintf("must be %s..%s, got %s", minProbeTimeout, maxProbeTimeout, timeout)}
			}
			u, err := parseProbeURL(args[0])
			if err != nil {
				return err
			}
			status, err := probe(cmd.Context(), u, timeout)
			if err != nil {
				return err
			}
			if !quiet(cmd) {
				fmt.Fprintf(cmd.OutOrStdout(), "ok %s %d\n", u.Redacted(), status)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", defaultProbeTimeout, "give up after this long (1ms..1m)")
	return cmd
}

// parseProbeURL accepts an absolute http(s) URL with a host. The error
// names the argument and what is valid, never a password it may carry.
func parseProbeURL(raw string) (*url.URL, error) {
	bad := func(detail string) error {
		return &cliError{Code: codeInvalidProbeURL, Reason: "URL", Detail: detail}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, bad("not a URL; want e.g. http://127.0.0.1:9090/healthz")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, bad(fmt.Sprintf("scheme must be http or https, got %q; want e.g. http://127.0.0.1:9090/healthz", u.Scheme))
	}
	if u.Hostname() == "" {
		return nil, bad("no host; want e.g. http://127.0.0.1:9090/healthz")
	}
	if u.User != nil {
		return nil, bad("must not carry user info; the health endpoints need no credentials")
	}
	return u, nil
}

// probe GETs u once within timeout and returns the 2xx status, or a
// probe_failed error naming the URL and why.
func probe(ctx context.Context, u *url.URL, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	fail := func(detail string) error {
		return &cliError{Code: codeProbeFailed, Reason: u.String(), Detail: detail}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, fail(err.Error())
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fail(probeReason(ctx, err, timeout))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, probeBodyMax))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		detail := fmt.Sprintf("status %d", resp.StatusCode)
		if line := strings.TrimSpace(strings.SplitN(string(body), "\n", 2)[0]); line != "" {
			detail += ": " + line
		}
		return 0, fail(detail)
	}
	return resp.StatusCode, nil
}

// probeReason says why a GET got no answer, in a few words.
func probeReason(ctx context.Context, err error, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within --timeout %s", timeout)
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op + ": " + op.Err.Error()
	}
	return err.Error()
}
