//go:build chaosbreak

package worker

import (
	"os"
	"strings"
)

// breakDedupe turns off the guard that runs a task at most once per
// process and only for its own incarnation, when ADK_CHAOS_BREAK names
// "dedupe". Only binaries built with the chaosbreak tag have it: the
// process chaos suite's own test (testcluster, TestClusterChaosProcsCatchesBrokenRuns)
// shows its checker reports the duplicate executions that follow.
var breakDedupe = strings.Contains(os.Getenv("ADK_CHAOS_BREAK"), "dedupe")
