//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package httpx

import "syscall"

// leanSupported: the lean path needs idleConnAlive's non-blocking peek.
const leanSupported = true

// idleConnAlive reports whether an idle connection may carry a request:
// the server has neither closed it nor sent anything since its last
// answer. It peeks without blocking and without consuming.
func idleConnAlive(c *conn) bool {
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = raw.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), c.peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read yet: open and silent. 0 bytes (closed), data or
		// any other error: not reusable.
		alive = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}
