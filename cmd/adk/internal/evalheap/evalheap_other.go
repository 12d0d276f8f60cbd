//go:build !linux

package evalheap

// Ready is a no-op outside Linux (evalheap_linux.go).
func Ready() {}
