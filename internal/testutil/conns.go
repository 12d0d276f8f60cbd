package testutil

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
)

// CountConns makes s, an httptest server not yet started, count the
// connections it accepts in opened and those it sees closed (or
// hijacked) in closed: a fake provider's view of a client's pool.
func CountConns(s *httptest.Server, opened, closed *atomic.Int32) {
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			closed.Add(1)
		}
	}
}
