package testutil

import (
	"net"
	"sync"
	"testing"
)

// ServeConns listens on 127.0.0.1 and runs serve on each accepted
// connection in its own goroutine until the test ends: the test's cleanup
// closes the listener and every accepted connection, then waits for every
// goroutine, so serve must return once its connection is closed. It returns
// the listener's address (host:port). Tests use it for fakes of the outside
// world that speak a protocol by hand (an OpenAI-compatible provider).
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
