//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package httpx

import "syscall"

// leanSupported: the lean path needs idleConnAlive's non-blocking peek.
const leanSupported = true

// idleConnAlive reports whether an idle connection may carry a request:
// the server has neither closed it nor sent anything since its last
// answer. It peeks without blocking and without consuming. The raw
// connection and the peek's callback are taken by the connection's first
// check and kept (each was an allocation of every reuse).
func idleConnAlive(c *conn) bool {
	if c.raw == nil {
		sc, ok := c.nc.(syscall.Conn)
		if !ok {
			return false
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		c.raw, c.peekFn = raw, c.peekIdle
	}
	c.peekAlive = false
	err := c.raw.Read(c.peekFn)
	return err == nil && c.peekAlive
}

// peekIdle is idleConnAlive's peek at the socket fd, its verdict in
// c.peekAlive.
func (c *conn) peekIdle(fd uintptr) bool {
	_, _, rerr := syscall.Recvfrom(int(fd), c.peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	// Nothing to read yet: open and silent. 0 bytes (closed), data or
	// any other error: not reusable.
	c.peekAlive = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
	return true
}
