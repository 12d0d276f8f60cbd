package httpx

import (
	"syscall"
	"testing"
)

func TestLoopbackSockaddr(t *testing.T) {
	for _, tc := range []struct {
		network, address string
		want             syscall.Sockaddr
	}{
		{"tcp4", "127.0.0.1:8080", &syscall.SockaddrInet4{Port: 8080, Addr: [4]byte{127, 0, 0, 1}}},
		{"tcp4", "127.1.2.3:1", &syscall.SockaddrInet4{Port: 1, Addr: [4]byte{127, 1, 2, 3}}},
		{"tcp6", "[::1]:443", &syscall.SockaddrInet6{Port: 443, Addr: [16]byte{15: 1}}},
		{"tcp6", "[::ffff:127.0.0.1]:80", &syscall.SockaddrInet6{Port: 80, Addr: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}}},
		{"tcp4", "10.0.0.1:80", nil},
		{"tcp4", "192.0.2.1:80", nil},
		{"tcp6", "[2001:db8::1]:80", nil},
		{"tcp6", "[fe80::1%lo]:80", nil},
		{"tcp4", "[::1]:80", nil},
		{"udp4", "127.0.0.1:53", nil},
		{"unix", "/tmp/sock", nil},
		{"tcp4", "localhost:80", nil},
		{"tcp4", "127.0.0.1", nil},
	} {
		sa, ok := loopbackSockaddr(tc.network, tc.address)
		if ok != (tc.want != nil) {
			t.Errorf("loopbackSockaddr(%q, %q): ok %v, want %v", tc.network, tc.address, ok, tc.want != nil)
			continue
		}
		switch want := tc.want.(type) {
		case *syscall.SockaddrInet4:
			if got, _ := sa.(*syscall.SockaddrInet4); got == nil || got.Port != want.Port || got.Addr != want.Addr {
				t.Errorf("loopbackSockaddr(%q, %q) = %#v, want %#v", tc.network, tc.address, sa, want)
			}
		case *syscall.SockaddrInet6:
			if got, _ := sa.(*syscall.SockaddrInet6); got == nil || got.Port != want.Port || got.Addr != want.Addr {
				t.Errorf("loopbackSockaddr(%q, %q) = %#v, want %#v", tc.network, tc.address, sa, want)
			}
		}
	}
}
