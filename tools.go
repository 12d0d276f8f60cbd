//go:build tools

// Package tools pins the chosen dependencies that no package imports yet
// (Raft, its BoltDB store, Badger), so `go mod tidy` keeps the versions the
// foundation issue chose until the coordinator and store packages use them.
package tools

import (
	_ "github.com/dgraph-io/badger/v4"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
)
