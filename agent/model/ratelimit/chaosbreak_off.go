//go:build !chaosbreak

package ratelimit

// breakLimits is false in every real build (see chaosbreak_on.go).
const breakLimits = false
