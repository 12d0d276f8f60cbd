//go:build !linux

package main

// prepareEvalHeap is a no-op outside Linux (evalheap_linux.go).
func prepareEvalHeap() {}
