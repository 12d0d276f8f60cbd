package httpx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/internal/samplescope"
)

// LeanEnv names the environment variable that switches the lean call path
// for cleartext http:// endpoints without a proxy: "on" or "off"; unset
// means DefaultLean. It is read when a provider is built.
const LeanEnv = "ADK_LEAN_HTTP"

// DefaultLean is whether the lean path is on when LeanEnv is unset.
const DefaultLean = true

// maxLeanHeaderBytes bounds an answer's status line and headers, as the
// Transport's default bound does.
const maxLeanHeaderBytes = 10 << 20

// max1xx bounds the informational answers read before the final one, as
// the Transport does.
const max1xx = 5

var (
	errHeaderTooLarge = errors.New("answer headers too large")
	errToo1xx         = errors.New("too many informational answers")
	// aLongTimeAgo is a deadline that has passed: setting it ends a
	// connection's blocked reads and writes at once.
	aLongTimeAgo = time.Unix(1, 0)
)

// leanFromEnv reads LeanEnv: whether the lean path is on.
func leanFromEnv() (bool, error) {
	switch os.Getenv(LeanEnv) {
	case "":
		return DefaultLean, nil
	case "on":
		return true, nil
	case "off":
		return false, nil
	default:
		return false, fmt.Errorf("%s must be on or off", LeanEnv)
	}
}

// leanPool is the lean path's one pool, shared by every provider client of
// the process as Transport is, with Transport's idle bounds.
var leanPool = newPool(Transport.MaxIdleConnsPerHost, Transport.MaxIdleConns, Transport.IdleConnTimeout)

// CloseIdleConnections closes the idle connections of both call paths:
// Transport's and the lean pool's.
func CloseIdleConnections() {
	Transport.CloseIdleConnections()
	leanPool.closeIdle()
}

// KeepIdle bounds the lean pool's connections to each host, those in a
// call and the idle ones together, at n from now on, below its own
// bound: the idle ones beyond it are closed at once (the least recently
// used first), and a connection a call puts back is closed instead of
// kept when keeping it would pass n. n < 0 lifts the bound. It is for a
// process that knows how many calls can still be in flight at once (an
// eval run's workers still running, RunConfig.WorkersRunning): every one
// of them still finds a connection, in its hands or idle, and the ones no
// call can use any more are closed while the process waits for its last
// answers rather than by the kernel at its exit.
func KeepIdle(n int) { leanPool.keepIdle(n) }

// leanApplies reports whether req may take the lean path: cleartext
// HTTP/1.1 to a server reached without a proxy.
func leanApplies(req *http.Request) bool {
	if req.URL.Scheme != "http" {
		return false
	}
	if Transport.Proxy == nil {
		return true
	}
	u, err := Transport.Proxy(req)
	return err == nil && u == nil
}

// leanRequest is an endpoint's request on the lean path, written once by
// http.Request.Write itself and cut around its Content-Length value: a
// call writes head, its body's length, tail and its body, the bytes
// Request.Write writes for that body, without an http.Request, a parsed
// URL or a header map of its own.
type leanRequest struct {
	addr string // host:port to dial
	head []byte // request line and headers through "Content-Length: "
	tail []byte // the rest of the headers, through the blank line
	// req is the endpoint's request without a body: what ReadResponse is
	// given (it reads the method). Read-only.
	req *http.Request
}

// contentLengthLine is where newLeanRequest cuts a request written with
// a one-byte body.
const contentLengthLine = "\r\nContent-Length: 1\r\n"

// newLeanRequest writes req (a body-less POST) with header and a one-byte
// body, and keeps its bytes around the length. It returns nil, leaving the
// endpoint to the Transport, if the bytes are not of that shape.
func newLeanRequest(req *http.Request, header http.Header) *leanRequest {
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	lr := &leanRequest{addr: net.JoinHostPort(req.URL.Hostname(), port), req: req}
	probe := req.Clone(context.Background())
	probe.Header = header
	probe.Body, probe.ContentLength = io.NopCloser(strings.NewReader("x")), 1
	var b bytes.Buffer
	if err := probe.Write(&b); err != nil {
		return nil
	}
	wire := b.Bytes()
	i := bytes.Index(wire, []byte(contentLengthLine))
	if i < 0 || !bytes.HasSuffix(wire, []byte("\r\n\r\nx")) {
		return nil
	}
	cut := i + len(contentLengthLine) - len("1\r\n")
	lr.head = wire[:cut:cut]
	lr.tail = wire[cut+1 : len(wire)-1]
	return lr
}

// onceLean is once on the lean path: the calling goroutine writes the
// request on a pooled connection and reads its answer; a done ctx or the
// attempt's deadline ends both at once. The deadline needs no context of
// its own: the dial is bounded by it, and then the connection's attempt
// timer (armed for each call, made once per connection) aborts the call
// as ctx's end does, so an attempt registers with ctx only once. A
// connection goes back to the pool only after an answer read to its end
// that did not ask to close it. A request is sent again only when none of
// its bytes left on a reused connection. With borrow, a plain answer's
// body that fits in the read buffer is returned from it, not copied, and
// done releases the connection after the caller has read it.
func (c *Client) onceLean(ctx context.Context, deadline time.Time, lr *leanRequest, body []byte, borrow bool) ([]byte, func(), time.Duration, *model.Error) {
	timedOut := func() bool { return !time.Now().Before(deadline) }
	fresh := false
	for {
		conn, reused, err := c.pool.get(ctx, lr.addr, fresh, deadline)
		if err != nil {
			return nil, nil, -1, c.transportErr(ctx, timedOut())
		}
		sampleEnd := conn.arm(ctx, deadline)
		plain, resp, err := conn.roundTrip(lr, body, c.responseLimit())
		if err != nil {
			conn.release(false)
			awaitSampleEnd(ctx, sampleEnd)
			if reused && conn.written == 0 && ctx.Err() == nil && !timedOut() {
				fresh = true
				continue
			}
			return nil, nil, -1, c.transportErr(ctx, timedOut())
		}
		if plain.ok {
			if borrow && plain.length <= int64(conn.br.Size()) {
				data, err := conn.br.Peek(int(plain.length))
				if err != nil {
					conn.release(false)
					awaitSampleEnd(ctx, sampleEnd)
					return nil, nil, -1, c.transportErr(ctx, timedOut())
				}
				conn.lent, conn.lentKeep = len(data), !plain.close
				if conn.returnFn == nil {
					conn.returnFn = conn.returnLent
				}
				return data, conn.returnFn, -1, nil
			}
			data := make([]byte, plain.length)
			if _, err := io.ReadFull(conn.br, data); err != nil {
				conn.release(false)
				awaitSampleEnd(ctx, sampleEnd)
				return nil, nil, -1, c.transportErr(ctx, timedOut())
			}
			conn.release(!plain.close)
			return data, nil, -1, nil
		}
		if !sampleEnd.IsZero() {
			// answer classifies a failed read by ctx: once the sample's
			// deadline has aborted it, ctx must say so.
			timedOut = func() bool {
				awaitSampleEnd(ctx, sampleEnd)
				return !time.Now().Before(deadline)
			}
		}
		data, ra, merr, done := c.answer(ctx, timedOut, resp)
		conn.release(done && !resp.Close && resp.StatusCode >= 200)
		return data, nil, ra, merr
	}
}

// awaitSampleEnd waits, after a failed call that its eval sample's scope
// bounded (conn.arm returned the sample's deadline, sampleEnd), for ctx
// to be done if the sample's deadline has passed: the call's own timer
// aborted it there, and the context's timer fires at the same time, so
// the call is classified by ctx as through context.AfterFunc.
func awaitSampleEnd(ctx context.Context, sampleEnd time.Time) {
	if !sampleEnd.IsZero() && !time.Now().Before(sampleEnd) {
		<-ctx.Done()
	}
}

// pool keeps idle cleartext HTTP/1.1 connections by host:port. It owns no
// goroutine: a connection is used by one call at a time, on the caller's
// goroutine, and an idle one is closed by its timer.
type pool struct {
	dialer         net.Dialer
	maxIdlePerHost int
	maxIdle        int
	idleTimeout    time.Duration

	mu    sync.Mutex
	idle  map[string][]*conn // most recently used last
	nidle int
	// keep bounds each host's busy and idle connections together
	// (KeepIdle); -1: maxIdlePerHost alone bounds the idle ones.
	keep int
	// busy counts each host's connections that get handed to a call and
	// that were not released yet (put back or closed).
	busy map[string]int
}

func newPool(maxIdlePerHost, maxIdle int, idleTimeout time.Duration) *pool {
	return &pool{
		dialer:         net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, ControlContext: connectLoopbackNow},
		maxIdlePerHost: maxIdlePerHost,
		maxIdle:        maxIdle,
		idleTimeout:    idleTimeout,
		idle:           map[string][]*conn{},
		keep:           -1,
		busy:           map[string]int{},
	}
}

// get returns a connection to addr: the most recently used idle one that
// is still open and silent, else a new one (always new when fresh), dialled
// by deadline. reused reports an idle one.
func (p *pool) get(ctx context.Context, addr string, fresh bool, deadline time.Time) (c *conn, reused bool, err error) {
	for !fresh {
		idle := p.takeIdle(addr)
		if idle == nil {
			break
		}
		if idle.br.Buffered() == 0 && idleConnAlive(idle) {
			return idle, true, nil
		}
		p.closed(addr)
		idle.close()
	}
	d := p.dialer
	d.Deadline = deadline
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	p.mu.Lock()
	p.busy[addr]++
	p.mu.Unlock()
	c = &conn{pool: p, nc: nc, addr: addr, readLimit: -1, aborted: make(chan struct{})}
	c.abortFn = c.abort
	c.br = bufio.NewReaderSize(c, 4<<10)
	c.bw = bufio.NewWriterSize(c, 4<<10)
	return c, false, nil
}

// takeIdle hands out addr's most recently used idle connection, if any.
func (p *pool) takeIdle(addr string) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.idle[addr]
	if len(list) == 0 {
		return nil
	}
	c := list[len(list)-1]
	list[len(list)-1] = nil
	p.idle[addr] = list[:len(list)-1]
	p.nidle--
	p.busy[addr]++
	// If the timer has fired, its expire finds c gone and does nothing.
	c.idleTimer.Stop()
	return c
}

// closed counts a connection to addr that get handed out as closed.
func (p *pool) closed(addr string) {
	p.mu.Lock()
	p.busy[addr]--
	p.mu.Unlock()
}

// put keeps c, which get handed out, idle, or closes it when the pool is
// full (its own bounds, or KeepIdle's).
func (p *pool) put(c *conn) {
	p.mu.Lock()
	p.busy[c.addr]--
	if n := len(p.idle[c.addr]); n >= p.maxIdlePerHost || p.nidle >= p.maxIdle || (p.keep >= 0 && n+p.busy[c.addr] >= p.keep) {
		p.mu.Unlock()
		c.close()
		return
	}
	p.idle[c.addr] = append(p.idle[c.addr], c)
	p.nidle++
	if c.idleTimer == nil {
		c.idleTimer = time.AfterFunc(p.idleTimeout, func() { p.expire(c) })
	} else {
		c.idleTimer.Reset(p.idleTimeout)
	}
	p.mu.Unlock()
}

// expire closes c if it is still idle.
func (p *pool) expire(c *conn) {
	p.mu.Lock()
	list := p.idle[c.addr]
	found := false
	for i, x := range list {
		if x == c {
			copy(list[i:], list[i+1:])
			list[len(list)-1] = nil
			p.idle[c.addr] = list[:len(list)-1]
			p.nidle--
			found = true
			break
		}
	}
	p.mu.Unlock()
	if found {
		c.close()
	}
}

// keepIdle sets the pool's keep bound (KeepIdle) and closes the idle
// connections beyond it, each host's least recently used first.
func (p *pool) keepIdle(n int) {
	p.mu.Lock()
	p.keep = n
	var drop []*conn
	if n >= 0 {
		for addr, list := range p.idle {
			keep := max(n-p.busy[addr], 0)
			if len(list) <= keep {
				continue
			}
			k := len(list) - keep
			for _, c := range list[:k] {
				c.idleTimer.Stop()
				drop = append(drop, c)
			}
			rest := copy(list, list[k:])
			clear(list[rest:])
			p.idle[addr] = list[:rest]
			p.nidle -= k
		}
	}
	p.mu.Unlock()
	for _, c := range drop {
		c.close()
	}
}

// closeIdle closes every idle connection.
func (p *pool) closeIdle() {
	p.mu.Lock()
	var all []*conn
	for addr, list := range p.idle {
		for _, c := range list {
			c.idleTimer.Stop()
			all = append(all, c)
		}
		delete(p.idle, addr)
	}
	p.nidle = 0
	p.mu.Unlock()
	for _, c := range all {
		c.close()
	}
}

// idleCount is the number of idle connections (tests).
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nidle
}

// conn is one pooled connection. Its reads count against readLimit while
// an answer's headers are read, and its writes count what reached the
// kernel, so a request that never left can go out on a new connection.
type conn struct {
	pool      *pool
	nc        net.Conn
	addr      string
	br        *bufio.Reader
	bw        *bufio.Writer
	readLimit int64 // bytes the headers may still take; -1: none
	written   int64
	idleTimer *time.Timer
	// attempt aborts the call in flight at its deadline (arm); made by
	// the connection's first call. stopCtx unregisters the abort from
	// the call's context, or scope, when set, from the call's eval
	// sample scope instead.
	attempt    *time.Timer
	stopCtx    func() bool
	scope      *samplescope.Scope
	scopeToken uint64
	abortFn    func() // abort, as a func made once
	abortOnce  atomic.Bool
	// The idle check's raw connection, its peek as a func and the
	// peek's verdict (idleConnAlive; made by the first check).
	raw       syscall.RawConn
	peekFn    func(fd uintptr) bool
	peekAlive bool
	peek      [1]byte
	// A borrowed answer's body left in br (onceLean): its length, whether
	// c may be reused after it, and returnLent as a func made once.
	lent     int
	lentKeep bool
	returnFn func()
	length   [20]byte      // a request's Content-Length, formatted
	aborted  chan struct{} // closed by abort
}

func (c *conn) Read(b []byte) (int, error) {
	if c.readLimit < 0 {
		return c.nc.Read(b)
	}
	if c.readLimit == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(b)) > c.readLimit {
		b = b[:c.readLimit]
	}
	n, err := c.nc.Read(b)
	c.readLimit -= int64(n)
	return n, err
}

func (c *conn) Write(b []byte) (int, error) {
	n, err := c.nc.Write(b)
	c.written += int64(n)
	return n, err
}

// abort ends the call on c: its blocked reads and writes fail at once.
// It runs when the call's context is done or its deadline passes (the
// first of the two; c is closed after it).
func (c *conn) abort() {
	if !c.abortOnce.CompareAndSwap(false, true) {
		return
	}
	_ = c.nc.SetDeadline(aLongTimeAgo)
	close(c.aborted)
}

// arm makes ctx's end and deadline abort the call about to start on c
// (release disarms both). When ctx is an eval sample's context with its
// scope free (samplescope), the abort is armed on the scope, which runs it
// when the sample is cancelled, and the attempt's timer also stops the
// call at the sample's deadline, if that comes first; arm then returns
// the sample's deadline (zero otherwise: ctx's end reaches the call
// through context.AfterFunc).
func (c *conn) arm(ctx context.Context, deadline time.Time) (sampleEnd time.Time) {
	at := deadline
	if scope := samplescope.Of(ctx); scope != nil {
		if token, end := scope.Arm(ctx, c.abortFn); token != 0 {
			c.scope, c.scopeToken = scope, token
			if !end.IsZero() && end.Before(at) {
				at, sampleEnd = end, end
			}
		}
	}
	if c.scope == nil {
		c.stopCtx = context.AfterFunc(ctx, c.abortFn)
	}
	if c.attempt == nil {
		c.attempt = time.AfterFunc(time.Until(at), c.abortFn)
	} else {
		c.attempt.Reset(time.Until(at))
	}
	return sampleEnd
}

// disarm undoes arm; it reports whether neither abort had begun.
func (c *conn) disarm() bool {
	var ctxStopped bool
	if c.scope != nil {
		ctxStopped = c.scope.Disarm(c.scopeToken)
		c.scope = nil
	} else {
		ctxStopped = c.stopCtx()
		c.stopCtx = nil
	}
	return c.attempt.Stop() && ctxStopped
}

func (c *conn) close() { _ = c.nc.Close() }

// roundTrip writes the request of lr with body and reads its answer's
// status and headers: a plain answer's (readPlainHead) when it is one,
// else by http.ReadResponse. The body is left on c.br.
func (c *conn) roundTrip(lr *leanRequest, body []byte, limit int64) (plainHead, *http.Response, error) {
	c.written = 0
	_, _ = c.bw.Write(lr.head)
	_, _ = c.bw.Write(strconv.AppendInt(c.length[:0], int64(len(body)), 10))
	_, _ = c.bw.Write(lr.tail)
	_, _ = c.bw.Write(body)
	if err := c.bw.Flush(); err != nil {
		return plainHead{}, nil, err
	}
	req := lr.req
	c.readLimit = maxLeanHeaderBytes
	defer func() { c.readLimit = -1 }()
	if h, err := readPlainHead(c.br, limit); err != nil || h.ok {
		return h, nil, err
	}
	for range max1xx + 1 {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return plainHead{}, nil, err
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			return plainHead{}, resp, nil
		}
	}
	return plainHead{}, nil, errToo1xx
}

// plainHead is what the caller needs of a plain answer's head.
type plainHead struct {
	ok     bool  // a plain answer, its head consumed
	length int64 // its Content-Length, within the bound
	close  bool  // "Connection: close"
}

// readPlainHead reads the head of an answer of the plainest shape, which
// is what model servers send: "HTTP/1.1 2xx" (not 204), header lines of
// token names and printable values, one Content-Length within limit, no
// Transfer-Encoding or Trailer, Connection at most "close" or
// "keep-alive". Such an answer's head is read here without a header map
// (http.ReadResponse's map and strings were ~0.7 KB of every call). For
// any other answer, or a head longer than br's buffer, ok is false and
// nothing is consumed: http.ReadResponse reads it as it always has. An
// error is the connection's.
func readPlainHead(br *bufio.Reader, limit int64) (plainHead, error) {
	var head []byte
	for {
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			head = buf[:i+4]
			break
		}
		if br.Buffered() == br.Size() {
			return plainHead{}, nil // longer than the buffer
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return plainHead{}, err
		}
	}
	h, ok := parsePlainHead(head[:len(head)-4], limit)
	if !ok {
		return plainHead{}, nil
	}
	_, _ = br.Discard(len(head))
	h.ok = true
	return h, nil
}

// parsePlainHead parses a head (without its blank line) readPlainHead
// accepts; ok is false for any other.
func parsePlainHead(head []byte, limit int64) (h plainHead, ok bool) {
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	// The status line: "HTTP/1.1 2xx" and an optional reason.
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || line[9] != '2' ||
		!isDigit(line[10]) || !isDigit(line[11]) || string(line[9:12]) == "204" ||
		(len(line) > 12 && line[12] != ' ') {
		return h, false
	}
	// A bare CR or LF, or any other control byte, in the reason: net/http
	// ends lines at a bare LF, so such a head is not what it looks like here.
	if !printable(line) {
		return h, false
	}
	h.length = -1
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found || len(name) == 0 {
			return h, false
		}
		for _, b := range name {
			if !isTokenByte(b) {
				return h, false
			}
		}
		if !printable(value) {
			return h, false
		}
		value = bytes.Trim(value, " \t")
		switch {
		case asciiEqualFold(name, "Content-Length"):
			if h.length >= 0 || len(value) == 0 || len(value) > 18 {
				return h, false
			}
			var n int64
			for _, b := range value {
				if !isDigit(b) {
					return h, false
				}
				n = n*10 + int64(b-'0')
			}
			h.length = n
		case asciiEqualFold(name, "Transfer-Encoding"), asciiEqualFold(name, "Trailer"):
			return h, false
		case asciiEqualFold(name, "Connection"):
			switch {
			case asciiEqualFold(value, "close"):
				h.close = true
			case asciiEqualFold(value, "keep-alive"):
			default:
				return h, false
			}
		}
	}
	return h, h.length >= 0 && h.length <= limit
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// printable reports bytes that are visible ASCII, space or tab only.
func printable(s []byte) bool {
	for _, b := range s {
		if (b < 0x20 && b != '\t') || b > 0x7e {
			return false
		}
	}
	return true
}

// isTokenByte reports an RFC 9110 token character (a header name's).
func isTokenByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', isDigit(b):
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

// asciiEqualFold reports whether b equals s, ASCII case folded.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// returnLent ends a borrowed answer (onceLean): its body is dropped from
// the buffer and c released as a copied answer's would have been.
func (c *conn) returnLent() {
	_, _ = c.br.Discard(c.lent)
	c.lent = 0
	c.release(c.lentKeep)
}

// release ends a call on c and disarms its aborts. c goes back to the
// pool only if reusable and never aborted; else it is closed.
func (c *conn) release(reusable bool) {
	if !c.disarm() {
		<-c.aborted // abort ran: c's deadline has passed
		reusable = false
	}
	if reusable && c.br.Buffered() == 0 {
		c.pool.put(c)
		return
	}
	c.pool.closed(c.addr)
	c.close()
}
