package httpx

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestConnectLoopbackNow_ConnectsInsideControl pins what the early
// connect relies on: a loopback handshake completes inside the control
// function's connect(2), so the socket has its peer before the Dialer's
// own connect, which then has nothing to wait for.
func TestConnectLoopbackNow_ConnectsInsideControl(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			host := "127.0.0.1"
			if network == "tcp6" {
				host = "[::1]"
			}
			ln, err := net.Listen(network, host+":0")
			if err != nil {
				t.Skipf("no %s loopback here: %v", network, err)
			}
			defer ln.Close()
			var peerErr error
			var controlled bool
			d := net.Dialer{ControlContext: func(ctx context.Context, nw, address string, rc syscall.RawConn) error {
				if err := connectLoopbackNow(ctx, nw, address, rc); err != nil {
					return err
				}
				controlled = true
				return rc.Control(func(fd uintptr) { _, peerErr = syscall.Getpeername(int(fd)) })
			}}
			c, err := d.Dial(network, ln.Addr().String())
			if err != nil {
				t.Fatalf("dial %s: %v", ln.Addr(), err)
			}
			defer c.Close()
			if !controlled {
				t.Fatal("the control function did not run")
			}
			if peerErr != nil {
				t.Fatalf("after the early connect the socket has no peer (%v): the Dialer would wait for the poller", peerErr)
			}
			if got := c.RemoteAddr().String(); got != ln.Addr().String() {
				t.Fatalf("remote address %s, want %s", got, ln.Addr())
			}
		})
	}
}

// TestConnectLoopbackNow_RefusedIsTheDialersError: a loopback port with
// no listener fails the dial with connection refused, as without the
// early connect.
func TestConnectLoopbackNow_RefusedIsTheDialersError(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := net.Dialer{ControlContext: connectLoopbackNow}
	c, err := d.Dial("tcp4", addr)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s with no listener: no error", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s with no listener: %v, want connection refused", addr, err)
	}
}
