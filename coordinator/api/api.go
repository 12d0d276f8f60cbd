package api

import (
	"errors"
	"fmt"
	"time"

	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
)

// Operations of the adk.coord.v1 service.
const (
	OpSubmit        = "submit"
	OpStatus        = "status"
	OpResult        = "result"
	OpCancel        = "cancel"
	OpListJobs      = "list_jobs"
	OpGetSet        = "get_set"
	OpListSets      = "list_sets"
	OpPutBaseline   = "put_baseline"
	OpGetBaseline   = "get_baseline"
	OpListBaselines = "list_baselines"
	OpPrune         = "prune"
	OpCapabilities  = "capabilities"
	OpJobSpec       = "job_spec" // workers: what a job's tasks need
	OpJoin          = "join"     // coordinators: add me as a Raft voter
	// OpPutSetPart stores one part of a set too large for one submit
	// (SubmitRequest.SetUpload names the upload).
	OpPutSetPart = "put_set_part"
	// OpResultSamples answers the sample lines of named tasks of a
	// completed job's result stream (Request.Tasks): a reader of one
	// case reads its own samples, not the stream up to them.
	OpResultSamples = "result_samples"
	// OpResultCases answers the case lines of rows of a completed job's
	// result stream in the failures-first order (Request.Offset,
	// Request.Limit): a reader of a page of failed cases reads those
	// cases' lines, not every case line up to them.
	OpResultCases = "result_cases"
)

// Envelope kinds.
const (
	KindRequest   = "coord_request"
	KindReply     = "coord_reply"
	KindTask      = "task"
	KindTasks     = "tasks"
	KindResult    = "sample_result"
	KindResults   = "sample_results"
	KindHeartbeat = "worker_heartbeat"
	KindHBReply   = "heartbeat_reply"
	KindOwner     = "owner_renew"
)

// Bounds.
const (
	MaxRequestBytes  = 2 << 20 // serialized submit request
	MaxMetadataBytes = 1 << 20
	MaxResultBytes   = 768 << 10 // one sample result message
	// MaxResultDocumentBytes bounds a job's result document a client
	// reassembles from pages (the store's max_record_bytes is 16 MiB by
	// default).
	MaxResultDocumentBytes = 64 << 20
	ContractVersion        = 1
)

// Error codes of the service (CONTRACTS §6) beyond the store's.
const (
	CodeValidationBusy        = "evaluation_request_validation_busy"
	CodeValidationTimeout     = "evaluation_request_validation_timeout"
	CodeValidationFailed      = "evaluation_request_validation_failed"
	CodeValidationUnavailable = "evaluation_request_validation_unavailable"
	CodeRequestLimit          = evalengine.CodeEvalRequestLimit
	CodeUnknownRequestFields  = "unknown_eval_request_fields"
	CodeInvalidRequest        = evalengine.CodeInvalidEvalRequest
	CodeUnknownAgent          = "unknown_eval_agent"
	CodeServiceUnavailable    = "eval_service_unavailable"
	CodeNotLeader             = "not_leader"
	CodeResultNotReady        = "result_not_ready"
	CodeJobTerminal           = "evaluation_job_terminal"
	CodeAlreadyTerminal       = "already_terminal"
	CodeTimeout               = "timeout"
	CodeInternal              = "internal_error"
	// CodeJoinNotAllowed: a join names a coordinator id that is not on the
	// answering leader's coordinator allowlist.
	CodeJoinNotAllowed = "coordinator_join_not_allowed"
	// CodeMemberConflict: a join names an id that is already a member at
	// another address, or an address another member uses.
	CodeMemberConflict = "coordinator_member_conflict"
	// CodeResultDigestMismatch: a paged result did not reassemble to the
	// digest the coordinator announced.
	CodeResultDigestMismatch = "eval_result_digest_mismatch"
	// CodeWorkerNodeUnavailable: no live allowlisted worker offers the
	// job's agent (CONTRACTS §6: fail closed, not at the deadline).
	CodeWorkerNodeUnavailable = "eval_worker_node_unavailable"
	// CodeResultPersistenceFailed: the eval store refused a job's result;
	// the service stops (fail closed) and the job stays running.
	CodeResultPersistenceFailed = "evaluation_result_persistence_failed"
	// CodeCancelPersistenceFailed: the eval store failed while recording a
	// cancellation; the service stops (fail closed).
	CodeCancelPersistenceFailed = "evaluation_cancel_persistence_failed"
	// CodeStoreRecoveryFailed: the eval store failed while failing the
	// jobs a restarted service found running; the service stops.
	CodeStoreRecoveryFailed = "eval_store_recovery_failed"
	// CodeCoordinatorBehind: the answering coordinator had not applied
	// the request's MinIndex within its bound (Timing.ReadWait), so it
	// answers nothing rather than state older than the caller's own
	// writes. Nothing was proposed: any request may be sent again, and
	// another coordinator (or this one, caught up) may answer it. The
	// detail names the index wanted and the index applied.
	CodeCoordinatorBehind = "coordinator_behind"
)

// Error is a typed service error: a stable Code, a bounded Detail and, for
// terminal-job answers, the Phase and Reason.
type Error struct {
	Code   string `msgpack:"code"`
	Detail string `msgpack:"detail,omitempty"`
	Phase  string `msgpack:"phase,omitempty"`
	Reason string `msgpack:"reason,omitempty"`
}

func (e *Error) Error() string {
	s := "coordinator: " + e.Code
	if e.Phase != "" {
		s += " (" + e.Phase
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		s += ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is matches errors with the same code (an *evalrecord.Error too).
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	var s *evalrecord.Error
	return errors.As(target, &s) && s.Code == e.Code
}

// Retryable reports whether the same request may succeed if retried.
func (e *Error) Retryable() bool {
	switch e.Code {
	case CodeNotLeader, CodeServiceUnavailable, CodeValidationBusy, CodeTimeout, CodeCoordinatorBehind:
		return true
	}
	return false
}

// Errorf builds an *Error.
func Errorf(code, format string, a ...any) *Error {
	d := fmt.Sprintf(format, a...)
	if len(d) > 512 {
		d = d[:512]
	}
	return &Error{Code: code, Detail: d}
}

// AsError converts any error to an *Error (store errors keep their code).
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var s *evalrecord.Error
	if errors.As(err, &s) {
		return &Error{Code: s.Code, Detail: s.Detail}
	}
	var ev *evalengine.Error
	if errors.As(err, &ev) {
		return &Error{Code: ev.Code, Detail: ev.Detail}
	}
	return Errorf(CodeInternal, "%v", err)
}

// Request is every operation's request; each op reads its fields.
type Request struct {
	Scope string `msgpack:"scope"`
	JobID string `msgpack:"job_id,omitempty"`
	// MinIndex asks a read to wait (bounded) until the answering node has
	// applied this Raft index: read-your-writes on followers. Clients send
	// the highest Index they have seen in a reply. A node that has not
	// applied it within its bound answers CodeCoordinatorBehind, never
	// older state.
	MinIndex uint64 `msgpack:"min_index,omitempty"`
	// Cluster is the identity of the cluster whose log issued MinIndex
	// (Reply.Cluster of the reply it came in). A node of another cluster
	// (the coordinators were wiped and bootstrapped again) answers without
	// waiting for it; empty (earlier clients) waits as before. At most
	// MaxClusterBytes of [A-Za-z0-9_-] (ValidCluster).
	Cluster string `msgpack:"cluster,omitempty"`
	// WaitMS (status) holds the answer until the job is terminal on the
	// answering node, or WaitMS passed (then the job as it is): a client
	// polling every WaitMS sees the end at once instead of up to a poll
	// later. 0 answers at once, as a node of an earlier build does for any
	// value; at most MaxStatusWait.
	WaitMS int64 `msgpack:"wait_ms,omitempty"`
	// Submit.
	Submit *SubmitRequest `msgpack:"submit,omitempty"`
	// Paging (list_jobs, list_sets, list_baselines). On a result page of
	// the stream (Format ResultJSONL): at most Limit lines (0: as many
	// as fit; a node of an earlier build ignores it, and the client cuts
	// its page).
	Limit  int    `msgpack:"limit,omitempty"`
	Cursor string `msgpack:"cursor,omitempty"`
	// get_set.
	SetID      string `msgpack:"set_id,omitempty"`
	SetVersion string `msgpack:"set_version,omitempty"`
	// Baselines.
	Name string `msgpack:"name,omitempty"`
	// WithoutResult (get_baseline) answers the baseline's row without its
	// result document, which can be larger than a reply (NATS
	// max_payload): its job's result reads in pages. A node of an earlier
	// build ignores it and answers the whole row.
	WithoutResult bool `msgpack:"without_result,omitempty"`
	// Prune.
	Prune *evalrecord.PruneOptions `msgpack:"prune,omitempty"`
	// result: the page starts at byte Offset of the result document and
	// holds at most MaxBytes (0: the server's page size, which also caps it).
	Offset   int64 `msgpack:"offset,omitempty"`
	MaxBytes int   `msgpack:"max_bytes,omitempty"`
	// Format ResultJSONL asks a result as the JSON Lines stream: Offset
	// and NextOffset count lines, and a page holds whole lines (at least
	// one). Empty: the single document, in bytes.
	Format string `msgpack:"format,omitempty"`
	// Tasks (result_samples) are task indexes of a completed job whose
	// result is records: the reply holds their sample lines, the lines
	// of its JSON Lines stream, in this order, one a task (a case's
	// samples are tasks case + sample × cases, TaskIndex). Reply.NextOffset
	// counts the tasks answered (at least one; the others are asked
	// again), ResultSize and ResultDigest are the stream's. 1..MaxResultTasks
	// of them, each a task of the job.
	Tasks []int `msgpack:"tasks,omitempty"`
	// result_cases: rows Offset..Offset+Limit-1 (Limit 1..MaxResultCases)
	// of the result's failures-first order (the cases that did not pass,
	// then those that did, each in case order); the reply holds their
	// case lines in that order, Reply.NextOffset the row after the last
	// it answered (at least one row; the others are asked again), and
	// ResultSize and ResultDigest are the stream's.
	//
	// (Offset and Limit are the fields above.)
	// join.
	Join *JoinRequest `msgpack:"join,omitempty"`
	// put_set_part.
	SetPart *SetPart `msgpack:"set_part,omitempty"`
}

// SetPart is one part of a set upload: a set too large for one submit
// (NATS max_payload, MaxRequestBytes) is sent as the canonical JSON of
// the set (what evalengine.EncodeSet writes, canonicalized) cut into
// parts of at most MaxSetPartBytes, then submitted with
// SubmitRequest.SetUpload = Upload. Bounds: evalrecord.MaxSetPartBytes,
// MaxSetParts, MaxSetUploadBytes; an upload untouched for
// evalstore.UploadTTLMS is deleted.
type SetPart struct {
	Upload string `msgpack:"upload"` // 32 lowercase hex digits, chosen by the client
	Part   int    `msgpack:"part"`   // 0..Parts-1
	Parts  int    `msgpack:"parts"`
	Size   int64  `msgpack:"size"`   // bytes of the whole set
	Digest string `msgpack:"digest"` // SHA-256 hex of the whole set
	Data   []byte `msgpack:"data"`
}

// JoinRequest asks the leader to add a coordinator as a Raft voter.
type JoinRequest struct {
	ID       string `msgpack:"id"`        // Raft server id, a subject token on the allowlist
	RaftAddr string `msgpack:"raft_addr"` // host:port its Raft transport listens on
}

// MaxRaftAddrLen bounds JoinRequest.RaftAddr.
const MaxRaftAddrLen = 255

// Member is one server of the Raft configuration.
type Member struct {
	ID    string `msgpack:"id" json:"id"`
	Addr  string `msgpack:"addr" json:"addr"`
	Voter bool   `msgpack:"voter" json:"voter"`
}

// SubmitRequest asks for a job. Set is the eval set document (JSON, any
// format evalengine.LoadSet reads); Agent names an agent the workers are
// configured to trust; Criteria is a criteria file (JSON, empty = the
// default criteria); Options are evalengine run options (JSON, empty =
// defaults); Metadata a JSON object (secret-pruned). Owner and OwnerTTLMS
// bind the job to an owner lease: when renewals on adk.owner.<owner> stop
// for OwnerTTLMS, the job is cancelled. No owner means a detached job.
type SubmitRequest struct {
	Set        []byte `msgpack:"set"`
	Agent      string `msgpack:"agent"`
	Criteria   []byte `msgpack:"criteria,omitempty"`
	Options    []byte `msgpack:"options,omitempty"`
	Metadata   []byte `msgpack:"metadata,omitempty"`
	Owner      string `msgpack:"owner,omitempty"`
	OwnerTTLMS int64  `msgpack:"owner_ttl_ms,omitempty"`
	// SetUpload, instead of Set, names a complete set upload of this scope
	// (put_set_part): the submit takes it.
	SetUpload string `msgpack:"set_upload,omitempty"`
	// NotEvaluated are the cases of the caller's file it left out of Set
	// (conversation_scenario cases: a cluster simulates no users), each
	// with its reason: the result lists them as a local run does. At most
	// MaxNotEvaluatedBytes of ids and reasons; none may be a case of Set.
	NotEvaluated []evalrecord.NotEvaluated `msgpack:"not_evaluated,omitempty"`
	// RequestID names this submit so that it may be sent again: a
	// coordinator that took it may die before it answers. A submit
	// applied with a request id this scope used in the last hour (and
	// the same content) answers the job that one created; with other
	// content it is eval_request_id_conflict. 16..64 bytes of
	// [A-Za-z0-9_-], random (client.Submit draws 32 hex digits); empty:
	// none, and the submit must not be repeated. Coordinators of earlier
	// builds ignore it (coordinator/DESIGN.md "Request path").
	RequestID string `msgpack:"request_id,omitempty"`
}

// MaxClusterBytes bounds a cluster identity (Request.Cluster,
// Reply.Cluster); a coordinator draws 32 hex digits.
const MaxClusterBytes = 64

// ValidCluster says whether c may name a cluster: empty (none), or at
// most MaxClusterBytes of [A-Za-z0-9_-].
func ValidCluster(c string) bool {
	if len(c) > MaxClusterBytes {
		return false
	}
	for i := range len(c) {
		b := c[i]
		if (b < 'a' || b > 'z') && (b < 'A' || b > 'Z') && (b < '0' || b > '9') && b != '_' && b != '-' {
			return false
		}
	}
	return true
}

// MaxResultTasks bounds Request.Tasks: every sample of a case
// (evalengine.MaxSamplesPerCase) fits one request.
const MaxResultTasks = 256

// MaxResultCases bounds the rows of one result_cases request (the
// developer API's largest cases page).
const MaxResultCases = 1000

// MaxNotEvaluatedBytes bounds SubmitRequest.NotEvaluated (ids and
// reasons together).
const MaxNotEvaluatedBytes = 1 << 20

// MaxStatusWait bounds Request.WaitMS.
const MaxStatusWait = 30 * time.Second

// MaxOwnerTTL bounds SubmitRequest.OwnerTTLMS.
const MaxOwnerTTL = time.Hour

// MaxSubmitValidation caps SubmitValidationBound when the configured base
// is below it: under a client's 30 s call.
const MaxSubmitValidation = 25 * time.Second

// SubmitValidationBound is how long a coordinator validates a submit whose
// set (inline or uploaded) is setBytes: base (Limits.ValidationTimeout,
// the request's own checks) plus a second per 128 KiB of the set (the
// rate evalengine's own budget grows by), at most MaxSubmitValidation
// unless base is larger. The set's bytes cost the coordinator four
// passes (decode and validate, encode, canonicalize, compare): 0.31-0.34
// s of CPU for a 1.2 MiB set under the race detector, 85% of it encoding
// and canonicalizing (2026-12-06); a second per 128 KiB leaves ~25x for
// a loaded machine. The coordinator decodes the set with what is left of
// this bound (evalengine.PrepareWithin), so the bound is one, the
// configured one.
func SubmitValidationBound(base time.Duration, setBytes int) time.Duration {
	perByte := time.Duration(setBytes) * time.Second / (128 << 10)
	return min(base+perByte, max(base, MaxSubmitValidation))
}

// Reply is every operation's reply; Err is set on failure.
type Reply struct {
	Index    uint64                                 `msgpack:"index,omitempty"` // Raft index of a write, or applied index of a read
	Err      *Error                                 `msgpack:"err,omitempty"`
	Job      *evalrecord.Job                        `msgpack:"job,omitempty"`
	Jobs     *evalrecord.Page[evalrecord.Job]       `msgpack:"jobs,omitempty"`
	Set      *evalrecord.SetRecord                  `msgpack:"set,omitempty"`
	Sets     *evalrecord.Page[evalrecord.SetRecord] `msgpack:"sets,omitempty"`
	Baseline *evalrecord.Baseline                   `msgpack:"baseline,omitempty"`
	// Baselines is a list_baselines page: rows without their results.
	Baselines *evalrecord.Page[evalrecord.Baseline] `msgpack:"baselines,omitempty"`
	Result    []byte                                `msgpack:"result,omitempty"`
	Prune     *evalrecord.PruneResult               `msgpack:"prune,omitempty"`
	Caps      *Capabilities                         `msgpack:"caps,omitempty"`
	Spec      *JobSpec                              `msgpack:"spec,omitempty"`
	// result paging: Result holds bytes [offset, NextOffset) of a document
	// of ResultSize bytes whose SHA-256 (hex) is ResultDigest; the last
	// page has NextOffset == ResultSize.
	NextOffset   int64  `msgpack:"next_offset,omitempty"`
	ResultSize   int64  `msgpack:"result_size,omitempty"`
	ResultDigest string `msgpack:"result_digest,omitempty"`
	// ResultFormat is ResultJSONL on a page of the stream (ResultSize is
	// then its line count and ResultDigest the records' running hash).
	ResultFormat string `msgpack:"result_format,omitempty"`
	// join: the configuration after the change.
	Members []Member `msgpack:"members,omitempty"`
	// Cluster is the identity of the answering node's cluster, drawn when
	// its log began (empty: a node of an earlier build, or a log that
	// recorded none yet). Index counts that cluster's log: a client that
	// sees another identity starts over from this reply's Index.
	Cluster string `msgpack:"cluster,omitempty"`
}

// Capabilities describes a coordinator (CONTRACTS §6 capabilities).
type Capabilities struct {
	ContractVersion    int      `msgpack:"contract_version" json:"contract_version"`
	NodeID             string   `msgpack:"node_id" json:"node_id"`
	Leader             string   `msgpack:"leader" json:"leader"`
	MaxConcurrency     int      `msgpack:"max_concurrency" json:"max_concurrency"`
	MaxQueue           int      `msgpack:"max_queue" json:"max_queue"`
	ActiveJobs         int      `msgpack:"active_jobs" json:"active_jobs"`
	QueuedJobs         int      `msgpack:"queued_jobs" json:"queued_jobs"`
	QueuedBytes        int64    `msgpack:"queued_bytes" json:"queued_bytes"`
	PendingSubmissions int      `msgpack:"pending_submissions" json:"pending_submissions"`
	RecoveredJobs      int      `msgpack:"recovered_jobs" json:"recovered_jobs"`
	Workers            []string `msgpack:"workers" json:"workers"`
	// Agents are the agents the live workers offer (heard from within the
	// worker TTL), sorted and unique.
	Agents          []string `msgpack:"agents,omitempty" json:"agents,omitempty"`
	RejectedResults int64    `msgpack:"rejected_results" json:"rejected_results"`
	Members         []Member `msgpack:"members,omitempty" json:"members,omitempty"`
	// WorkerStates are the allowlisted workers this coordinator has heard
	// a heartbeat from: capacity, running tasks and the heartbeat's age.
	WorkerStates []WorkerState `msgpack:"worker_states,omitempty" json:"worker_states"`
	// CommitIndex and AppliedIndex are the answering node's Raft indexes.
	CommitIndex  uint64 `msgpack:"commit_index,omitempty" json:"commit_index"`
	AppliedIndex uint64 `msgpack:"applied_index,omitempty" json:"applied_index"`
	// Cluster is the answering node's cluster identity (Reply.Cluster):
	// it changes when the coordinators are wiped and bootstrapped again.
	Cluster      string `msgpack:"cluster,omitempty" json:"cluster,omitempty"`
	Transport    string `msgpack:"transport" json:"transport"`
	Cancellation string `msgpack:"cancellation" json:"cancellation"`
	Replay       string `msgpack:"replay" json:"replay"`
}

// WorkerState is a worker as the last heartbeat described it.
type WorkerState struct {
	ID       string `msgpack:"id" json:"id"`
	Capacity int    `msgpack:"capacity" json:"capacity"`
	Running  int    `msgpack:"running" json:"running"`
	// SeenAgoMS is how long ago the heartbeat arrived.
	SeenAgoMS int64 `msgpack:"seen_ago_ms" json:"seen_ago_ms"`
	// Agents are the agents the worker offers.
	Agents []string `msgpack:"agents,omitempty" json:"agents,omitempty"`
}

// JobSpec is what a worker needs to run a job's tasks.
type JobSpec struct {
	JobID string `msgpack:"job_id"`
	// Scope is the job's app scope: the principal its traces are
	// published under (from the Raft-replicated job, never from the task
	// or the worker's configuration).
	Scope string `msgpack:"scope,omitempty"`
	Set   []byte `msgpack:"set"` // canonical JSON of the set revision: bytes [offset, offset+len) of it
	// SetSize is the whole set's size when Set is a page of it (a set
	// larger than a reply): the worker asks again from Request.Offset =
	// the bytes it has, and checks SetDigest (the revision's digest) on
	// the whole. 0 from a coordinator of an earlier build: Set is whole.
	SetSize   int64  `msgpack:"set_size,omitempty"`
	SetDigest string `msgpack:"set_digest,omitempty"`
	Agent     string `msgpack:"agent"`
	Options   []byte `msgpack:"options,omitempty"`
	Criteria  []byte `msgpack:"criteria,omitempty"`
}

// Task is one dispatched (case, sample), published to adk.task.<worker>
// with Nats-Msg-Id TaskID.
type Task struct {
	JobID      string `msgpack:"job"`
	Index      int    `msgpack:"idx"`
	CaseIndex  int    `msgpack:"case"`
	Sample     int    `msgpack:"sample"`
	Worker     string `msgpack:"worker"`
	DeadlineAt int64  `msgpack:"deadline_at"` // epoch ms
	// Epoch is the incarnation of Worker the task is for (its heartbeats'
	// Epoch when the leader dispatched it). A worker runs only tasks of
	// its own epoch: a message that outlived the process it was for (a
	// NATS server that forgot an ack in a crash, a restart under the same
	// id) is dropped, never run.
	Epoch int64 `msgpack:"epoch,omitempty"`
	// OwnerTTLMS is the owner lease of the task's job when it has an
	// owner (0: none). Such a task starts only while the leader's last
	// answer saw the owner within OwnerStartWindow of it
	// (HeartbeatReply.Owners): an owner's death stops new work within the
	// window even while no leader can cancel the job.
	OwnerTTLMS int64 `msgpack:"owner_ttl_ms,omitempty"`
}

// OwnerStartWindow is how long after its owner was last heard a task of an
// owned job may still start: the lease plus a quarter, so a live owner's
// renewals and the worker's heartbeats (each a fraction of the lease
// apart) keep it open, while a dead owner's work stops 1.25 leases after
// its last renewal whatever happens to the leader (2.5 s for the CLI's
// 2 s lease).
func OwnerStartWindow(ownerTTL time.Duration) time.Duration { return ownerTTL + ownerTTL/4 }

// TaskBatch is several tasks for one worker in one message on
// adk.task.<worker>: the worker acks the message once and holds every
// task in it. At most MaxBatchTasks.
type TaskBatch struct {
	Tasks []Task `msgpack:"tasks"`
}

// MaxBatchTasks bounds a TaskBatch.
const MaxBatchTasks = 64

// DecodeTasks reads a task message: one task or a batch (at most
// MaxBatchTasks, all for worker). Any other content is an error: nothing
// in it may run.
func DecodeTasks(data []byte, worker string) ([]Task, error) {
	env, err := wire.Peek(data, SmallLimits)
	if err != nil {
		return nil, err
	}
	var ts []Task
	switch env.Kind {
	case KindTask:
		var t Task
		if err := wire.Decode(data, SmallLimits, KindTask, &t); err != nil {
			return nil, err
		}
		ts = []Task{t}
	case KindTasks:
		var b TaskBatch
		if err := wire.Decode(data, SmallLimits, KindTasks, &b); err != nil {
			return nil, err
		}
		ts = b.Tasks
	default:
		return nil, fmt.Errorf("task message of kind %q", env.Kind)
	}
	if len(ts) == 0 || len(ts) > MaxBatchTasks {
		return nil, fmt.Errorf("task message with %d tasks", len(ts))
	}
	seen := make(map[TaskRef]bool, len(ts))
	for _, t := range ts {
		if t.Worker != worker {
			return nil, fmt.Errorf("task for worker %q in %q's message", t.Worker, worker)
		}
		ref := TaskRef{JobID: t.JobID, Index: t.Index}
		if seen[ref] {
			return nil, fmt.Errorf("task %s twice in one message", t.ID())
		}
		seen[ref] = true
	}
	return ts, nil
}

// ID is the task id: job id and index.
func (t Task) ID() string { return TaskID(t.JobID, t.Index) }

// TaskID formats a task id.
func TaskID(job string, idx int) string { return fmt.Sprintf("%s.%d", job, idx) }

// TaskRef names a task in heartbeats.
type TaskRef struct {
	JobID string `msgpack:"job"`
	Index int    `msgpack:"idx"`
}

// Result is a worker's sample result, published to adk.result.<job>.
type Result struct {
	JobID  string `msgpack:"job"`
	Index  int    `msgpack:"idx"`
	Worker string `msgpack:"worker"`
	Sample []byte `msgpack:"sample"` // evalengine.SampleResult JSON
	Error  bool   `msgpack:"error,omitempty"`
	// Tag, when set, reports the task failed without a sample, for that
	// reason: the worker killed it before it could finish (only
	// evalengine.TagWorkerLost, for a worker that fenced itself, is
	// accepted). The leader fails it at once instead of at its deadline.
	Tag string `msgpack:"tag,omitempty"`
}

// ResultBatch is several results of one job from one worker in one
// message (adk.result.<job>): at high task rates the JetStream message
// rate, not the sample rate, is what costs. At most MaxBatchResults
// results and MaxResultBytes of samples.
type ResultBatch struct {
	Results []Result `msgpack:"results"`
}

// MaxBatchResults bounds a ResultBatch.
const MaxBatchResults = 128

// Heartbeat is a worker's liveness report (request on adk.hb.<worker>).
// Running lists the tasks it runs (the leader answers which to kill);
// Recent those it finished lately (at most MaxRecentRefs, newest first),
// so the leader can tell a lost dispatch from a result still in flight;
// a task the leader answered as decided (HeartbeatReply.RecentChecked)
// is left out of later heartbeats.
type Heartbeat struct {
	Worker   string    `msgpack:"worker"`
	Capacity int       `msgpack:"capacity"` // tasks it accepts at once (runs plus prefetch)
	Running  []TaskRef `msgpack:"running"`
	Seq      uint64    `msgpack:"seq"`
	Recent   []TaskRef `msgpack:"recent,omitempty"`
	// Epoch names this incarnation of the worker (chosen at its start,
	// never reused: the start time in ns). Tasks are dispatched to an
	// epoch; when a new epoch appears under an id, the leader fails the
	// tasks of the old one as lost at once, so a worker restarted under
	// the same id gets work as soon as its predecessor's tasks are failed.
	Epoch int64 `msgpack:"epoch,omitempty"`
	// Agents are the agent names the worker runs, sorted (at most
	// MaxHeartbeatAgents), so a client can refuse an unknown agent before
	// it submits. The leader dispatches a job only to workers offering its
	// agent, and fails it closed (eval_worker_node_unavailable) when no
	// live allowlisted worker does.
	Agents []string `msgpack:"agents,omitempty"`
	// Limits are the provider rate limits the worker's agents declare
	// (AGENT.json model.rate_limit), at most MaxHeartbeatLimits: the
	// leader splits each among the workers declaring it and answers each
	// its share (HeartbeatReply.Grants).
	Limits []LimitReport `msgpack:"limits,omitempty"`
}

// LimitReport is one declared rate limit of a worker (agent, endpoint)
// and what the worker holds of it.
type LimitReport struct {
	Agent    string `msgpack:"agent"`
	Endpoint string `msgpack:"endpoint"`
	// The declared limits (0: none on that dimension).
	RPM        int64 `msgpack:"rpm,omitempty"`
	TPM        int64 `msgpack:"tpm,omitempty"`
	Concurrent int64 `msgpack:"conc,omitempty"`
	// Held is the grant in force at the worker (all zero: none), so a
	// new leader knows what is outstanding.
	Held LimitShare `msgpack:"held"`
	// Throttled counts the 429s the worker got (since it started): the
	// leader cuts the fleet's limit when it grows. RetryAfterMS is the
	// longest Retry-After since the last heartbeat.
	Throttled    int64 `msgpack:"throttled,omitempty"`
	RetryAfterMS int64 `msgpack:"retry_after_ms,omitempty"`
	// Demand is the most callers (waiting or in flight) the worker's
	// limiter had at once lately, Idle that it had none for a heartbeat
	// interval: the leader gives an idle worker's share to the workers
	// with demand, and the concurrency slots up to each one's demand.
	// Both zero: a worker of an earlier build, which gets an equal share.
	Demand int64 `msgpack:"demand,omitempty"`
	Idle   bool  `msgpack:"idle,omitempty"`
}

// LimitShare is a share of a limit: per-minute rates and concurrent
// calls (ratelimit.Limits; +Inf and ratelimit.UnlimitedConcurrent are
// no limit).
type LimitShare struct {
	RPM        float64 `msgpack:"rpm"`
	TPM        float64 `msgpack:"tpm"`
	Concurrent int     `msgpack:"conc"`
}

// LimitGrant is the leader's grant of a limit to one worker, valid for
// the worker TTL from when the heartbeat was sent; PauseMS asks every
// worker of the limit to send nothing for that long (a Retry-After one
// of them got).
type LimitGrant struct {
	Agent    string     `msgpack:"agent"`
	Endpoint string     `msgpack:"endpoint"`
	Share    LimitShare `msgpack:"share"`
	PauseMS  int64      `msgpack:"pause_ms,omitempty"`
	// More says the share is smaller than the worker's due while others
	// give theirs back: the worker asks again soon rather than at its
	// next heartbeat.
	More bool `msgpack:"more,omitempty"`
}

// MaxHeartbeatLimits bounds Heartbeat.Limits; MaxLimitEndpointBytes an
// endpoint label.
const (
	MaxHeartbeatLimits    = 256
	MaxLimitEndpointBytes = 1024
	// MaxLimitDemand bounds LimitReport.Demand (callers of one limiter).
	MaxLimitDemand = 1 << 20
)

// MaxHeartbeatAgents bounds Heartbeat.Agents (a worker's agent files are
// bounded the same way, worker.MaxAgentFiles).
const MaxHeartbeatAgents = 256

// MaxRecentRefs bounds Heartbeat.Recent so a heartbeat stays well inside
// SmallLimits however fast the worker finishes tasks.
const MaxRecentRefs = 2048

// HeartbeatReply is the leader's answer: who leads, and which reported
// tasks the worker must kill (cancelled, lost or timed out in Raft).
type HeartbeatReply struct {
	Leader string    `msgpack:"leader"`
	Kill   []TaskRef `msgpack:"kill,omitempty"`
	// WorkerTTLMS is the leader's worker lease: after that long without a
	// heartbeat it fails the worker's tasks. A worker starts a held task
	// only while its last answered heartbeat was sent less than half of
	// it ago, so a worker resumed after a stop (SIGSTOP, a long pause)
	// never starts a task the leader has already failed: it first asks,
	// and the answer kills those.
	WorkerTTLMS int64 `msgpack:"worker_ttl_ms,omitempty"`
	// Grants are the worker's shares of the rate limits it reported.
	Grants []LimitGrant `msgpack:"grants,omitempty"`
	// Owners says, for each owned job of the reported running tasks, how
	// long before this answer the leader last knew its owner alive (a
	// renewal heard, or the submit). Durations, not times: the worker adds
	// them to its own clock.
	Owners []OwnerSeen `msgpack:"owners,omitempty"`
	// RecentChecked says the leader looked up every task of the
	// heartbeat's Recent: those not in RecentPending have their outcome
	// applied (decided in Raft, so no leader can take them for lost), and
	// the worker need not report them again; RecentPending are those it
	// has not seen decided (a result still in flight), which the worker
	// keeps reporting. False (a leader of an earlier build): the worker
	// keeps reporting every one for its recent window, as before.
	RecentChecked bool      `msgpack:"recent_checked,omitempty"`
	RecentPending []TaskRef `msgpack:"recent_pending,omitempty"`
}

// OwnerSeen is when the leader last knew a job's owner alive: AgoMS
// milliseconds before it answered.
type OwnerSeen struct {
	JobID string `msgpack:"job"`
	AgoMS int64  `msgpack:"ago_ms"`
}

// OwnerRenew renews an owner lease (published on adk.owner.<owner>).
type OwnerRenew struct {
	Owner string `msgpack:"owner"`
}

// TaskIndex maps a task index to its (case, sample): sample-major order,
// like the local engine's scheduler (sample 0 of every case first).
func TaskIndex(idx, cases int) (caseIdx, sample int) { return idx % cases, idx / cases }

// ResultJSONL is Request.Format asking a result as the JSON Lines stream
// of `adk eval run --format jsonl` (coordinator/DESIGN.md, "Results as
// records").
const ResultJSONL = "jsonl"

// Limits for decoding untrusted messages.
var (
	RequestLimits = wire.DecodeLimits{MaxBytes: MaxRequestBytes + 64<<10}
	SmallLimits   = wire.DecodeLimits{MaxBytes: 256 << 10, MaxElements: 1 << 14}
	ResultLimits  = wire.DecodeLimits{MaxBytes: MaxResultBytes + 64<<10}
	ReplyLimits   = wire.DecodeLimits{MaxBytes: 64 << 20, MaxElements: 1 << 22}
)
