// Package worker is a worker node of the distributed eval fleet. A worker
// has an id (its NATS user and its task subject), a capacity (samples in
// flight) and the agents it trusts: a job only names an agent; modules,
// commands and URLs never come from the job document.
//
// It pulls tasks one at a time from its own durable consumer on ADK_TASKS
// (created by the coordinator, MaxDeliver 1), acks each on receipt before
// running it (at most once), runs the (case, sample) with the job's
// evalengine.SampleRunner in a fresh session of the named adapter (in the
// run slot's evalengine.SampleSlot: one cancel scope per sample), and
// publishes a bounded result to adk.result.<job>. It heartbeats its
// running task ids to the coordinator leader, kills the tasks the leader
// names in its answers (lost, decided, another incarnation's) and in the
// kill notice it sends when a job ends other than by completing
// (cancelled by a user or for its lost owner, timed out, failed; one not
// yet delivered is refused when it comes), and fences itself (kills
// everything, fetches nothing) when no leader has answered for FenceAfter.
// Before a leader's first answer none of its tasks has started, so past
// FenceAfter it only stops fetching. A fence check and an answer take one
// lock: an answer that lands during a check is seen by it, or comes after
// the check's kills and unfences.
//
// Agents are adapters handed to Start, or AGENT.json files named in
// Config.AgentFiles and parsed once into the default adapter
// (evalengine/agentadapter, with events converted only for jobs that
// capture them).
//
// It imports evalengine, agent (and agent/model/ratelimit, whose limiters
// it runs at the leader's grants), bus, coordinator/api and
// store/evalrecord.
// It must not import coordinator, store/evalstore, Badger, devapi or cmd.
package worker
