package devapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/nats-io/nats.go"
)

// TraceSelectorKeys are the selector query parameters of GET
// /dev/v1/traces, passed to the store's query service as they are.
var TraceSelectorKeys = []string{"run_id", "trace_id", "workflow_id", "invocation_id", "job_id", "case_id", "sample_id"}

// DefaultTraceMaxBytes is the page budget asked of the store when the
// caller names none: under MaxResponseBytes with room for the envelope.
const DefaultTraceMaxBytes = 960 << 10

// traceTimeout bounds one trace query through NATS.
const traceTimeout = 10 * time.Second

func traceQueryKeys() []string {
	return append(append([]string{}, TraceSelectorKeys...), "after_cursor", "limit", "max_bytes", "min_sequence")
}

// TracePage is the answer of GET /dev/v1/traces (CONTRACTS §4).
type TracePage struct {
	tracestore.Page
	SchemaVersion   int  `json:"schema_version"`
	ContentCaptured bool `json:"content_captured"`
}

func traceErr(status int, code, msg string) *Error { return errorf(status, code, msg) }

func (s *Server) traces(w http.ResponseWriter, c *call) *Error {
	if s.o.NATS == nil {
		return traceErr(http.StatusServiceUnavailable, CodeAPIUnavailable, "this server has no trace store connection")
	}
	req := tracenode.QueryRequest{Token: c.token}
	for _, k := range TraceSelectorKeys {
		if v, ok := c.query[k]; ok {
			if v == "" {
				return traceErr(http.StatusBadRequest, CodeInvalidTraceQuery, "selector "+k+" must not be empty").with(map[string]string{"parameter": k})
			}
			if req.Selector == nil {
				req.Selector = map[string]string{}
			}
			req.Selector[k] = v
		}
	}
	after, e := queryInt(c.query, "after_cursor", 0, 0, 1<<62)
	if e != nil {
		e.Code = CodeInvalidTraceQuery
		return e
	}
	cur := uint64(after)
	req.AfterCursor = &cur // always sent: a stale window answers 409 (CONTRACTS §4)
	limit, e := queryInt(c.query, "limit", 0, 1, 1_000_000)
	if e != nil {
		e.Code = CodeInvalidTraceQuery
		return e
	}
	req.Limit = int(limit)
	maxBytes, e := queryInt(c.query, "max_bytes", DefaultTraceMaxBytes, 1, DefaultTraceMaxBytes)
	if e != nil {
		e.Code = CodeInvalidTraceQuery
		return e
	}
	req.MaxBytes = int(maxBytes)
	minSeq, e := queryInt(c.query, "min_sequence", 0, 0, 1<<62)
	if e != nil {
		e.Code = CodeInvalidTraceQuery
		return e
	}
	req.MinSequence = uint64(minSeq)
	ctx, cancel := context.WithTimeout(c.r.Context(), traceTimeout)
	defer cancel()
	reply, err := tracenode.Query(ctx, s.o.NATS, req)
	if err != nil {
		return traceError(err)
	}
	return s.writeJSON(w, http.StatusOK, TracePage{Page: *reply.Page, SchemaVersion: 1})
}

// traceError maps a query service error onto the contract's answers.
func traceError(err error) *Error {
	var te *tracestore.Error
	if !errors.As(err, &te) {
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			return traceErr(http.StatusServiceUnavailable, CodeTraceUnavailable, "no trace store node answered")
		}
		return traceErr(http.StatusServiceUnavailable, CodeTraceUnavailable, "the trace query failed")
	}
	switch te.Code {
	case tracestore.CodeReplayGap:
		e := traceErr(http.StatusConflict, CodeTraceReplayGap, "after_cursor is older than the oldest event kept").with(te.Fields.Gap)
		e.Header = map[string]string{"x-adk-trace-gap": "true"}
		return e
	case tracestore.CodeCursorAhead:
		return traceErr(http.StatusConflict, CodeTraceCursorAhead, "after_cursor is beyond the latest cursor").with(te.Fields.Gap)
	case tracenode.CodeUnauthenticated:
		e := traceErr(http.StatusUnauthorized, CodeUnauthorized, "the store does not know this bearer token")
		e.Header = map[string]string{"www-authenticate": `Bearer realm="` + Realm + `", error="invalid_token"`}
		return e
	case tracenode.CodeMinSequenceTimeout:
		return traceErr(http.StatusServiceUnavailable, CodeTraceUnavailable, "the store node has not applied min_sequence yet").
			with(map[string]string{"reason": te.Code})
	case tracestore.CodeUnavailable:
		return traceErr(http.StatusServiceUnavailable, CodeTraceUnavailable, "the trace store is unavailable")
	}
	msg := te.Code
	if te.Detail != "" {
		msg += ": " + te.Detail
	}
	return traceErr(http.StatusBadRequest, CodeInvalidTraceQuery, strings.ReplaceAll(msg, "_", " ")).with(map[string]string{"reason": te.Code})
}
