//go:build race

package main

// raceEnabled makes the end-to-end tests build the binary with -race too,
// so it reuses the packages the race-enabled test build already compiled.
const raceEnabled = true
