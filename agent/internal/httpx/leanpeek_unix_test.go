//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package httpx

import (
	"net"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
)

// TestIdleConnAlive_EachCheck: the idle check, whose raw connection is
// taken once per connection, tells open and silent from closed and from
// sent-to on every check of the same connection, without allocating
// after its first.
func TestIdleConnAlive_EachCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() (*conn, net.Conn) {
		t.Helper()
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		srv := <-accepted
		t.Cleanup(func() { _ = srv.Close() })
		return &conn{nc: nc}, srv
	}

	c, srv := dial()
	for i := range 3 {
		if !idleConnAlive(c) {
			t.Fatalf("check %d: an open, silent connection is not alive", i)
		}
	}
	if a := testing.AllocsPerRun(100, func() { idleConnAlive(c) }); a != 0 {
		t.Fatalf("a check after the first allocates %v times", a)
	}
	if _, err := srv.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the check to see the server's byte", func() bool { return !idleConnAlive(c) })
	// The peek did not consume it.
	buf := make([]byte, 1)
	if n, err := c.nc.Read(buf); n != 1 || buf[0] != 'x' {
		t.Fatalf("read after the check: %q, %v", buf[:n], err)
	}
	if !idleConnAlive(c) {
		t.Fatal("the connection, silent again, is not alive")
	}

	c2, srv2 := dial()
	if !idleConnAlive(c2) {
		t.Fatal("a second open, silent connection is not alive")
	}
	_ = srv2.Close()
	testutil.WaitFor(t, 10*time.Second, "the check to see the server's close", func() bool { return !idleConnAlive(c2) })
	if !idleConnAlive(c) {
		t.Fatal("the first connection is not alive after the second's close")
	}
	_ = c.nc.Close()
	if idleConnAlive(c) {
		t.Fatal("a connection closed on our side is alive")
	}
}
