package httpx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/fadcedab/adk/agent/model"
)

// Bounds and defaults shared by the remote providers.
const (
	DefaultTimeout          = 60 * time.Second
	MaxTimeout              = 10 * time.Minute
	DefaultMaxAttempts      = 3
	MaxAttempts             = 10
	DefaultMaxResponseBytes = 8 << 20
	MaxResponseBytes        = 64 << 20
	DefaultBaseBackoff      = 250 * time.Millisecond
	DefaultMaxBackoff       = 20 * time.Second
)

// Transport is the one transport every provider client uses, sized so that
// 256 concurrent model calls to one host reuse connections instead of
// churning them.
var Transport = &http.Transport{
	Proxy: http.ProxyFromEnvironment,
	DialContext: (&net.Dialer{
		Timeout:        10 * time.Second,
		KeepAlive:      30 * time.Second,
		ControlContext: connectLoopbackNow,
	}).DialContext,
	ForceAttemptHTTP2:     true,
	MaxIdleConns:          1024,
	MaxIdleConnsPerHost:   256,
	IdleConnTimeout:       90 * time.Second,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
}

// Client performs bounded, retried JSON POSTs for one provider.
type Client struct {
	Provider         string
	HTTP             *http.Client // nil: a client over Transport
	Timeout          time.Duration
	MaxAttempts      int
	MaxResponseBytes int64
	BaseBackoff      time.Duration
	MaxBackoff       time.Duration
	// CallerRetries429 returns a 429 at once (with its Retry-After)
	// instead of retrying it: a rate limiter in front retries it for every
	// caller together (agent/model/ratelimit).
	CallerRetries429 bool
	// pool, when set, carries the calls to http:// URLs without a proxy
	// (the lean path, lean.go); nil: every call goes through HTTP.
	pool *pool
}

// NewClient validates the per-provider HTTP bounds (zero means default)
// and returns a client.
func NewClient(name string, hc *http.Client, cfg model.HTTPConfig) (Client, error) {
	c := Client{Provider: name, HTTP: hc}
	timeoutMS, attempts, maxBytes := cfg.TimeoutMS, cfg.MaxAttempts, cfg.MaxResponseBytes
	baseMS, maxMS := cfg.BaseBackoffMS, cfg.MaxBackoffMS
	if timeoutMS < 0 || time.Duration(timeoutMS)*time.Millisecond > MaxTimeout {
		return c, fmt.Errorf("timeout_ms %d out of range", timeoutMS)
	}
	if attempts < 0 || attempts > MaxAttempts {
		return c, fmt.Errorf("max_attempts %d out of range 1..%d", attempts, MaxAttempts)
	}
	if maxBytes < 0 || maxBytes > MaxResponseBytes {
		return c, fmt.Errorf("max_response_bytes %d out of range", maxBytes)
	}
	if baseMS < 0 || maxMS < 0 || maxMS > 600_000 {
		return c, fmt.Errorf("backoff out of range")
	}
	c.Timeout = time.Duration(timeoutMS) * time.Millisecond
	c.MaxAttempts = attempts
	c.MaxResponseBytes = maxBytes
	c.BaseBackoff = time.Duration(baseMS) * time.Millisecond
	c.MaxBackoff = time.Duration(maxMS) * time.Millisecond
	lean, err := leanFromEnv()
	if err != nil {
		return c, err
	}
	if lean && leanSupported && hc == nil {
		c.pool = leanPool
	}
	return c, nil
}

var defaultHTTP = &http.Client{Transport: Transport}

// Endpoint is a URL and the headers of the JSON calls to it, prepared once
// for any number of calls (a provider prepares its endpoint when it is
// built): the headers with Content-Type and Accept, and on the lean path
// the request's bytes but its length and body, so that a call writes
// those without building an http.Request. It is read-only and safe for
// concurrent use.
type Endpoint struct {
	url     string
	header  http.Header // the caller's plus Content-Type and Accept
	invalid bool        // the URL does not make a request
	lean    *leanRequest
}

// NewEndpoint prepares url and header (which it copies) for c's calls.
func (c *Client) NewEndpoint(url string, header http.Header) *Endpoint {
	h := make(http.Header, len(header)+2)
	for k, v := range header {
		h[k] = v
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	ep := &Endpoint{url: url, header: h}
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		ep.invalid = true
		return ep
	}
	if c.pool != nil && c.HTTP == nil && leanApplies(req) {
		ep.lean = newLeanRequest(req, h)
	}
	return ep
}

// PostJSON posts body to url with the given headers and returns the 2xx
// response body: Post to an endpoint prepared for this call.
func (c *Client) PostJSON(ctx context.Context, url string, header http.Header, body []byte) ([]byte, error) {
	return c.Post(ctx, c.NewEndpoint(url, header), body)
}

// Post posts body to ep and returns the 2xx response body. Each attempt
// has its own timeout; 429 and 5xx are retried up to MaxAttempts, waiting
// Retry-After when the server sends one (capped by MaxBackoff) or an
// exponential, jittered backoff otherwise.
func (c *Client) Post(ctx context.Context, ep *Endpoint, body []byte) ([]byte, error) {
	data, _, err := c.post(ctx, ep, body, false)
	return data, err
}

// PostBorrow is Post for a caller that only reads the answer's body
// before it calls done: on the lean path, a body that fits in the
// connection's read buffer is not copied out of it, and the connection
// goes back to its pool when done is called. On success done is never
// nil and must be called exactly once; data must not be read, nor kept,
// after it.
func (c *Client) PostBorrow(ctx context.Context, ep *Endpoint, body []byte) (data []byte, done func(), err error) {
	return c.post(ctx, ep, body, true)
}

// noDone is the done of an answer that borrows nothing.
func noDone() {}

func (c *Client) post(ctx context.Context, ep *Endpoint, body []byte, borrow bool) ([]byte, func(), error) {
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	var last *model.Error
	var retryAfter time.Duration
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, c.backoff(attempt, retryAfter)); err != nil {
				return nil, nil, c.ctxErr(ctx)
			}
		}
		out, done, ra, err := c.once(ctx, ep, body, borrow)
		if err == nil {
			if done == nil {
				done = noDone
			}
			return out, done, nil
		}
		if ra >= 0 {
			err.RetryAfter = ra
		}
		if !err.Retryable || c.CallerRetries429 && err.Class == model.ClassRateLimited {
			return nil, nil, err
		}
		last, retryAfter = err, ra
	}
	return nil, nil, last
}

// once performs one attempt. For a retryable status it also returns the
// server's Retry-After (-1 when absent). With borrow, a lean answer's body
// may be left in its connection's buffer: done, when not nil, releases it.
func (c *Client) once(ctx context.Context, ep *Endpoint, body []byte, borrow bool) (data []byte, done func(), ra time.Duration, merr *model.Error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if ep.invalid {
		return nil, nil, -1, c.fail(model.ClassConfig, 0, false)
	}
	if ep.lean != nil && c.pool != nil && c.HTTP == nil {
		return c.onceLean(ctx, time.Now().Add(timeout), ep.lean, body, borrow)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	timedOut := func() bool { return errors.Is(actx.Err(), context.DeadlineExceeded) }
	req, err := http.NewRequestWithContext(actx, http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, -1, c.fail(model.ClassConfig, 0, false)
	}
	// A copy: the Client may add to it (a cookie jar's cookies).
	req.Header = ep.header.Clone()
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, -1, c.transportErr(ctx, timedOut())
	}
	defer resp.Body.Close()
	data, ra, merr, _ = c.answer(ctx, timedOut, resp)
	return data, nil, ra, merr
}

// answer reads resp within the client's bounds: a 2xx body, or for any
// other status its typed error and the server's Retry-After (-1 when
// absent). done reports that the body was read to its end. timedOut
// reports whether the attempt's own timeout has passed (a failed read is
// then a timeout).
func (c *Client) answer(ctx context.Context, timedOut func() bool, resp *http.Response) (data []byte, ra time.Duration, merr *model.Error, done bool) {
	limit := c.responseLimit()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Drain a little so the connection can be reused.
		n, err := io.CopyN(io.Discard, resp.Body, drainBytes)
		ra := time.Duration(-1)
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			ra = d
		}
		return nil, ra, c.statusErr(resp.StatusCode), n < drainBytes && err == io.EOF
	}
	if n := resp.ContentLength; n >= 0 && n <= limit {
		// A body of known length is read into a buffer of its size
		// (io.ReadAll starts at 512 bytes and grows); net/http's body
		// reports its end with its last byte, so it is read to its end.
		data := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return nil, -1, c.transportErr(ctx, timedOut()), false
		}
		return data, -1, nil, true
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, -1, c.transportErr(ctx, timedOut()), false
	}
	if int64(len(data)) > limit {
		return nil, -1, c.fail(model.ClassTooLarge, resp.StatusCode, false), false
	}
	return data, -1, nil, true
}

// responseLimit is the bound of a 2xx answer's body.
func (c *Client) responseLimit() int64 {
	if c.MaxResponseBytes <= 0 {
		return DefaultMaxResponseBytes
	}
	return c.MaxResponseBytes
}

// drainBytes bounds what is read of an error answer's body.
const drainBytes = 64 << 10

// backoff is the wait before attempt (1-based retries): the server's
// Retry-After when it sent one, else exponential with jitter; both capped
// by MaxBackoff.
func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	maxB := c.MaxBackoff
	if maxB <= 0 {
		maxB = DefaultMaxBackoff
	}
	if retryAfter >= 0 {
		return min(retryAfter, maxB)
	}
	base := c.BaseBackoff
	if base <= 0 {
		base = DefaultBaseBackoff
	}
	d := base << (attempt - 1)
	if d <= 0 || d > maxB {
		d = maxB
	}
	// Full jitter in [d/2, d].
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// parseRetryAfter reads delta-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > 3600 {
			n = 3600
		}
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

func (c *Client) statusErr(status int) *model.Error {
	switch {
	case status == http.StatusTooManyRequests:
		return c.fail(model.ClassRateLimited, status, true)
	case status >= 500:
		return c.fail(model.ClassServer, status, true)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return c.fail(model.ClassAuth, status, false)
	case status == http.StatusRequestTimeout:
		return c.fail(model.ClassTimeout, status, false)
	default:
		return c.fail(model.ClassClient, status, false)
	}
}

// transportErr classifies a failed attempt: the caller's context ended,
// the attempt's own timeout passed (timedOut), or the transport failed.
func (c *Client) transportErr(parent context.Context, timedOut bool) *model.Error {
	switch {
	case parent.Err() != nil:
		return c.ctxErr(parent)
	case timedOut:
		return c.fail(model.ClassTimeout, 0, false)
	default:
		return c.fail(model.ClassTransport, 0, false)
	}
}

func (c *Client) ctxErr(ctx context.Context) *model.Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return c.fail(model.ClassTimeout, 0, false)
	}
	return c.fail(model.ClassCancelled, 0, false)
}

func (c *Client) fail(class model.ErrorClass, status int, retryable bool) *model.Error {
	return &model.Error{Provider: c.Provider, Class: class, Status: status, Retryable: retryable}
}

// Fail builds a structural error for callers decoding a response.
func (c *Client) Fail(class model.ErrorClass) *model.Error { return c.fail(class, 0, false) }

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
