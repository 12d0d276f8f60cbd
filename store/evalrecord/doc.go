// Package evalrecord holds the eval store's records as the coordinator,
// its wire protocol, its clients and workers see them (CONTRACTS §6): jobs
// and their phases, progress and specs, set revisions, baselines, tasks,
// the coordinator lease, listing pages, prune options and results, and the
// store's stable error codes.
//
// It is a leaf: the Badger-backed store (store/evalstore) persists these
// records, and coordinator/api carries them on the wire, so that a client
// or a worker reads a job without linking the store. It must not import
// any adk package outside internal. It must not import Badger.
package evalrecord
