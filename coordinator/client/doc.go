// Package client is the Go client of the coordinator's adk.coord.v1 NATS
// service: submit, status, result, result_samples, result_cases, cancel, list_jobs, get_set, list_sets,
// put_baseline, get_baseline, list_baselines, prune and capabilities, plus the owner-lease
// renewer a submitting process runs so that its death cancels its jobs.
//
// A call that no coordinator answers (the one that took it died) is sent
// again within the call's timeout when that is safe: reads, cancel,
// put_set_part, put_baseline, and submits, which carry a request id so
// that a repeat answers the job the first attempt created
// (coordinator/DESIGN.md "Request path"). A call answered
// coordinator_behind (the coordinator had not applied the highest Raft
// index this client has seen) is sent again, whatever its operation,
// until another answer or the call's timeout (DESIGN.md
// "Read-your-writes"). The index travels with the identity of the
// cluster whose log issued it: a reply from another cluster (the
// coordinators were wiped and bootstrapped again under a long-lived
// client) starts the client over from that cluster's index, and an
// answer of a cluster it left since is asked again, as coordinator_behind.
//
// It imports coordinator/api, store/evalrecord, bus and nats (and
// evalengine and internal/canonjson, which coordinator/api builds on, to
// encode a set upload as the coordinator stores it). It must not
// import coordinator (the server) or store/evalstore or Badger.
package client
