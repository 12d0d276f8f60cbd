// Package coordinator is the Raft-replicated eval job coordinator: a
// hashicorp/raft node (TCP transport, raft-wal log and stable store,
// batched applies) whose FSM applies typed commands (one type byte plus a
// msgpack body) to the Badger eval store (store/evalstore); the
// adk.coord.v1 NATS micro service every node serves (writes forwarded to
// the leader); and the leader-only loop: coordinator lease, full-restart
// recovery, scheduler and dispatch over ADK_TASKS, result ingestion from
// ADK_RESULTS, worker and owner liveness, task and job deadlines.
//
// The FSM never reads the clock or a random source: times and ids come
// from the command, chosen by the proposing node. See DESIGN.md.
//
// It imports store/evalstore, store/evalrecord, evalengine, bus,
// coordinator/api and agent/model/ratelimit (the fleet's rate-limit split). It must not import worker, devapi or cmd.
package coordinator
