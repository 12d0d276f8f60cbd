//go:build chaosbreak

package ratelimit

import (
	"os"
	"strings"
)

// breakLimits makes every limiter admit every call at once (no slot, no
// token, no grant waited for) when ADK_CHAOS_BREAK names "ratelimit".
// Only binaries built with the chaosbreak tag have it: the process chaos
// suite's own test (testcluster, TestClusterChaosProcsCatchesBrokenRuns)
// shows its checker reports the calls over the limit that follow.
var breakLimits = strings.Contains(os.Getenv("ADK_CHAOS_BREAK"), "ratelimit")
