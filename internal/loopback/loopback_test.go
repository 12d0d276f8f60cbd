package loopback

import (
	"net"
	"testing"
)

func TestFreeAddrs_DistinctAndBindable(t *testing.T) {
	addrs, err := FreeAddrs(64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s returned twice in %v", a, addrs)
		}
		seen[a] = true
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("returned address %s is not free: %v", a, err)
		}
		l.Close()
	}
}

func TestFreeAddrs_RefusesABadCount(t *testing.T) {
	for _, n := range []int{0, -1, MaxAddrs + 1} {
		if _, err := FreeAddrs(n); err == nil {
			t.Errorf("FreeAddrs(%d): no error", n)
		}
	}
}
