package observability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fadcedab/adk/internal/otlpwire"
)

// OTLP/HTTP exporter bounds (CONTRACTS §2.8): default, minimum, maximum.
const (
	DefaultOTLPTimeout          = 10 * time.Second
	MinOTLPTimeout              = 50 * time.Millisecond
	MaxOTLPTimeout              = 120 * time.Second
	DefaultOTLPMaxRequestBytes  = 1 << 20
	MinOTLPMaxRequestBytes      = 1024
	MaxOTLPMaxRequestBytes      = 16 << 20
	DefaultOTLPMaxResponseBytes = 64 << 10
	MinOTLPMaxResponseBytes     = 2
	MaxOTLPMaxResponseBytes     = 1 << 20
	MaxOTLPHeaders              = 32
	MaxOTLPHeaderNameBytes      = 128
	MaxOTLPHeaderValueBytes     = 8192
	MaxOTLPHeadersBytes         = 32768
	MaxOTLPEndpointBytes        = 2048
	maxRetryAfterSeconds        = 86400
)

// OTLPUserAgent is the fixed User-Agent of export requests.
const OTLPUserAgent = "adk-otlp-http-json/1"

// Export failure classifications.
const (
	ClassTransient = "transient"
	ClassPermanent = "permanent"
)

var reservedOTLPHeaders = []string{
	"content-type", "content-length", "transfer-encoding", "host", "connection",
	"user-agent", "accept", "accept-encoding",
}

// OTLPConfig configures an OTLPExporter. Zero values take the defaults.
type OTLPConfig struct {
	// Endpoint is an http or https origin: scheme, host and optional port,
	// nothing else (no userinfo, path, query or fragment). Required.
	Endpoint string
	// TracesPath and LogsPath default to /v1/traces and /v1/logs.
	TracesPath string
	LogsPath   string
	// Headers are sent on every request (e.g. authorization). Names are
	// tokens, unique case-insensitively, not reserved; values never appear
	// in errors.
	Headers map[string]string
	// Timeout bounds the single HTTP attempt (default 10s, 50ms..120s).
	Timeout time.Duration
	// MaxRequestBytes (default 1 MiB) and MaxResponseBytes (default 64 KiB)
	// bound the bodies.
	MaxRequestBytes  int
	MaxResponseBytes int
	// AllowPrivateHosts permits loopback, private, link-local and
	// unspecified addresses, checked on the resolved address at dial time.
	// Off by default: a collector on localhost (tests, a dev sidecar) must
	// be allowed explicitly.
	AllowPrivateHosts bool
	// Resource identifies the service on every request.
	Resource Resource
}

// OTLPConfigError rejects an exporter configuration. It names the field
// and a reason, never a value.
type OTLPConfigError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *OTLPConfigError) Error() string {
	return "invalid_otlp_exporter_config: " + e.Field + ": " + e.Reason
}

// ExportError is a classified export failure
// ({otlp_export_failed, #{classification, retryable, reason, ...}}). It
// carries no response body, header value or transport message.
type ExportError struct {
	Classification string // ClassTransient or ClassPermanent
	Reason         string // http_status, timeout, partial_success_rejected, ...
	Status         int    // HTTP status, when there was a response
	RetryAfter     time.Duration
	RejectedItems  int64
}

// Error implements error.
func (e *ExportError) Error() string {
	s := "otlp_export_failed: " + e.Classification + ": " + e.Reason
	if e.Status != 0 {
		s += " " + strconv.Itoa(e.Status)
	}
	return s
}

// Retryable reports whether a later attempt may succeed.
func (e *ExportError) Retryable() bool { return e.Classification == ClassTransient }

// Code is the structural reason (used as a delivery-failure tag).
func (e *ExportError) Code() string { return e.Reason }

func transient(reason string) *ExportError {
	return &ExportError{Classification: ClassTransient, Reason: reason}
}

func permanent(reason string) *ExportError {
	return &ExportError{Classification: ClassPermanent, Reason: reason}
}

// errPrivateHost marks a dial refused by the private-host policy.
var errPrivateHost = errors.New("private host not allowed")

// OTLPExporter sends completed v2 spans to the traces path and
// metadata-only v1 envelopes to the logs path, one HTTP attempt per signal,
// never following redirects. Retries belong to the async bus. Close it to
// release idle connections.
type OTLPExporter struct {
	cfg       OTLPConfig
	tracesURL string
	logsURL   string
	headers   http.Header
	client    *http.Client
	transport *http.Transport
}

var _ Exporter = (*OTLPExporter)(nil)

// NewOTLPExporter validates cfg and builds the exporter.
func NewOTLPExporter(cfg OTLPConfig) (*OTLPExporter, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	e := &OTLPExporter{
		cfg:       cfg,
		tracesURL: cfg.Endpoint + cfg.TracesPath,
		logsURL:   cfg.Endpoint + cfg.LogsPath,
		headers:   make(http.Header, len(cfg.Headers)+3),
	}
	for k, v := range cfg.Headers {
		e.headers.Set(k, v)
	}
	e.headers.Set("Content-Type", "application/json")
	e.headers.Set("Accept", "application/json")
	e.headers.Set("User-Agent", OTLPUserAgent)
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	if !cfg.AllowPrivateHosts {
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return errPrivateHost
			}
			if ip := net.ParseIP(host); ip == nil || isPrivateIP(ip) {
				return errPrivateHost
			}
			return nil
		}
	}
	e.transport = &http.Transport{
		Proxy:                 nil, // the host is pinned: no ambient proxy
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
	}
	e.client = &http.Client{
		Transport: e.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return e, nil
}

// Close releases idle connections.
func (e *OTLPExporter) Close() error {
	e.transport.CloseIdleConnections()
	return nil
}

// Export implements Exporter. A start-phase span is skipped without any
// request (nil error). Failures are *ExportError or, for mapping failures,
// permanent *ExportError wrapping the mapping reason.
func (e *OTLPExporter) Export(ctx context.Context, s Signal) error {
	var body []byte
	var err error
	var target string
	logs := false
	switch sig := s.(type) {
	case *SpanSignal:
		if sig.Phase == PhaseStart {
			return nil
		}
		body, err = MarshalSpanOTLP(sig, e.cfg.Resource)
		target = e.tracesURL
	case *Envelope:
		body, err = MarshalEnvelopeOTLP(sig, e.cfg.Resource)
		target, logs = e.logsURL, true
	default:
		return permanent("unsupported_signal")
	}
	if err != nil {
		var se *SignalError
		switch {
		case errors.As(err, &se):
			return permanent(se.Code)
		case errors.Is(err, ErrContentNotExportable):
			return permanent("content_bearing_envelope_not_exportable")
		}
		return permanent("encode_failed")
	}
	if len(body) > e.cfg.MaxRequestBytes {
		return permanent("request_too_large")
	}
	return e.post(ctx, target, body, logs)
}

func (e *OTLPExporter) post(ctx context.Context, target string, body []byte, logs bool) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return permanent("invalid_request")
	}
	req.Header = e.headers.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		return classifyTransport(ctx, err)
	}
	defer resp.Body.Close()
	limited := io.LimitReader(resp.Body, int64(e.cfg.MaxResponseBytes)+1)
	respBody, err := io.ReadAll(limited)
	if err != nil {
		return classifyTransport(ctx, err)
	}
	if len(respBody) > e.cfg.MaxResponseBytes {
		return transient("response_too_large")
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		ee := transient("http_status")
		ee.Status = resp.StatusCode
		ee.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
		return ee
	default:
		ee := permanent("http_status")
		ee.Status = resp.StatusCode
		return ee
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return permanent("invalid_response_content_type")
	}
	sig := otlpwire.Traces
	if logs {
		sig = otlpwire.Logs
	}
	ps, err := otlpwire.ParseResponseJSON(respBody, sig)
	if err != nil {
		return permanent("invalid_success_response")
	}
	if ps.Rejected > 0 {
		ee := permanent("partial_success_rejected")
		ee.Status = resp.StatusCode
		ee.RejectedItems = ps.Rejected
		return ee
	}
	return nil
}

// parseRetryAfter accepts integer seconds 0..86400; anything else (an HTTP
// date included) is ignored.
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > maxRetryAfterSeconds {
		return 0
	}
	return time.Duration(n) * time.Second
}

func classifyTransport(ctx context.Context, err error) error {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case errors.Is(err, errPrivateHost):
		return permanent("private_host_forbidden")
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return transient("timeout")
	case errors.As(err, &netErr) && netErr.Timeout():
		return transient("timeout")
	case errors.As(err, &dnsErr):
		return transient("dns_resolution_failed")
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return transient("connect_failed")
	}
	return transient("transport_failed")
}

// isPrivateIP: loopback, RFC 1918/4193 private, link-local, unspecified,
// multicast, and the CGNAT block are not public.
func isPrivateIP(ip net.IP) bool {
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
	}
	if v4 := ip.To4(); v4 != nil && v4[0] == 100 && v4[1]&0xc0 == 64 {
		return true // 100.64.0.0/10
	}
	return false
}

func (c *OTLPConfig) normalize() error {
	if err := validateEndpoint(c.Endpoint); err != nil {
		return err
	}
	c.Endpoint = strings.TrimSuffix(c.Endpoint, "/")
	if c.TracesPath == "" {
		c.TracesPath = "/v1/traces"
	}
	if c.LogsPath == "" {
		c.LogsPath = "/v1/logs"
	}
	if !validExportPath(c.TracesPath) {
		return &OTLPConfigError{"path", "invalid"}
	}
	if !validExportPath(c.LogsPath) {
		return &OTLPConfigError{"logs_path", "invalid"}
	}
	if err := validateOTLPHeaders(c.Headers); err != nil {
		return err
	}
	var err error
	if c.Timeout, err = bounded("timeout", c.Timeout, DefaultOTLPTimeout, MinOTLPTimeout, MaxOTLPTimeout); err != nil {
		return err
	}
	if c.MaxRequestBytes, err = bounded("max_request_bytes", c.MaxRequestBytes, DefaultOTLPMaxRequestBytes, MinOTLPMaxRequestBytes, MaxOTLPMaxRequestBytes); err != nil {
		return err
	}
	if c.MaxResponseBytes, err = bounded("max_response_bytes", c.MaxResponseBytes, DefaultOTLPMaxResponseBytes, MinOTLPMaxResponseBytes, MaxOTLPMaxResponseBytes); err != nil {
		return err
	}
	return nil
}

func bounded[T int | time.Duration](field string, v, def, lo, hi T) (T, error) {
	if v == 0 {
		return def, nil
	}
	if v < lo || v > hi {
		return 0, &OTLPConfigError{field, "out_of_range"}
	}
	return v, nil
}

// validateEndpoint: an http(s) origin of at most 2048 bytes with a valid
// DNS name or IP literal host and an optional port.
func validateEndpoint(ep string) error {
	if ep == "" {
		return &OTLPConfigError{"endpoint", "required"}
	}
	if len(ep) > MaxOTLPEndpointBytes {
		return &OTLPConfigError{"endpoint", "too_long"}
	}
	if strings.ContainsAny(ep, "?#\\ \t\r\n") {
		return &OTLPConfigError{"endpoint", "not_an_origin"}
	}
	u, err := url.Parse(ep)
	if err != nil {
		return &OTLPConfigError{"endpoint", "invalid"}
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return &OTLPConfigError{"endpoint", "scheme"}
	case u.User != nil:
		return &OTLPConfigError{"endpoint", "userinfo"}
	case u.Opaque != "" || (u.Path != "" && u.Path != "/"):
		return &OTLPConfigError{"endpoint", "path"}
	}
	host := u.Hostname()
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return &OTLPConfigError{"endpoint", "port"}
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return &OTLPConfigError{"endpoint", "port"}
	}
	if net.ParseIP(host) == nil && !validDNSName(host) {
		return &OTLPConfigError{"endpoint", "host"}
	}
	return nil
}

func validDNSName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// validExportPath: absolute, not "//" (which would read as a host), no
// query, fragment or backslash, %-escapes well formed.
func validExportPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "?#\\ \t\r\n") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '%' {
			if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
				return false
			}
		}
		if p[i] < 0x21 || p[i] > 0x7e {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func validateOTLPHeaders(h map[string]string) error {
	if len(h) > MaxOTLPHeaders {
		return &OTLPConfigError{"headers", "too_many"}
	}
	total := 0
	seen := make(map[string]bool, len(h))
	for name, value := range h {
		lower := strings.ToLower(name)
		switch {
		case name == "" || len(name) > MaxOTLPHeaderNameBytes || !isToken(name):
			return &OTLPConfigError{"headers", "invalid_name"}
		case seen[lower]:
			return &OTLPConfigError{"headers", "duplicate_name"}
		case len(value) > MaxOTLPHeaderValueBytes || hasCTL(value):
			return &OTLPConfigError{"headers", "invalid_value"}
		}
		for _, r := range reservedOTLPHeaders {
			if lower == r {
				return &OTLPConfigError{"headers", "reserved_name"}
			}
		}
		seen[lower] = true
		total += len(name) + len(value)
	}
	if total > MaxOTLPHeadersBytes {
		return &OTLPConfigError{"headers", "too_large"}
	}
	return nil
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// hasCTL rejects control characters except horizontal tab, and DEL.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}

// String describes the exporter without header values.
func (e *OTLPExporter) String() string {
	return fmt.Sprintf("otlp-http-json(%s)", e.cfg.Endpoint)
}
