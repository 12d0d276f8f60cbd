//go:build race

package httpx

// raceEnabled reports a -race build (race_test.go, norace_test.go).
const raceEnabled = true
