// Package evalstore is the Badger-backed eval store the coordinator's Raft
// FSM applies to (CONTRACTS §6 "Store contract"): app scopes, immutable set
// revisions, jobs with compare-and-set phase transitions, named baselines,
// protected pruning, byte and count quotas, and the coordinator's runtime
// records (dispatched tasks, per-worker assignment index, the coordinator
// lease).
//
// Every mutation runs inside Store.Update, one Badger transaction that also
// records the Raft index it applies; an index at or below the recorded one
// is skipped, so log replay after a restart or a snapshot install never
// applies a command twice. Nothing in this package reads the clock or a
// random source: times and ids come from the caller (the Raft command).
// The one exception to "every mutation is an Update" is a records job's
// result tail (PutTail, tails.go): node-local state derived from the
// records, written beside the log under keys no entry touches, and read
// only while it names the records the log completed.
//
// The records themselves (jobs, sets, baselines, tasks, error codes) live
// in the leaf store/evalrecord, so readers of the wire need not link
// Badger. The key layout is in coordinator/DESIGN.md. This package must
// not import bus, coordinator, worker, devapi or cmd; it needs only
// store/evalrecord, Badger, msgpack and internal.
package evalstore
