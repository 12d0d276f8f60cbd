package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Bounds on what a caller may send. The fake is a bench tool for local
// callers: there are no read timeouts (a connection lives until its caller
// closes it or the fake stops), but every request is bounded in size.
const (
	// maxLine is the longest request or header line (the read buffer).
	maxLine = 8 << 10
	// maxHeaderLines is the most header lines a request may carry.
	maxHeaderLines = 128
	// maxBody is the largest request body the fake reads (and discards).
	maxBody = 32 << 20
)

// server is openaifake's HTTP/1.1 server, written against net.Conn rather
// than net/http so that a call costs the caller and the fake as little as
// the protocol allows: one goroutine per connection reads each request into
// a reused buffer, sleeps -delay, and writes the whole answer with
// Content-Length in one write (net/http's server answers a flushed handler
// chunked, with a second write for the last chunk after the handler
// returns, and adds a background-read goroutine and a timer per request).
// It speaks keep-alive, pipelining, chunked request bodies, Expect:
// 100-continue and Connection: close; it is not a general server (no
// HTTP/2, no TLS, no read timeouts).
type server struct {
	delay time.Duration
	body  []byte        // every completion's JSON answer
	limit *rate.Limiter // nil: no rate limit

	served, inFlight, conns, throttled, firstNS, lastNS atomic.Int64
	arrived, nth, nthNS                                 atomic.Int64 // requests since the reset, and when the nth came
	lateNS, lateN, gapNS, gapN, resetNS                 atomic.Int64

	mu     sync.Mutex
	ln     net.Listener
	open   map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // one per connection goroutine
}

// newServer builds the fake answering every completion with answer after
// delay; rpm > 0 makes it a rate-limited provider (see the command's doc).
func newServer(delay time.Duration, answer string, rpm int, burstSeconds float64) (*server, error) {
	body, err := completionBody(answer)
	if err != nil {
		return nil, err
	}
	s := &server{delay: delay, body: body, open: map[net.Conn]struct{}{}}
	if rpm > 0 {
		s.limit = rate.NewLimiter(rate.Limit(float64(rpm)/60), max(1, int(math.Ceil(float64(rpm)/60*burstSeconds))))
	}
	return s, nil
}

// serve accepts connections on ln until shutdown closes it.
func (s *server) serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ln.Close()
	}
	s.ln = ln
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			// EMFILE and the like: wait a little, as net/http does.
			log.Printf("openaifake: accept: %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.conns.Add(1)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			continue
		}
		s.open[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// shutdown stops accepting, lets the answers in flight be written (up to
// grace), then closes every connection and waits for their goroutines.
func (s *server) shutdown(grace time.Duration) {
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for deadline := time.Now().Add(grace); s.inFlight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	s.mu.Lock()
	for c := range s.open {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// conn is one connection's state, owned by its goroutine.
type conn struct {
	c   net.Conn
	r   *bufio.Reader
	out []byte // the answer being written, reused
	// lastAnswer is when the fake last wrote an answer on it (Unix
	// nanoseconds, 0 for none): the start of the caller's turnaround.
	lastAnswer int64
}

// request is what the fake keeps of a request's head.
type request struct {
	route       route
	post        bool
	query       string // /stats/reset only
	http10      bool
	close       bool
	contentLen  int64 // -1: none
	chunked     bool
	expect100   bool
	errStatus   int    // a request the fake refuses: the status to answer
	errDetail   string // and why
	unsupported bool   // a Transfer-Encoding other than chunked
}

type route uint8

const (
	routeNotFound route = iota
	routeCompletion
	routeStats
	routeStatsReset
)

func (s *server) serveConn(nc net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.open, nc)
		s.mu.Unlock()
		_ = nc.Close()
	}()
	c := &conn{c: nc, r: bufio.NewReaderSize(nc, maxLine), out: make([]byte, 0, 512)}
	var req request
	for {
		if !c.readHead(&req) {
			return
		}
		if req.errStatus != 0 {
			// The head is not one the fake can answer in step: say why
			// and close (the body, if any, is not read).
			c.writeError(req.errStatus, req.errDetail, nil, true)
			c.lingerClose()
			return
		}
		if !s.handle(c, &req) {
			return
		}
	}
}

// lingerClose ends a connection whose caller may still be sending (a
// refused head): closing with unread bytes would reset the connection
// and could drop the answer before the caller reads it, so the fake
// shuts its side and reads what comes for a moment first, as net/http
// does.
func (c *conn) lingerClose() {
	tc, ok := c.c.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tc.CloseWrite()
	_ = tc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, tc, 256<<10)
}

// readHead reads the next request's line and headers into req. It returns
// false when the connection is done (closed, or too broken to answer);
// a request it refuses comes back with errStatus set.
func (c *conn) readHead(req *request) bool {
	*req = request{contentLen: -1}
	var line []byte
	for {
		var err error
		line, err = c.r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				req.errStatus, req.errDetail = http.StatusRequestURITooLong, "request line too long"
				return true
			}
			return false // EOF, reset, closed by shutdown
		}
		if line = trimEOL(line); len(line) > 0 {
			break // RFC 9112 2.2: skip empty lines before a request
		}
	}
	method, rest, ok1 := bytes.Cut(line, []byte{' '})
	target, proto, ok2 := bytes.Cut(rest, []byte{' '})
	switch {
	case !ok1 || !ok2 || len(method) == 0 || len(target) == 0:
		req.errStatus, req.errDetail = http.StatusBadRequest, "malformed request line"
	case string(proto) == "HTTP/1.1":
	case string(proto) == "HTTP/1.0":
		req.http10, req.close = true, true // no HTTP/1.0 keep-alive
	default:
		req.errStatus, req.errDetail = http.StatusHTTPVersionNotSupported, "HTTP/1.1 only"
	}
	if req.errStatus == 0 {
		req.post = string(method) == http.MethodPost
		req.route, req.query = routeOf(target)
	}
	for n := 0; ; n++ {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) && req.errStatus == 0 {
				req.errStatus, req.errDetail = http.StatusRequestHeaderFieldsTooLarge, "header line too long"
				return true
			}
			return req.errStatus != 0
		}
		if line = trimEOL(line); len(line) == 0 {
			break
		}
		if n == maxHeaderLines {
			req.errStatus, req.errDetail = http.StatusRequestHeaderFieldsTooLarge, "too many header lines"
			return true
		}
		if req.errStatus != 0 {
			continue
		}
		c.header(req, line)
	}
	if req.errStatus == 0 && req.chunked && req.contentLen >= 0 {
		req.errStatus, req.errDetail = http.StatusBadRequest, "both Content-Length and Transfer-Encoding"
	}
	if req.errStatus == 0 && req.unsupported {
		req.errStatus, req.errDetail = http.StatusNotImplemented, "Transfer-Encoding other than chunked"
	}
	return true
}

// header takes in one header line.
func (c *conn) header(req *request, line []byte) {
	name, value, ok := bytes.Cut(line, []byte{':'})
	if !ok || len(name) == 0 || name[len(name)-1] == ' ' || name[len(name)-1] == '\t' || line[0] == ' ' || line[0] == '\t' {
		req.errStatus, req.errDetail = http.StatusBadRequest, "malformed header line"
		return
	}
	value = bytes.Trim(value, " \t")
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		n, err := strconv.ParseInt(string(value), 10, 64)
		switch {
		case err != nil || n < 0 || value[0] == '+':
			req.errStatus, req.errDetail = http.StatusBadRequest, "bad Content-Length"
		case req.contentLen >= 0 && req.contentLen != n:
			req.errStatus, req.errDetail = http.StatusBadRequest, "conflicting Content-Length"
		case n > maxBody:
			req.errStatus, req.errDetail = http.StatusRequestEntityTooLarge, "body over "+strconv.Itoa(maxBody)+" bytes"
		default:
			req.contentLen = n
		}
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		if bytes.EqualFold(value, []byte("chunked")) {
			req.chunked = true
		} else {
			req.unsupported = true
		}
	case bytes.EqualFold(name, []byte("Connection")):
		for _, tok := range bytes.Split(value, []byte{','}) {
			if bytes.EqualFold(bytes.Trim(tok, " \t"), []byte("close")) {
				req.close = true
			}
		}
	case bytes.EqualFold(name, []byte("Expect")):
		if bytes.EqualFold(value, []byte("100-continue")) {
			req.expect100 = !req.http10
		} else {
			req.errStatus, req.errDetail = http.StatusExpectationFailed, "unknown expectation"
		}
	}
}

// routeOf maps a request target to a route (and the query of a reset).
func routeOf(target []byte) (route, string) {
	if bytes.HasPrefix(target, []byte("http://")) { // absolute form
		if i := bytes.IndexByte(target[len("http://"):], '/'); i >= 0 {
			target = target[len("http://")+i:]
		}
	}
	path, query, _ := bytes.Cut(target, []byte{'?'})
	switch string(path) {
	case "/v1/chat/completions", "/chat/completions":
		return routeCompletion, ""
	case "/stats":
		return routeStats, ""
	case "/stats/reset":
		return routeStatsReset, string(query)
	}
	return routeNotFound, ""
}

// discardBody reads the request's body, if any, and drops it.
func (c *conn) discardBody(req *request) error {
	if req.expect100 && (req.chunked || req.contentLen > 0) {
		if _, err := c.c.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
			return err
		}
	}
	if !req.chunked {
		if req.contentLen > 0 {
			_, err := c.r.Discard(int(req.contentLen))
			return err
		}
		return nil
	}
	var total int64
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(trimEOL(line), []byte{';'}) // chunk extensions
		n, err := strconv.ParseInt(string(bytes.Trim(size, " \t")), 16, 64)
		if err != nil || n < 0 {
			return errors.New("bad chunk size")
		}
		if total += n; total > maxBody {
			return errors.New("body too large")
		}
		if n == 0 {
			break
		}
		if _, err := c.r.Discard(int(n)); err != nil {
			return err
		}
		if line, err := c.r.ReadSlice('\n'); err != nil || len(trimEOL(line)) != 0 {
			return errors.New("chunk without its CRLF")
		}
	}
	for n := 0; ; n++ { // trailers
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(trimEOL(line)) == 0 {
			return nil
		}
		if n == maxHeaderLines {
			return errors.New("too many trailer lines")
		}
	}
}

// handle answers one request and reports whether the connection stays
// open.
func (s *server) handle(c *conn, req *request) bool {
	if req.route != routeCompletion || !req.post {
		if c.discardBody(req) != nil {
			return false
		}
		switch {
		case req.route == routeCompletion:
			return c.writeError(http.StatusMethodNotAllowed, "POST only", []string{"Allow: POST"}, req.close)
		case req.route == routeStats && !req.post:
			return c.write(http.StatusOK, "application/json", nil, s.statsJSON(), req.close)
		case req.route == routeStatsReset && req.post:
			if err := s.reset(req.query); err != nil {
				return c.writeError(http.StatusBadRequest, err.Error(), nil, req.close)
			}
			return c.write(http.StatusNoContent, "", nil, nil, req.close)
		case req.route == routeNotFound:
			return c.writeError(http.StatusNotFound, "404 page not found", nil, req.close)
		}
		return c.writeError(http.StatusMethodNotAllowed, "method not allowed", nil, req.close)
	}
	now := time.Now().UnixNano()
	if last := c.lastAnswer; last > 0 && last > s.resetNS.Load() {
		s.gapNS.Add(now - last)
		s.gapN.Add(1)
	}
	s.firstNS.CompareAndSwap(0, now)
	if s.arrived.Add(1) == s.nth.Load() {
		s.nthNS.Store(now)
	}
	if c.discardBody(req) != nil {
		return false
	}
	if s.limit != nil && !s.limit.Allow() {
		s.throttled.Add(1)
		return c.write(http.StatusTooManyRequests, "application/json", []string{"Retry-After: 1"}, rateLimitBody, req.close)
	}
	s.inFlight.Add(1)
	// The connection's goroutine waits itself (no timer or goroutine per
	// call); a caller that hangs up meanwhile is noticed when its answer
	// is written.
	time.Sleep(s.delay)
	s.served.Add(1)
	ok := c.write(http.StatusOK, "application/json", nil, s.body, req.close)
	answered := time.Now().UnixNano()
	s.inFlight.Add(-1)
	s.lastNS.Store(answered)
	s.lateNS.Add(answered - now - s.delay.Nanoseconds())
	s.lateN.Add(1)
	c.lastAnswer = answered
	return ok
}

// rateLimitBody is the 429's body, in OpenAI's error shape.
var rateLimitBody = []byte(`{"error":{"message":"rate limit","type":"rate_limit_exceeded"}}` + "\n")

// write sends one whole answer in one write and reports whether the
// connection stays open.
func (c *conn) write(status int, contentType string, extra []string, body []byte, closeAfter bool) bool {
	b := append(c.out[:0], "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\n"...)
	b = append(b, dateLine(time.Now())...)
	if contentType != "" {
		b = append(b, "Content-Type: "...)
		b = append(b, contentType...)
		b = append(b, "\r\n"...)
	}
	for _, h := range extra {
		b = append(b, h...)
		b = append(b, "\r\n"...)
	}
	if status != http.StatusNoContent {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	if closeAfter {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, body...)
	c.out = b
	_, err := c.c.Write(b)
	return err == nil && !closeAfter
}

// writeError answers status with a text body.
func (c *conn) writeError(status int, text string, extra []string, closeAfter bool) bool {
	return c.write(status, "text/plain; charset=utf-8", extra, []byte(text+"\n"), closeAfter)
}

// statsJSON is GET /stats's answer.
func (s *server) statsJSON() []byte {
	return fmt.Appendf(nil, `{"served":%d,"in_flight":%d,"conns":%d,"throttled":%d,"first_ns":%d,"last_ns":%d,"nth_ns":%d,"late_ns":%d,"late_n":%d,"gap_ns":%d,"gap_n":%d}`,
		s.served.Load(), s.inFlight.Load(), s.conns.Load(), s.throttled.Load(), s.firstNS.Load(), s.lastNS.Load(), s.nthNS.Load(),
		s.lateNS.Load(), s.lateN.Load(), s.gapNS.Load(), s.gapN.Load())
}

// reset is POST /stats/reset?nth=N.
func (s *server) reset(query string) error {
	var n int64
	for _, kv := range bytes.Split([]byte(query), []byte{'&'}) {
		k, v, _ := bytes.Cut(kv, []byte{'='})
		if string(k) != "nth" {
			continue
		}
		var err error
		if n, err = strconv.ParseInt(string(v), 10, 64); err != nil || n < 0 {
			return fmt.Errorf("nth: %q is not a count", v)
		}
	}
	s.nth.Store(n)
	s.nthNS.Store(0)
	s.arrived.Store(0)
	s.firstNS.Store(0)
	s.lastNS.Store(0)
	s.resetNS.Store(time.Now().UnixNano())
	s.lateNS.Store(0)
	s.lateN.Store(0)
	s.gapNS.Store(0)
	s.gapN.Store(0)
	return nil
}

func trimEOL(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	return bytes.TrimSuffix(line, []byte{'\r'})
}

// dateLine is the Date header for now, formatted once a second.
func dateLine(now time.Time) []byte {
	sec := now.Unix()
	if d := cachedDate.Load(); d != nil && d.sec == sec {
		return d.line
	}
	d := &date{sec: sec, line: now.UTC().AppendFormat([]byte("Date: "), http.TimeFormat)}
	d.line = append(d.line, "\r\n"...)
	cachedDate.Store(d)
	return d.line
}

type date struct {
	sec  int64
	line []byte
}

var cachedDate atomic.Pointer[date]
