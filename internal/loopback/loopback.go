package loopback

import (
	"errors"
	"fmt"
	"net"
)

// MaxAddrs bounds one call: more listeners at once than any fleet we
// start needs.
const MaxAddrs = 256

// FreeAddrs returns n distinct "127.0.0.1:PORT" addresses that were free
// when it returned.
func FreeAddrs(n int) ([]string, error) {
	if n < 1 || n > MaxAddrs {
		return nil, fmt.Errorf("loopback: n must be 1..%d, got %d", MaxAddrs, n)
	}
	ls := make([]net.Listener, 0, n)
	addrs := make([]string, 0, n)
	var err error
	for range n {
		var l net.Listener
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			break
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	for _, l := range ls {
		err = errors.Join(err, l.Close())
	}
	if err != nil {
		return nil, fmt.Errorf("loopback: free addresses: %w", err)
	}
	return addrs, nil
}
