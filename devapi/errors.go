package devapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
)

// Error codes of the API (CONTRACTS §7, §4 and this package's additions).
const (
	CodeInvalidRequest         = "invalid_evaluation_request"
	CodeInvalidReport          = "invalid_evaluation_report"
	CodeInvalidQuery           = "invalid_evaluation_query"
	CodeInvalidPathParameter   = "invalid_evaluation_path_parameter"
	CodeUnauthorized           = "unauthorized"
	CodeForbidden              = "forbidden"
	CodeNotFound               = "evaluation_resource_not_found"
	CodeAgentNotFound          = "evaluation_agent_not_found"
	CodeMethodNotAllowed       = "method_not_allowed"
	CodeResultNotReady         = "evaluation_result_not_ready"
	CodeStateConflict          = "evaluation_state_conflict"
	CodeSetMismatch            = "evaluation_set_mismatch"
	CodeCapacityReached        = "evaluation_capacity_reached"
	CodeServiceUnavailable     = "evaluation_service_unavailable"
	CodeEvaluationUnconfigured = "developer_evaluation_unavailable"
	CodeAPIUnavailable         = "developer_api_unavailable"
	CodeRouteNotFound          = "route_not_found"
	CodeBodyTooLarge           = "request_body_too_large"
	CodeResponseTooLarge       = "response_limit_exceeded"
	CodeUnsupportedMediaType   = "unsupported_media_type"
	CodeTraceReplayGap         = "trace_replay_gap"
	CodeTraceCursorAhead       = "trace_cursor_ahead"
	CodeInvalidTraceQuery      = "invalid_trace_query"
	CodeTraceUnavailable       = "trace_store_unavailable"
	CodeCrossOrigin            = "cross_origin_request_refused"
	// CodeIdempotencyKeyReused (422): the submission's Idempotency-Key
	// named another submission of the scope within the last hour.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
)

// Error is an API error: an HTTP status and the contract's body
// {"error":{"code","message","details"}}. Header holds extra response
// headers (allow, retry-after, www-authenticate, x-adk-trace-gap).
type Error struct {
	Status  int
	Code    string
	Message string
	Details any
	Header  map[string]string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

func (e *Error) with(details any) *Error { e.Details = details; return e }

// errorBody is the wire form of an Error.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details any    `json:"details,omitempty"`
	} `json:"error"`
}

func (e *Error) body() []byte {
	var b errorBody
	b.Error.Code, b.Error.Message, b.Error.Details = e.Code, e.Message, e.Details
	out, err := json.Marshal(b)
	if err != nil {
		return []byte(`{"error":{"code":"internal_error","message":"error encoding failed"}}`)
	}
	return append(out, '\n')
}

// serviceError maps a coordinator (or store, or engine) error onto the
// contract's status and code. The service's own code stays in
// details.reason, so a caller can tell queue_full from validation_busy.
func serviceError(err error) *Error {
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	ae := api.AsError(err)
	details := map[string]string{"reason": ae.Code}
	if ae.Phase != "" {
		details["phase"] = ae.Phase
	}
	if ae.Reason != "" {
		details["job_reason"] = ae.Reason
	}
	msg := ae.Detail
	mk := func(status int, code string) *Error {
		if msg == "" {
			msg = strings.ReplaceAll(ae.Code, "_", " ")
		}
		return (&Error{Status: status, Code: code, Message: msg}).with(details)
	}
	switch ae.Code {
	case evalrecord.CodeNotFound:
		return mk(http.StatusNotFound, CodeNotFound)
	case api.CodeUnknownAgent:
		return mk(http.StatusNotFound, CodeAgentNotFound)
	case api.CodeResultNotReady:
		return mk(http.StatusConflict, CodeResultNotReady)
	case api.CodeJobTerminal, api.CodeAlreadyTerminal, evalrecord.CodeJobNotCompleted, evalrecord.CodeAlreadyExists,
		evalrecord.CodeRevisionConflict, evalrecord.CodeStalePhase, evalrecord.CodeInvalidTransition:
		return mk(http.StatusConflict, CodeStateConflict)
	case evalrecord.CodeJobSetMismatch, evalengine.CodeEvalSetMismatch:
		return mk(http.StatusConflict, CodeSetMismatch)
	case evalrecord.CodeQueueFull, api.CodeValidationBusy, evalrecord.CodeSetCapacity, evalrecord.CodeJobCapacity,
		evalrecord.CodeBaselineCapacity, evalrecord.CodeRecordBytes, evalrecord.CodeScopeBytes, evalrecord.CodeTotalBytes:
		e := mk(http.StatusTooManyRequests, CodeCapacityReached)
		e.Header = map[string]string{"retry-after": "1"}
		return e
	case api.CodeCoordinatorBehind:
		// The client asked again until its timeout and every answer was
		// a coordinator that had not applied this gateway's last seen
		// index: a follower catching up; soon over.
		e := mk(http.StatusServiceUnavailable, CodeServiceUnavailable)
		e.Header = map[string]string{"retry-after": "1"}
		return e
	case api.CodeServiceUnavailable, api.CodeTimeout, api.CodeNotLeader, api.CodeInternal, api.CodeValidationTimeout,
		api.CodeValidationFailed, api.CodeValidationUnavailable, api.CodeResultDigestMismatch, evalrecord.CodeEvalStoreRecoveryFailed:
		return mk(http.StatusServiceUnavailable, CodeServiceUnavailable)
	}
	return mk(http.StatusBadRequest, CodeInvalidRequest)
}
