//go:build !linux

package tracestore

// pageOutMapped is a no-op where there is no MADV_PAGEOUT.
func pageOutMapped(string, ...string) int64 { return 0 }
