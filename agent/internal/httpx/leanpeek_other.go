//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package httpx

// leanSupported: without a non-blocking peek an idle connection's state
// is unknown, so the lean path stays off here.
const leanSupported = false

func idleConnAlive(*conn) bool { return false }
