// Package testcluster is the in-process multi-node harness for tests and
// demos: N embedded NATS servers today; coordinators, workers and store
// nodes as later issues add them, with fault injection (kill, restart).
//
// It may import every adk package; nothing imports it except tests and
// cmd. Every node binds to 127.0.0.1 only, and everything a harness starts
// is stopped by the testing.TB's Cleanup.
package testcluster
