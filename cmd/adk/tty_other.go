//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package main

// isTerminal reports false: progress is only drawn where a terminal can be
// detected.
func isTerminal(uintptr) bool { return false }
