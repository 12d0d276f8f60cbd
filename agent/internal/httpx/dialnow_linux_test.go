package httpx

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestConnectLoopbackNow_ConnectsInsideControl pins what the early
// connect relies on: a loopback handshake completes inside the control
// function's connect(2), so the socket has its peer before the Dialer's
// own connect, which then has nothing to wait for. The handshake runs in
// the softirq that the SYN's send raises, which the kernel may leave to
// ksoftirqd on a loaded CPU; so the test dials a few times and asks that
// one of them connected inside the control function, and that every one
// connected.
func TestConnectLoopbackNow_ConnectsInsideControl(t *testing.T) {
	const dials = 5
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
			var peerErrs []error
			for range dials {
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
				got := c.RemoteAddr().String()
				c.Close()
				if !controlled {
					t.Fatal("the control function did not run")
				}
				if got != ln.Addr().String() {
					t.Fatalf("remote address %s, want %s", got, ln.Addr())
				}
				if peerErr == nil {
					return
				}
				peerErrs = append(peerErrs, peerErr)
			}
			t.Fatalf("after the early connect no socket of %d had its peer (%v): the Dialer would wait for the poller", dials, peerErrs)
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

// TestConnectLoopbackNow_FullBacklogWaitsForTheDialer: a listener whose
// accept queue is full drops the SYN, so the early connect is still in
// progress and the Dialer's own connect answers EALREADY; the dial then
// waits for the poller as without the early connect, and ends at the
// context's deadline with a timeout, not with EALREADY or a connection.
func TestConnectLoopbackNow_FullBacklogWaitsForTheDialer(t *testing.T) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	// Backlog 0: the accept queue holds one connection, never accepted.
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*syscall.SockaddrInet4).Port}).String()
	d := net.Dialer{ControlContext: connectLoopbackNow}
	first, err := d.Dial("tcp4", addr)
	if err != nil {
		t.Fatalf("dial %s with room in its accept queue: %v", addr, err)
	}
	defer first.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp4", addr)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s with a full accept queue: connected to %s", addr, c.RemoteAddr())
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("dial %s with a full accept queue: %v, want the context's timeout", addr, err)
	}
}
