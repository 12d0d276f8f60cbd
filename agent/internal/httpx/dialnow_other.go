//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package httpx

import (
	"context"
	"syscall"
)

// connectLoopbackNow is nil here: the dialers connect as net.Dialer does
// (dialnow_unix.go).
var connectLoopbackNow func(context.Context, string, string, syscall.RawConn) error
