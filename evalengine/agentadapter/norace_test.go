//go:build !race

package agentadapter

const raceEnabled = false
