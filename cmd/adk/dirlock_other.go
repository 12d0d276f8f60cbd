//go:build !unix

package main

// lockDataDir is a no-op where flock is missing; the eval store's own
// directory lock still refuses a second owner, later.
func lockDataDir(string) (func(), error) { return func() {}, nil }
