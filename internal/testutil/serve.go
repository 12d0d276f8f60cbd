package testutil

import (
	"bufio"
	"bytes"
	"net"
	"strconv"
	"sync"
	"testing"
)

// cannedCompletion is CannedProvider's answer to every request.
const cannedCompletion = `{"id":"chatcmpl-fake","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}`

// CannedProvider starts an OpenAI-compatible fake on 127.0.0.1 that
// answers every request with one canned chat completion ("ok"),
// allocating next to nothing per request, and returns its base URL
// (http://host:port). A request for which hold (nil: none) returns true,
// given the start of its body, gets no answer until the client closes
// its connection. It stops with the test: the cleanup closes the
// listener and every connection and waits for their goroutines.
func CannedProvider(tb testing.TB, hold func(body []byte) bool) string {
	tb.Helper()
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(cannedCompletion)) + "\r\n\r\n" + cannedCompletion)
	return "http://" + ServeConns(tb, func(nc net.Conn) { serveCanned(nc, answer, hold) })
}

// serveCanned answers the requests on nc until nc closes (CannedProvider).
func serveCanned(nc net.Conn, answer []byte, hold func([]byte) bool) {
	br := bufio.NewReaderSize(nc, 16<<10)
	for {
		n := 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
				n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
			}
			if len(line) == 2 {
				break
			}
		}
		if hold != nil {
			body, err := br.Peek(min(n, br.Size()))
			if err != nil {
				return
			}
			if hold(body) {
				for {
					if _, err := br.ReadByte(); err != nil {
						return // the client gave up on the call
					}
				}
			}
		}
		if _, err := br.Discard(n); err != nil {
			return
		}
		if _, err := nc.Write(answer); err != nil {
			return
		}
	}
}

// ServeConns listens on 127.0.0.1 and runs serve on each accepted
// connection in its own goroutine until the test ends: the test's cleanup
// closes the listener and every accepted connection, then waits for every
// goroutine, so serve must return once its connection is closed. It returns
// the listener's address (host:port).
func ServeConns(tb testing.TB, serve func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(nc)
			}()
		}
	}()
	return ln.Addr().String()
}
