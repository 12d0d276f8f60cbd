package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"
)

// Bounds on what a caller may send. The fake is a bench tool for local
// callers: there are no read timeouts (a connection lives until its caller
// closes it or the fake stops), but every request is bounded in size.
const (
	// maxHead is fasthttp's read buffer: a request's line and headers must
	// fit in it (431 otherwise).
	maxHead = 8 << 10
	// maxBody is the largest request body the fake reads (and discards).
	maxBody = 32 << 20
)

// server is openaifake's HTTP/1.1 server on fasthttp, which keeps a call as
// cheap for the caller and the fake as the protocol allows: one goroutine
// per connection (reused across connections) reads each request into a
// reused buffer and runs the handler, which sleeps -delay in it (no timer
// or goroutine per call); the answer goes out whole with Content-Length in
// one write. net/http's server answered a flushed handler chunked, with a
// second write for the last chunk, and added a background-read goroutine,
// a timer and header maps per request.
type server struct {
	delay time.Duration
	body  []byte        // every completion's JSON answer
	limit *rate.Limiter // nil: no rate limit
	http  *fasthttp.Server

	served, inFlight, conns, throttled, firstNS, lastNS atomic.Int64
	arrived, nth, nthNS                                 atomic.Int64 // requests since the reset, and when the nth came
	lateNS, lateN, gapNS, gapN, resetNS                 atomic.Int64
}

// conn is an accepted connection with its state. Only the goroutine
// fasthttp serves it from reads or writes lastAnswer.
type conn struct {
	net.Conn
	// lastAnswer is when the fake last finished an answer on it (Unix
	// nanoseconds, 0 for none): the start of the caller's turnaround.
	lastAnswer int64
}

// listener counts the connections it accepts and gives each its state.
type listener struct {
	net.Listener
	conns *atomic.Int64
}

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.conns.Add(1)
	return &conn{Conn: c}, nil
}

// newServer builds the fake answering every completion with answer after
// delay; rpm > 0 makes it a rate-limited provider (see the command's doc).
func newServer(delay time.Duration, answer string, rpm int, burstSeconds float64) (*server, error) {
	body, err := completionBody(answer)
	if err != nil {
		return nil, err
	}
	s := &server{delay: delay, body: body}
	if rpm > 0 {
		s.limit = rate.NewLimiter(rate.Limit(float64(rpm)/60), max(1, int(math.Ceil(float64(rpm)/60*burstSeconds))))
	}
	s.http = &fasthttp.Server{
		Handler:               s.handle,
		ReadBufferSize:        maxHead,
		MaxRequestBodySize:    maxBody,
		NoDefaultServerHeader: true,
		CloseOnShutdown:       true,
		// fasthttp's worker-pool cleaner notices a stop only when it wakes,
		// every MaxIdleWorkerDuration (10 s by default): short, so that
		// shutdown leaves no goroutine behind for long.
		MaxIdleWorkerDuration: 100 * time.Millisecond,
		ErrorHandler:          refuse,
	}
	return s, nil
}

// refuse answers a request fasthttp could not read (it then closes the
// connection); fasthttp's own handler answers a body too large 400.
func refuse(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.As(err, &small):
		ctx.Error("request head over "+strconv.Itoa(maxHead)+" bytes", http.StatusRequestHeaderFieldsTooLarge)
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		ctx.Error("body over "+strconv.Itoa(maxBody)+" bytes", http.StatusRequestEntityTooLarge)
	default:
		ctx.Error("malformed request", http.StatusBadRequest)
	}
}

// serve accepts connections on ln until shutdown closes it.
func (s *server) serve(ln net.Listener) error {
	return s.http.Serve(listener{Listener: ln, conns: &s.conns})
}

// shutdown stops accepting, lets the answers in flight be written (up to
// grace, with Connection: close), and closes every connection.
func (s *server) shutdown(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.http.ShutdownWithContext(ctx); err != nil {
		log.Printf("openaifake: shutdown: %v", err)
	}
}

// handle answers one request.
func (s *server) handle(ctx *fasthttp.RequestCtx) {
	post := ctx.IsPost()
	switch string(ctx.Path()) {
	case "/v1/chat/completions", "/chat/completions":
		if !post {
			ctx.Error("POST only", http.StatusMethodNotAllowed)
			ctx.Response.Header.Set("Allow", http.MethodPost)
			return
		}
		s.complete(ctx)
	case "/stats":
		if !ctx.IsGet() {
			ctx.Error("method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(s.statsJSON())
	case "/stats/reset":
		if !post {
			ctx.Error("method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if err := s.reset(ctx.QueryArgs()); err != nil {
			ctx.Error(err.Error(), http.StatusBadRequest)
			return
		}
		ctx.SetStatusCode(http.StatusNoContent)
	default:
		ctx.Error("404 page not found", http.StatusNotFound)
	}
}

// complete answers a completion after the delay, or 429 at once when the
// rate limit's bucket is empty.
func (s *server) complete(ctx *fasthttp.RequestCtx) {
	now := time.Now().UnixNano()
	c, ok := ctx.Conn().(*conn)
	if !ok { // not accepted by serve (fasthttp.ServeConn): no gap
		c = &conn{}
	}
	if last := c.lastAnswer; last > 0 && last > s.resetNS.Load() {
		s.gapNS.Add(now - last)
		s.gapN.Add(1)
	}
	s.firstNS.CompareAndSwap(0, now)
	if s.arrived.Add(1) == s.nth.Load() {
		s.nthNS.Store(now)
	}
	ctx.SetContentType("application/json")
	if s.limit != nil && !s.limit.Allow() {
		s.throttled.Add(1)
		ctx.Response.Header.Set("Retry-After", "1")
		ctx.SetStatusCode(http.StatusTooManyRequests)
		ctx.SetBody(rateLimitBody)
		return
	}
	s.inFlight.Add(1)
	// The connection's goroutine waits itself (no timer or goroutine per
	// call); a caller that hangs up meanwhile is noticed when its answer
	// is written.
	time.Sleep(s.delay)
	s.served.Add(1)
	ctx.SetBody(s.body)
	// "Answered" is when the answer is handed to fasthttp, which writes it
	// in one write as the handler returns.
	answered := time.Now().UnixNano()
	s.inFlight.Add(-1)
	s.lastNS.Store(answered)
	s.lateNS.Add(answered - now - s.delay.Nanoseconds())
	s.lateN.Add(1)
	c.lastAnswer = answered
}

// rateLimitBody is the 429's body, in OpenAI's error shape.
var rateLimitBody = []byte(`{"error":{"message":"rate limit","type":"rate_limit_exceeded"}}` + "\n")

// statsJSON is GET /stats's answer.
func (s *server) statsJSON() []byte {
	return fmt.Appendf(nil, `{"served":%d,"in_flight":%d,"conns":%d,"throttled":%d,"first_ns":%d,"last_ns":%d,"nth_ns":%d,"late_ns":%d,"late_n":%d,"gap_ns":%d,"gap_n":%d}`,
		s.served.Load(), s.inFlight.Load(), s.conns.Load(), s.throttled.Load(), s.firstNS.Load(), s.lastNS.Load(), s.nthNS.Load(),
		s.lateNS.Load(), s.lateN.Load(), s.gapNS.Load(), s.gapN.Load())
}

// reset is POST /stats/reset?nth=N.
func (s *server) reset(args *fasthttp.Args) error {
	var n int64
	if v := args.Peek("nth"); v != nil {
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
