//go:build !chaosbreak

package worker

// breakDedupe is false in every real build (see chaosbreak_on.go).
const breakDedupe = false
