package evalrecord

import (
	"errors"

	"github.com/fadcedab/adk/internal/coded"
)

// Stable error codes of the eval store contract (CONTRACTS §6). They are
// strings on the wire; callers match them with errors.Is against the
// sentinels below or read Error.Code.
const (
	CodeInvalidScope            = "invalid_eval_scope"
	CodeRevisionConflict        = "eval_set_revision_conflict"
	CodeSetCapacity             = "eval_set_capacity_reached"
	CodeJobCapacity             = "eval_job_capacity_reached"
	CodeBaselineCapacity        = "eval_baseline_capacity_reached"
	CodeRecordBytes             = "eval_record_byte_capacity_reached"
	CodeScopeBytes              = "eval_scope_byte_capacity_reached"
	CodeTotalBytes              = "eval_store_total_byte_capacity_reached"
	CodeAlreadyExists           = "already_exists"
	CodeNotFound                = "not_found"
	CodeJobNotCompleted         = "job_not_completed"
	CodeJobSetMismatch          = "eval_job_set_mismatch"
	CodeStalePhase              = "stale_phase"
	CodeInvalidTransition       = "invalid_eval_job_transition"
	CodeInvalidPatch            = "invalid_eval_job_patch"
	CodeInvalidResult           = "invalid_eval_job_result"
	CodeInvalidPageOptions      = "invalid_eval_store_page_options"
	CodeInvalidPruneOptions     = "invalid_eval_prune_options"
	CodeInvalidBaselineName     = "invalid_eval_baseline_name"
	CodeQueueFull               = "evaluation_queue_full"
	CodeServiceRestarted        = "evaluation_service_restarted"
	CodeInvalidStoreRecord      = "invalid_eval_store_record"
	CodeEvalStoreRecoveryFailed = "eval_store_recovery_failed"
	// A set upload's part does not fit its upload (count, size, digest,
	// bytes) or an upload a submit names is incomplete, expired or not
	// the bytes its digest names; the detail names the field.
	CodeInvalidSetUpload = "invalid_eval_set_upload"
	// The set uploads in progress hold MaxUploadBytes already.
	CodeUploadCapacity = "eval_set_upload_capacity_reached"
	// A submit's request_id was used, in its scope and within the
	// store's retention, for a submit with other content (the detail
	// names the field and the job it made).
	CodeRequestIDConflict = "eval_request_id_conflict"
)

// Bounds of a set upload (a set too large for one submit, sent in parts;
// coordinator/DESIGN.md "Sets too large for one message").
const (
	// MaxSetPartBytes bounds one part: with the request envelope it fits
	// the NATS server's default 1 MiB max_payload.
	MaxSetPartBytes = 512 << 10
	// MaxSetUploadBytes bounds an uploaded set: the eval set file bound.
	MaxSetUploadBytes = 16 << 20
	// MaxSetParts bounds the parts of an upload (32 MiB of parts at most,
	// the set bound twice over, so a client may use smaller parts).
	MaxSetParts = 64
)

// Error is a store error with a stable Code and an optional bounded
// Detail (internal/coded, domain "evalstore: "): it formats "evalstore:
// code: detail", and errors.Is(err, ErrNotFound) and friends match by code.
type Error = coded.Error[storeDomain]

// storeDomain prints the eval store's errors.
type storeDomain struct{}

func (storeDomain) Prefix() string       { return "evalstore: " }
func (storeDomain) DetailInParens() bool { return false }

// Sentinels for errors.Is.
var (
	// ErrNotFound: no such set, job, baseline or task in this scope.
	ErrNotFound = &Error{Code: CodeNotFound}
	// ErrRevisionConflict: the same set id and version with another digest.
	ErrRevisionConflict = &Error{Code: CodeRevisionConflict}
	// ErrStalePhase: a compare-and-set transition found another phase.
	ErrStalePhase = &Error{Code: CodeStalePhase}
	// ErrInvalidTransition: the phase graph does not allow the transition.
	ErrInvalidTransition = &Error{Code: CodeInvalidTransition}
	// ErrQueueFull: admission refused the job (evaluation_queue_full).
	ErrQueueFull = &Error{Code: CodeQueueFull}
	// ErrJobNotCompleted: a baseline names a job that has no result.
	ErrJobNotCompleted = &Error{Code: CodeJobNotCompleted}
	// ErrAlreadyExists: a job id is taken.
	ErrAlreadyExists = &Error{Code: CodeAlreadyExists}
	// ErrInvalidScope: the scope is not 1..256 bytes of UTF-8.
	ErrInvalidScope = &Error{Code: CodeInvalidScope}
	// ErrRequestIDConflict: a submit's request_id names another request.
	ErrRequestIDConflict = &Error{Code: CodeRequestIDConflict}
)

// Code returns the stable code of a store error, or "" for others.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
