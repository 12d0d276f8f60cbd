package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/devapi"
)

// envDevToken holds the bearer token `adk eval report --url` sends
// (CONTRACTS §5.11: at least 16 bytes). Never a flag, never printed.
const envDevToken = "ADK_DEV_TOKEN"

// Error codes of the HTTP report client (CONTRACTS §5.11).
const (
	codeDevAPIHTTPError   = "developer_api_http_error"
	codeDevAPIUnavailable = "developer_api_unavailable"
	codeInvalidJobID      = "invalid_eval_job_id"
	codeInvalidDevToken   = "invalid_dev_token"
	minDevTokenBytes      = 16
)

// reportOverHTTP fetches a job's stored report from the developer API:
// the bytes the route sends, written like a local report.
func reportOverHTTP(cmd *cobra.Command, base, scope string, scopeSet bool, jobID, format, output, suite string) error {
	if len(jobID) != 37 || !strings.HasPrefix(jobID, "eval-") {
		return &cliError{Code: codeInvalidJobID, Detail: "want eval- and 32 hex digits"}
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return &cliError{Code: codeInvalidAgentURL, Reason: "url", Detail: "want http(s)://host[:port] without credentials"}
	}
	token := os.Getenv(envDevToken)
	if len(token) < minDevTokenBytes {
		return &cliError{Code: codeInvalidDevToken, Reason: envDevToken, Detail: "set it to a token of at least 16 bytes"}
	}
	q := url.Values{"format": {format}}
	if suite != "" {
		q.Set("suite_name", suite)
	}
	if scopeSet {
		q.Set("scope", scope)
	}
	target := strings.TrimRight(u.String(), "/") + "/dev/v1/evaluation/jobs/" + jobID + "/report?" + q.Encode()
	req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, target, nil)
	if err != nil {
		return &cliError{Code: codeDevAPIUnavailable, Detail: err.Error(), Err: err}
	}
	req.Header.Set("authorization", "Bearer "+token)
	hc := &http.Client{Timeout: 2 * time.Minute}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		reason := "request_failed"
		if errors.Is(err, syscall.ECONNREFUSED) {
			reason = "connection_refused"
		}
		return &cliError{Code: codeDevAPIUnavailable, Reason: reason, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, devapi.MaxReportBytes+1))
	if err != nil {
		return &cliError{Code: codeDevAPIUnavailable, Reason: "read_failed", Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		return &cliError{Code: codeDevAPIHTTPError, Reason: strconv.Itoa(resp.StatusCode) + " " + e.Error.Code, Detail: e.Error.Message}
	}
	if len(body) > devapi.MaxReportBytes {
		return &cliError{Code: codeDevAPIHTTPError, Reason: "report larger than 16 MiB"}
	}
	return emitReport(cmd.OutOrStdout(), output, body)
}
