package evalrecord

import "encoding/json"

// Phase is a job phase.
type Phase string

// Job phases and their legal transitions (CONTRACTS §6): queued → running
// | failed | cancelled; running → completed | failed | timed_out |
// cancelled. The last four are terminal.
const (
	PhaseQueued    Phase = "queued"
	PhaseRunning   Phase = "running"
	PhaseCompleted Phase = "completed"
	PhaseFailed    Phase = "failed"
	PhaseTimedOut  Phase = "timed_out"
	PhaseCancelled Phase = "cancelled"
)

// Terminal reports whether no transition leaves p.
func (p Phase) Terminal() bool {
	return p == PhaseCompleted || p == PhaseFailed || p == PhaseTimedOut || p == PhaseCancelled
}

// LegalTransition reports whether the phase graph allows from → to.
func LegalTransition(from, to Phase) bool {
	switch from {
	case PhaseQueued:
		return to == PhaseRunning || to == PhaseFailed || to == PhaseCancelled
	case PhaseRunning:
		return to == PhaseCompleted || to == PhaseFailed || to == PhaseTimedOut || to == PhaseCancelled
	}
	return false
}

// Reasons recorded on terminal jobs.
const (
	ReasonUserCancelled    = "user_cancelled"
	ReasonOwnerLost        = "owner_lost"
	ReasonDeadlineExceeded = "deadline_exceeded"
	ReasonServiceRestarted = CodeServiceRestarted
	MaxReasonBytes         = 4096
)

// SetRecord is one immutable set revision. Body is the set's canonical
// JSON; Digest its SHA-256 hex.
type SetRecord struct {
	Scope     string `msgpack:"scope" json:"scope"`
	ID        string `msgpack:"id" json:"id"`
	Version   string `msgpack:"version" json:"version"`
	Digest    string `msgpack:"digest" json:"digest"`
	CreatedAt int64  `msgpack:"created_at" json:"created_at"`
	Body      []byte `msgpack:"body,omitempty" json:"-"`
}

// Job is a job record. The JSON form is the public job: Spec is not in
// it, except the agent's name as agent_name (MarshalJSON).
type Job struct {
	JobID          string `msgpack:"job_id" json:"job_id"`
	Scope          string `msgpack:"scope" json:"scope"`
	EvalSetID      string `msgpack:"eval_set_id" json:"eval_set_id"`
	EvalSetVersion string `msgpack:"eval_set_version" json:"eval_set_version"`
	Metadata       []byte `msgpack:"metadata,omitempty" json:"-"` // JSON object
	Phase          Phase  `msgpack:"phase" json:"phase"`
	Revision       int64  `msgpack:"revision" json:"revision"`
	CreatedAt      int64  `msgpack:"created_at" json:"created_at"`
	UpdatedAt      int64  `msgpack:"updated_at" json:"updated_at"`
	StartedAt      int64  `msgpack:"started_at,omitempty" json:"started_at,omitempty"`
	FinishedAt     int64  `msgpack:"finished_at,omitempty" json:"finished_at,omitempty"`
	Reason         string `msgpack:"reason,omitempty" json:"reason,omitempty"`

	Spec     JobSpec  `msgpack:"spec" json:"-"`
	Progress Progress `msgpack:"progress" json:"progress"`

	Seq          uint64 `msgpack:"seq" json:"-"` // admission order
	Bytes        int64  `msgpack:"bytes" json:"-"`
	BaselineRefs int    `msgpack:"baseline_refs,omitempty" json:"-"`
	ResultDigest string `msgpack:"result_digest,omitempty" json:"-"`
	// Records counts the job's result records: its accepted outcomes, in
	// the order the log applied them (evalstore.Finish). RecordsHash is
	// the marshaled state of a running SHA-256 over them, identical on
	// every node because the apply order is the log's; a completion that
	// carries its digest and count needs no document (coordinator/DESIGN.md,
	// "Results as records").
	Records     int64  `msgpack:"records,omitempty" json:"-"`
	RecordBytes int64  `msgpack:"record_bytes,omitempty" json:"-"` // their samples' bytes
	RecordsHash []byte `msgpack:"records_hash,omitempty" json:"-"`
	// ResultFormat is ResultRecords for a job completed as records (no
	// stored document); empty for a stored document.
	ResultFormat string `msgpack:"result_format,omitempty" json:"-"`
}

// ResultRecords is Job.ResultFormat of a result kept as records.
const ResultRecords = "records"

// jobJSON is Job without its methods, so MarshalJSON can embed it.
type jobJSON Job

// MarshalJSON writes the public job: the record's JSON fields and
// agent_name, the one part of the spec a reader of the job list needs
// (which agent ran it); the rest of the spec (options, criteria, owner)
// stays private.
func (j Job) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		jobJSON
		AgentName string `json:"agent_name,omitempty"`
	}{jobJSON(j), j.Spec.Agent})
}

// UnmarshalJSON reads the public job back (agent_name into Spec.Agent).
func (j *Job) UnmarshalJSON(data []byte) error {
	v := struct {
		*jobJSON
		AgentName string `json:"agent_name"`
	}{jobJSON: (*jobJSON)(j)}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	j.Spec.Agent = v.AgentName
	return nil
}

// JobSpec is what workers need to run the job's tasks.
type JobSpec struct {
	SetDigest  string `msgpack:"set_digest"`
	Agent      string `msgpack:"agent"`
	Options    []byte `msgpack:"options,omitempty"` // evalengine.Options JSON
	Criteria   []byte `msgpack:"criteria,omitempty"`
	Owner      string `msgpack:"owner,omitempty"`
	OwnerTTLMS int64  `msgpack:"owner_ttl_ms,omitempty"`
	TaskTTLMS  int64  `msgpack:"task_ttl_ms"` // per-task deadline
	JobTTLMS   int64  `msgpack:"job_ttl_ms"`  // whole-job deadline from start
	Cases      int    `msgpack:"cases"`
	Samples    int    `msgpack:"samples"`
	// NotEvaluated are cases of the submitted file left out of the set
	// (a cluster simulates no users), in the file's order: the result
	// lists them in its metadata as a local run does.
	NotEvaluated []NotEvaluated `msgpack:"not_evaluated,omitempty"`
}

// NotEvaluated is a case a job left out and why (evalengine's
// not_evaluated_cases entry).
type NotEvaluated struct {
	CaseID string `msgpack:"case_id"`
	Reason string `msgpack:"reason"`
}

// Progress counts a job's tasks.
type Progress struct {
	Total      int `msgpack:"total" json:"tasks_total"`
	Dispatched int `msgpack:"dispatched" json:"tasks_dispatched"`
	Done       int `msgpack:"done" json:"tasks_done"`
	Errors     int `msgpack:"errors" json:"tasks_error"`
}

// Baseline is a named, scoped copy of a completed job's result.
type Baseline struct {
	Scope        string `msgpack:"scope" json:"scope"`
	Name         string `msgpack:"name" json:"name"`
	JobID        string `msgpack:"job_id" json:"job_id"`
	ResultDigest string `msgpack:"result_digest" json:"result_digest"`
	Result       []byte `msgpack:"result" json:"-"`
	UpdatedAt    int64  `msgpack:"updated_at" json:"updated_at"`
}

// Task states.
const (
	TaskAssigned  = "assigned"
	TaskDone      = "done"
	TaskFailed    = "failed" // Tag says why (worker_lost, timeout)
	TaskCancelled = "cancelled"
)

// Task is one dispatched (case, sample) of a running job. A task record
// exists only once the task is assigned: dispatch order is the index.
type Task struct {
	JobID      string `msgpack:"job"`
	Index      int    `msgpack:"idx"`
	Worker     string `msgpack:"worker"`
	Epoch      int64  `msgpack:"epoch,omitempty"` // the worker incarnation (Assignment.Epoch)
	State      string `msgpack:"state"`
	AssignedAt int64  `msgpack:"assigned_at"`
	DeadlineAt int64  `msgpack:"deadline_at"`
	FinishedAt int64  `msgpack:"finished_at,omitempty"`
	Tag        string `msgpack:"tag,omitempty"`
	Sample     []byte `msgpack:"sample,omitempty"` // evalengine.SampleResult JSON
	Error      bool   `msgpack:"error,omitempty"`
}

// Lease is the coordinator lease the leader renews through Raft.
type Lease struct {
	LeaderID string `msgpack:"leader"`
	At       int64  `msgpack:"at"` // ms, the proposing leader's clock
}

// Page is one page of a scope-local listing.
type Page[T any] struct {
	Scope      string `json:"scope"`
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// PruneOptions select what Prune may delete: records older than Before
// (epoch ms). Limit bounds the records scanned in one call; Cursor resumes
// a previous call. Baselines are deleted only with IncludeBaselines.
type PruneOptions struct {
	Before           int64  `msgpack:"before" json:"before"`
	Limit            int    `msgpack:"limit,omitempty" json:"limit,omitempty"`
	Cursor           string `msgpack:"cursor,omitempty" json:"cursor,omitempty"`
	IncludeBaselines bool   `msgpack:"include_baselines,omitempty" json:"include_baselines,omitempty"`
}

// PruneResult reports one Prune call.
type PruneResult struct {
	BaselinesDeleted    int    `msgpack:"baselines_deleted" json:"baselines_deleted"`
	JobsDeleted         int    `msgpack:"jobs_deleted" json:"jobs_deleted"`
	SetRevisionsDeleted int    `msgpack:"set_revisions_deleted" json:"set_revisions_deleted"`
	BytesReclaimed      int64  `msgpack:"bytes_reclaimed" json:"bytes_reclaimed"`
	Scanned             int    `msgpack:"scanned" json:"scanned"`
	NextCursor          string `msgpack:"next_cursor,omitempty" json:"next_cursor,omitempty"`
	HasMore             bool   `msgpack:"has_more" json:"has_more"`
}
