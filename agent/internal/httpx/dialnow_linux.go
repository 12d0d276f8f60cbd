package httpx

import (
	"context"
	"net/netip"
	"syscall"
)

// connectLoopbackNow is the dialers' net.Dialer ControlContext (the lean
// pool's and Transport's): it
// starts a loopback connect itself, on the fresh non-blocking socket,
// before the Dialer's own connect. A loopback handshake completes inside
// that first connect(2) call (it returns EINPROGRESS all the same), so the
// Dialer's connect finds the socket connected and returns at once. Without
// it the Dialer waits for the network poller to report the socket
// writable, and Go polls the network only when both run queues are empty
// (or from sysmon, after up to 10 ms): at an eval run's start, 256 workers
// starting at once kept them busy, and the first request went out 0.2–26
// ms after the first connect, with every worker's dial made before any
// returned. A connect that is still in progress (the Dialer's own call then
// answers EALREADY) or that failed (its error is the Dialer's answer) leaves
// the Dialer's path as it was: on Linux the second connect(2) answers 0
// for a connected socket, EALREADY for one still connecting (a listener
// with a full backlog drops the SYN) and the first call's error (connection
// refused) for a failed one, all of which net's connect handles as for its
// own first call. Other addresses get nothing: their handshake cannot
// complete inside the call. Other systems get nothing (dialnow_other.go).
func connectLoopbackNow(_ context.Context, network, address string, rc syscall.RawConn) error {
	sa, ok := loopbackSockaddr(network, address)
	if !ok {
		return nil
	}
	return rc.Control(func(fd uintptr) {
		_ = syscall.Connect(int(fd), sa)
	})
}

// loopbackSockaddr is the socket address of a dial to a loopback
// address, for its network (tcp4 or tcp6); ok is false for any other
// dial, and for a zoned address.
func loopbackSockaddr(network, address string) (sa syscall.Sockaddr, ok bool) {
	if network != "tcp4" && network != "tcp6" {
		return nil, false
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().IsLoopback() || ap.Addr().Zone() != "" {
		return nil, false
	}
	if a := ap.Addr().Unmap(); network == "tcp4" {
		if !a.Is4() {
			return nil, false
		}
		return &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}, true
	}
	return &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}, true
}
