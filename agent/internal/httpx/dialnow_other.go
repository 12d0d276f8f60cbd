//go:build !linux

package httpx

import (
	"context"
	"syscall"
)

// connectLoopbackNow is nil here: the dialers connect as net.Dialer does
// (dialnow_linux.go). The early connect is Linux's alone: a second
// connect(2) on a non-blocking socket whose first one failed need not
// return that error on other Unix variants (net's own connect says so; a
// BSD stack may start a new attempt instead), so a refused loopback dial
// could fail with another error there; and that a loopback handshake
// completes inside the first call is a property of Linux's loopback.
var connectLoopbackNow func(context.Context, string, string, syscall.RawConn) error
