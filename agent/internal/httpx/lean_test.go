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
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/internal/testutil"
)

const leanKey = "Bearer planted-LEAN-KEY-7731"

// leanServer is a real HTTP server on 127.0.0.1 that counts requests and
// the connections it opened and saw closed.
type leanServer struct {
	*httptest.Server
	requests, opened, closed atomic.Int32
}

func newLeanServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *leanServer {
	t.Helper()
	s := &leanServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.requests.Add(1))
		if r.Header.Get("Authorization") != leanKey || r.Header.Get("Accept-Encoding") != "" {
			t.Errorf("request %d: headers %v", n, r.Header)
		}
		// Reading the body to its end lets the server see the client
		// close the connection (r.Context() ends).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("request %d: %v", n, err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		handle(w, r, n)
	}))
	testutil.CountConns(s.Server, &s.opened, &s.closed)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// leanClient is a client on its own pool, closed with the test.
func leanClient(t *testing.T, p *pool) *Client {
	t.Helper()
	t.Cleanup(p.closeIdle)
	return &Client{Provider: "test", pool: p, MaxAttempts: 1, Timeout: 10 * time.Second, BaseBackoff: time.Millisecond}
}

func call(c *Client, ctx context.Context, url, body string) ([]byte, *model.Error) {
	data, err := c.PostJSON(ctx, url, http.Header{"Authorization": {leanKey}}, []byte(body))
	if err != nil {
		var me *model.Error
		if !errors.As(err, &me) {
			panic(fmt.Sprintf("not a *model.Error: %v", err))
		}
		return data, me
	}
	return data, nil
}

// noSecret fails if an error repeats the key.
func noSecret(t *testing.T, me *model.Error) {
	t.Helper()
	if me != nil && (strings.Contains(fmt.Sprintf("%v %+v %#v", me, me, me), "LEAN-KEY")) {
		t.Fatalf("error leaks the key: %v", me)
	}
}

func TestLean_ReusesAConnectionReadToItsEnd(t *testing.T) {
	for name, handle := range map[string]func(w http.ResponseWriter){
		"content-length": func(w http.ResponseWriter) { _, _ = io.WriteString(w, `{"ok":true}`) },
		"chunked": func(w http.ResponseWriter) { // flushed before its end: no length
			for _, part := range []string{`{"ok"`, `:`, `true}`} {
				_, _ = io.WriteString(w, part)
				w.(http.Flusher).Flush()
			}
		},
		"error answer drained": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, strings.Repeat("e", 1000))
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				if b, _ := io.ReadAll(r.Body); string(b) != `{"q":1}` {
					t.Errorf("body %q", b)
				}
				handle(w)
			})
			c := leanClient(t, newPool(4, 8, time.Minute))
			for i := range 3 {
				data, me := call(c, context.Background(), s.URL+"/v1/x", `{"q":1}`)
				noSecret(t, me)
				if name == "error answer drained" {
					if me == nil || me.Class != model.ClassClient || me.Status != 400 {
						t.Fatalf("call %d: %v", i, me)
					}
				} else if me != nil || string(data) != `{"ok":true}` {
					t.Fatalf("call %d: %q %v", i, data, me)
				}
			}
			if s.requests.Load() != 3 || s.opened.Load() != 1 || c.pool.idleCount() != 1 {
				t.Fatalf("requests %d, connections %d, idle %d: want 3 on one, kept", s.requests.Load(), s.opened.Load(), c.pool.idleCount())
			}
		})
	}
}

// hijackAnswer writes raw bytes as the answer and closes the connection.
func hijackAnswer(t *testing.T, w http.ResponseWriter, raw string) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	_, _ = buf.WriteString(raw)
	_ = buf.Flush()
	_ = conn.Close()
}

func TestLean_ConnectionsTheServerEndsAreNotReused(t *testing.T) {
	for name, handle := range map[string]func(t *testing.T, w http.ResponseWriter){
		"Connection: close": func(_ *testing.T, w http.ResponseWriter) {
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "ok")
		},
		"no length, read to close": func(t *testing.T, w http.ResponseWriter) {
			hijackAnswer(t, w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\nok")
		},
		"HTTP/1.0": func(t *testing.T, w http.ResponseWriter) {
			hijackAnswer(t, w, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newLeanServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) { handle(t, w) })
			c := leanClient(t, newPool(4, 8, time.Minute))
			for i := range 2 {
				if data, me := call(c, context.Background(), s.URL, "{}"); me != nil || string(data) != "ok" {
					t.Fatalf("call %d: %q %v", i, data, me)
				}
			}
			if s.opened.Load() != 2 || c.pool.idleCount() != 0 {
				t.Fatalf("connections %d, idle %d: want one per call, none kept", s.opened.Load(), c.pool.idleCount())
			}
		})
	}
}

func TestLean_ServerClosedIdleConnectionIsNotUsed(t *testing.T) {
	s := newLeanServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) { _, _ = io.WriteString(w, "ok") })
	c := leanClient(t, newPool(4, 8, time.Minute))
	for i := 1; i <= 5; i++ {
		if data, me := call(c, context.Background(), s.URL, "{}"); me != nil || string(data) != "ok" {
			t.Fatalf("call %d: %q %v", i, data, me)
		}
		if c.pool.idleCount() != 1 {
			t.Fatalf("call %d left %d idle connections", i, c.pool.idleCount())
		}
		s.CloseClientConnections()
		testutil.WaitFor(t, 5*time.Second, "the server to close its connection", func() bool { return s.closed.Load() == int32(i) })
	}
	if s.requests.Load() != 5 || s.opened.Load() != 5 {
		t.Fatalf("requests %d on %d connections: want 5 on 5 (none sent twice)", s.requests.Load(), s.opened.Load())
	}
}

func TestLean_CancelledMidAnswerClosesTheConnection(t *testing.T) {
	mid := make(chan struct{})
	gone := make(chan struct{})
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, `{"partial":`)
		w.(http.Flusher).Flush()
		close(mid)
		select {
		case <-r.Context().Done(): // the client closed the connection
			close(gone)
		case <-time.After(30 * time.Second):
		}
	})
	c := leanClient(t, newPool(4, 8, time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-mid
		cancel()
	}()
	start := time.Now()
	_, me := call(c, ctx, s.URL, "{}")
	if me == nil || me.Class != model.ClassCancelled || time.Since(start) > 10*time.Second {
		t.Fatalf("err %v after %v: want cancelled at once", me, time.Since(start))
	}
	noSecret(t, me)
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not closed")
	}
	if c.pool.idleCount() != 0 {
		t.Fatal("a cancelled connection went back to the pool")
	}
}

func TestLean_SlowAttemptIsATimeout(t *testing.T) {
	gone := make(chan struct{}, 2)
	s := newLeanServer(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-r.Context().Done():
			gone <- struct{}{}
		case <-time.After(30 * time.Second):
		}
	})
	c := leanClient(t, newPool(4, 8, time.Minute))
	c.Timeout = 100 * time.Millisecond
	if _, me := call(c, context.Background(), s.URL, "{}"); me == nil || me.Class != model.ClassTimeout || me.Retryable {
		t.Fatalf("attempt timeout: %v", me)
	}
	c.Timeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, me := call(c, ctx, s.URL, "{}"); me == nil || me.Class != model.ClassTimeout {
		t.Fatalf("caller's deadline: %v", me)
	}
	for range 2 {
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			t.Fatal("a timed-out connection was not closed")
		}
	}
	if s.requests.Load() != 2 || c.pool.idleCount() != 0 {
		t.Fatalf("requests %d, idle %d", s.requests.Load(), c.pool.idleCount())
	}
}

func TestLean_OversizedAnswersAreNotReadOn(t *testing.T) {
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.URL.Path {
		case "/endless": // a body that never ends: only closing the connection stops it
			if n == 1 {
				chunk := []byte(strings.Repeat("x", 32<<10))
				for {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}
		case "/error": // an error answer longer than what is drained
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(strings.Repeat("e", 1<<20)))
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	c := leanClient(t, newPool(4, 8, time.Minute))
	c.MaxResponseBytes = 1024
	if _, me := call(c, context.Background(), s.URL+"/endless", "{}"); me == nil || me.Class != model.ClassTooLarge {
		t.Fatalf("endless body: %v", me)
	}
	if _, me := call(c, context.Background(), s.URL+"/error", "{}"); me == nil || me.Class != model.ClassServer || me.Status != 502 {
		t.Fatalf("long error body: %v", me)
	}
	if data, me := call(c, context.Background(), s.URL+"/endless", "{}"); me != nil || string(data) != "ok" {
		t.Fatalf("after: %q %v", data, me)
	}
	if s.opened.Load() != 3 {
		t.Fatalf("%d connections: an answer not read to its end left its connection in use", s.opened.Load())
	}
}

func TestLean_EndlessHeadersAreATransportError(t *testing.T) {
	s := newLeanServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
		for { // until the client gives up and closes
			if _, err := buf.WriteString(line); err != nil {
				return
			}
		}
	})
	c := leanClient(t, newPool(4, 8, time.Minute))
	c.Timeout = 20 * time.Second // without the bound, the call would end here, as a timeout
	if _, me := call(c, context.Background(), s.URL, "{}"); me == nil || me.Class != model.ClassTransport {
		t.Fatalf("endless headers: %v", me)
	}
}

func TestLean_IdleConnectionsAreBoundedAndExpire(t *testing.T) {
	t.Run("per host", func(t *testing.T) {
		var arrived sync.WaitGroup
		arrived.Add(4)
		s := newLeanServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			arrived.Done()
			arrived.Wait() // all four calls are in flight, on four connections
			_, _ = io.WriteString(w, "ok")
		})
		c := leanClient(t, newPool(2, 8, time.Minute))
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, me := call(c, context.Background(), s.URL, "{}"); me != nil {
					t.Error(me)
				}
			})
		}
		wg.Wait()
		if c.pool.idleCount() != 2 {
			t.Fatalf("%d idle, want the per-host bound 2", c.pool.idleCount())
		}
		testutil.WaitFor(t, 5*time.Second, "two connections closed", func() bool { return s.closed.Load() == 2 })
	})
	t.Run("idle timeout", func(t *testing.T) {
		s := newLeanServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) { _, _ = io.WriteString(w, "ok") })
		c := leanClient(t, newPool(2, 8, 50*time.Millisecond))
		if _, me := call(c, context.Background(), s.URL, "{}"); me != nil {
			t.Fatal(me)
		}
		testutil.WaitFor(t, 5*time.Second, "the idle connection to expire", func() bool {
			return s.closed.Load() == 1 && c.pool.idleCount() == 0
		})
	})
	t.Run("closeIdle", func(t *testing.T) {
		s := newLeanServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) { _, _ = io.WriteString(w, "ok") })
		p := newPool(2, 8, time.Minute)
		c := leanClient(t, p)
		if _, me := call(c, context.Background(), s.URL, "{}"); me != nil {
			t.Fatal(me)
		}
		p.closeIdle()
		testutil.WaitFor(t, 5*time.Second, "the pool's connection closed", func() bool { return s.closed.Load() == 1 && p.idleCount() == 0 })
	})
	t.Run("keepIdle", func(t *testing.T) {
		// Four calls in flight at once leave four idle connections.
		var arrived sync.WaitGroup
		arrived.Add(4)
		s := newLeanServer(t, func(w http.ResponseWriter, _ *http.Request, n int) {
			if n <= 4 {
				arrived.Done()
				arrived.Wait()
			}
			_, _ = io.WriteString(w, "ok")
		})
		p := newPool(8, 8, time.Minute)
		c := leanClient(t, p)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, me := call(c, context.Background(), s.URL, "{}"); me != nil {
					t.Error(me)
				}
			})
		}
		wg.Wait()
		addr := s.Listener.Addr().String()
		if p.idleCount() != 4 || p.busy[addr] != 0 {
			t.Fatalf("%d idle, %d busy: want 4 idle", p.idleCount(), p.busy[addr])
		}
		get := func() *conn {
			t.Helper()
			got, _, err := p.get(context.Background(), addr, false, time.Now().Add(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		closed := func(n int32) {
			t.Helper()
			testutil.WaitFor(t, 5*time.Second, fmt.Sprintf("%d connections closed", n), func() bool { return s.closed.Load() == n })
		}
		// Bounded at 2: two are closed at once, the least recently used.
		newest := slices.Clone(p.idle[addr][2:])
		p.keepIdle(2)
		if p.idleCount() != 2 || !slices.Equal(p.idle[addr], newest) {
			t.Fatalf("%d idle after keepIdle(2), want the two most recently used", p.idleCount())
		}
		closed(2)
		// A connection in a call counts: with one taken, a call takes the
		// other and puts it back, kept (two in all).
		taken := get()
		if _, me := call(c, context.Background(), s.URL, "{}"); me != nil || p.idleCount() != 1 || p.busy[addr] != 1 {
			t.Fatalf("%v, %d idle, %d busy: want the call's connection kept", me, p.idleCount(), p.busy[addr])
		}
		// Bounded at 1 with one taken: the idle one is closed; the taken
		// one goes back, kept.
		p.keepIdle(1)
		closed(3)
		p.put(taken)
		if p.idleCount() != 1 || p.busy[addr] != 0 {
			t.Fatalf("%d idle, %d busy: want the taken connection kept", p.idleCount(), p.busy[addr])
		}
		// A call beyond the bound (one taken, bounded at 1) dials, and its
		// connection is closed when put back, not kept.
		taken = get()
		if _, me := call(c, context.Background(), s.URL, "{}"); me != nil || p.idleCount() != 0 {
			t.Fatalf("%v, %d idle: want the call's connection closed", me, p.idleCount())
		}
		closed(4)
		p.put(taken)
		// Lifted, the pool keeps what its own bounds allow again (two
		// connections, the idle one and a new one, put back: both kept);
		// 0 closes every idle connection.
		p.keepIdle(-1)
		two := [2]*conn{get(), get()}
		p.put(two[0])
		p.put(two[1])
		if p.idleCount() != 2 {
			t.Fatalf("%d idle after keepIdle(-1), want 2", p.idleCount())
		}
		p.keepIdle(0)
		if p.idleCount() != 0 || p.busy[addr] != 0 {
			t.Fatalf("%d idle, %d busy after keepIdle(0)", p.idleCount(), p.busy[addr])
		}
		closed(6)
		if s.opened.Load() != 6 {
			t.Fatalf("%d connections opened, want 6", s.opened.Load())
		}
	})
}

// TestLean_ManyConcurrentCalls runs 64 callers over a pool that keeps 8:
// every caller reads its own answer, whatever connection carried it.
func TestLean_ManyConcurrentCalls(t *testing.T) {
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		b, _ := io.ReadAll(r.Body)
		if len(b)%2 == 0 {
			_, _ = w.Write(b)
			return
		}
		w.(http.Flusher).Flush() // odd ones chunked
		_, _ = w.Write(b)
	})
	c := leanClient(t, newPool(8, 16, time.Minute))
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 20 {
				body := `{"caller":` + strconv.Itoa(g) + `,"call":` + strconv.Itoa(i) + strings.Repeat(" ", i) + `}`
				data, me := call(c, context.Background(), s.URL, body)
				if me != nil || string(data) != body {
					t.Errorf("caller %d call %d: %q %v", g, i, data, me)
					return
				}
			}
		})
	}
	wg.Wait()
	if s.requests.Load() != 64*20 || c.pool.idleCount() > 8 {
		t.Fatalf("requests %d, idle %d", s.requests.Load(), c.pool.idleCount())
	}
	idle := int32(c.pool.idleCount())
	testutil.WaitFor(t, 5*time.Second, "every connection but the idle ones closed", func() bool {
		return s.opened.Load()-s.closed.Load() == idle
	})
}

func TestLean_WhichCallsTakeIt(t *testing.T) {
	t.Run("env", func(t *testing.T) {
		for v, want := range map[string]bool{"": DefaultLean && leanSupported, "on": leanSupported, "off": false} {
			t.Setenv(LeanEnv, v)
			c, err := NewClient("test", nil, model.HTTPConfig{})
			if err != nil || (c.pool != nil) != want {
				t.Errorf("%s=%q: lean %v err %v, want %v", LeanEnv, v, c.pool != nil, err, want)
			}
		}
		t.Setenv(LeanEnv, "on")
		if c, _ := NewClient("test", &http.Client{}, model.HTTPConfig{}); c.pool != nil {
			t.Error("a caller's own http.Client was bypassed")
		}
		t.Setenv(LeanEnv, "yes")
		if _, err := NewClient("test", nil, model.HTTPConfig{}); err == nil || !strings.Contains(err.Error(), LeanEnv) {
			t.Errorf("%s=yes: %v, want an error naming it", LeanEnv, err)
		}
	})
	t.Run("urls", func(t *testing.T) {
		for u, want := range map[string]bool{
			"http://127.0.0.1:8000/v1/chat/completions": true,
			"http://localhost/v1":                       true,
			"https://api.openai.com/v1":                 false,
		} {
			req, _ := http.NewRequest(http.MethodPost, u, nil)
			if got := leanApplies(req); got != want {
				t.Errorf("%s: lean %v, want %v", u, got, want)
			}
		}
		saved := Transport.Proxy
		t.Cleanup(func() { Transport.Proxy = saved })
		Transport.Proxy = func(*http.Request) (*url.URL, error) { return &url.URL{Scheme: "http", Host: "proxy:3128"}, nil }
		req, _ := http.NewRequest(http.MethodPost, "http://10.0.0.1/v1", nil)
		if leanApplies(req) {
			t.Error("a proxied URL took the lean path")
		}
	})
}

// TestLean_RequestBytesAreRequestWrites holds the lean path's prepared
// request to net/http's own: for each endpoint and body, the bytes a
// server receives are exactly what http.Request.Write writes for the same
// POST with the same headers (Content-Type and Accept added).
func TestLean_RequestBytesAreRequestWrites(t *testing.T) {
	received := make(chan []byte, 1)
	addr := testutil.ServeConns(t, func(nc net.Conn) {
		br := bufio.NewReader(nc)
		for {
			// Read one request as raw bytes: headers, then
			// Content-Length bytes of body.
			var raw bytes.Buffer
			n := -1
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				raw.WriteString(line)
				if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
					n, _ = strconv.Atoi(strings.TrimSpace(v))
				}
				if line == "\r\n" {
					break
				}
			}
			body := make([]byte, max(n, 0))
			if _, err := io.ReadFull(br, body); err != nil {
				return
			}
			raw.Write(body)
			received <- raw.Bytes()
			if _, err := io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
				return
			}
		}
	})
	c := leanClient(t, newPool(4, 4, time.Minute))
	base := "http://" + addr
	for _, tc := range []struct {
		name, path string
		header     http.Header
		body       string
	}{
		{"openai", "/v1/chat/completions", http.Header{"Authorization": {leanKey}}, `{"model":"m","messages":[]}`},
		{"azure query and api-key", "/openai/deployments/d/chat/completions?api-version=2024-10-21", http.Header{"Api-Key": {"k-123"}}, `{}`},
		{"no key, own user agent", "/v1beta/models/g:generateContent", http.Header{"User-Agent": {"adk-test"}}, strings.Repeat("x", 9000)},
		{"empty body", "/v1", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := c.NewEndpoint(base+tc.path, tc.header)
			if ep.lean == nil {
				t.Fatal("the endpoint is not on the lean path")
			}
			data, err := c.Post(context.Background(), ep, []byte(tc.body))
			if err != nil || string(data) != "{}" {
				t.Fatalf("Post: %q %v", data, err)
			}
			got := <-received
			req, err := http.NewRequest(http.MethodPost, base+tc.path, bytes.NewReader([]byte(tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header[k] = v
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			var want bytes.Buffer
			if err := req.Write(&want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("the server received\n%q\nRequest.Write writes\n%q", got, want.Bytes())
			}
		})
	}
}

// TestLean_PlainHeadAgreesWithReadResponse holds the plain answer reader
// to http.ReadResponse: an answer it accepts has the body, length and
// close of ReadResponse's reading, and one it declines is left unread for
// ReadResponse.
func TestLean_PlainHeadAgreesWithReadResponse(t *testing.T) {
	const body = `{"ok":true}`
	cl := "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
	long := strings.Repeat("X-Pad: "+strings.Repeat("p", 100)+"\r\n", 50) // over the 4 KiB buffer
	for _, tc := range []struct {
		name, answer string
		plain        bool
	}{
		{"plain", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + cl + "Date: Sun, 06 Dec 2026 20:00:00 GMT\r\n\r\n" + body, true},
		{"no reason", "HTTP/1.1 200\r\n" + cl + "\r\n" + body, true},
		{"lower-case names, spaces", "HTTP/1.1 201 Created\r\ncontent-length:   " + strconv.Itoa(len(body)) + " \r\nconnection: Keep-Alive\r\n\r\n" + body, true},
		{"close", "HTTP/1.1 200 OK\r\n" + cl + "Connection: close\r\n\r\n" + body, true},
		{"leading zeros", "HTTP/1.1 200 OK\r\nContent-Length: 00" + strconv.Itoa(len(body)) + "\r\n\r\n" + body, true},
		{"empty body", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n" + body + "\r\n0\r\n\r\n", false},
		{"no length", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body, false},
		{"two lengths", "HTTP/1.1 200 OK\r\n" + cl + cl + "\r\n" + body, false},
		{"list length", "HTTP/1.1 200 OK\r\nContent-Length: 11, 11\r\n\r\n" + body, false},
		{"204", "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", false},
		{"500", "HTTP/1.1 500 Internal Server Error\r\n" + cl + "\r\n" + body, false},
		{"429", "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\n" + cl + "\r\n" + body, false},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\n" + cl + "\r\n" + body, false},
		{"100 then 200", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n" + cl + "\r\n" + body, false},
		{"upgrade connection", "HTTP/1.1 200 OK\r\n" + cl + "Connection: upgrade\r\n\r\n" + body, false},
		{"trailer", "HTTP/1.1 200 OK\r\n" + cl + "Trailer: X-T\r\n\r\n" + body, false},
		{"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 11\r\n\r\n" + body, false},
		{"folded line", "HTTP/1.1 200 OK\r\n" + cl + "X-A: a\r\n b\r\n\r\n" + body, false},
		{"control byte", "HTTP/1.1 200 OK\r\n" + cl + "X-A: a\x01b\r\n\r\n" + body, false},
		{"over the bound", "HTTP/1.1 200 OK\r\nContent-Length: 99999\r\n\r\n" + body, false},
		{"head over the buffer", "HTTP/1.1 200 OK\r\n" + cl + long + "\r\n" + body, false},
		{"status over 299", "HTTP/1.1 300 Multiple Choices\r\n" + cl + "\r\n" + body, false},
		{"status 2 digits", "HTTP/1.1 20 OK\r\n" + cl + "\r\n" + body, false},
		{"bare LF in the reason", "HTTP/1.1 200 \n\r\n" + cl + "\r\n" + body, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.answer), 4<<10)
			h, err := readPlainHead(br, 1024)
			if err != nil || h.ok != tc.plain {
				t.Fatalf("plain %v err %v, want plain %v", h.ok, err, tc.plain)
			}
			ref := bufio.NewReaderSize(strings.NewReader(tc.answer), 4<<10)
			req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/v1", nil)
			if !h.ok {
				// Declined: nothing consumed, ReadResponse reads the same.
				rest, _ := io.ReadAll(br)
				if string(rest) != tc.answer {
					t.Fatalf("declined but consumed: %q left", rest)
				}
				return
			}
			resp, err := http.ReadResponse(ref, req)
			if err != nil {
				t.Fatalf("ReadResponse of an accepted answer: %v", err)
			}
			want, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, h.length)
			if _, err := io.ReadFull(br, got); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode < 200 || resp.StatusCode > 299 || string(got) != string(want) ||
				h.length != resp.ContentLength || h.close != resp.Close || br.Buffered() != ref.Buffered() {
				t.Fatalf("plain: %q len %d close %v; ReadResponse: %d %q len %d close %v",
					got, h.length, h.close, resp.StatusCode, want, resp.ContentLength, resp.Close)
			}
		})
	}
	t.Run("a failed connection is the caller's error", func(t *testing.T) {
		br := bufio.NewReader(io.MultiReader(strings.NewReader("HTTP/1.1 200 OK\r\n"), iotest.ErrReader(io.ErrUnexpectedEOF)))
		if _, err := readPlainHead(br, 1024); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err %v", err)
		}
	})
}
