// Package api holds the coordinator's wire protocol: the operation names
// of the adk.coord.v1.* service, request and reply bodies, the task,
// result and heartbeat messages workers exchange with the leader, and the
// stable error codes (CONTRACTS §6). Every body travels in a bus/wire
// envelope (msgpack).
//
// It imports only store/evalrecord (record types), evalengine (error codes
// of a job request) and bus/wire. It must not import store/evalstore or
// Badger: the coordinator, its client and workers import it, and a client
// or worker must not link Badger.
package api
