//go:build race

package agentadapter

// raceEnabled reports a -race build (race_test.go, norace_test.go).
const raceEnabled = true
