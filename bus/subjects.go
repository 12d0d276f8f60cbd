package bus

import (
	"fmt"
	"strings"
)

// Subjects. Every subject starts with "adk."; request/reply APIs carry a
// version token so a v2 can run beside v1. Ids are single tokens: see
// ValidToken.
const (
	// TaskSubjectPrefix prefixes per-worker task subjects: adk.task.<worker>.
	TaskSubjectPrefix = "adk.task."
	// ResultSubjectPrefix prefixes result subjects: adk.result.<job>.<worker>.
	ResultSubjectPrefix = "adk.result."
	// SignalSubjectPrefix prefixes signal subjects: adk.signal.<kind>.
	SignalSubjectPrefix = "adk.signal."
	// CoordSubjectPrefix prefixes the coordinator API: adk.coord.v1.<op>.
	CoordSubjectPrefix = "adk.coord.v1."
	// TraceQuerySubject is the trace query service every store node serves.
	TraceQuerySubject = "adk.trace.v1.query"
	// TraceStatusSubject is where every store node (no queue group)
	// answers with its own counters: a request gathers one reply per node.
	TraceStatusSubject = "adk.trace.v1.status"

	// AllTasksSubject matches every task subject (stream filter).
	AllTasksSubject = TaskSubjectPrefix + "*"
	// AllResultsSubject matches every result subject.
	AllResultsSubject = ResultSubjectPrefix + "*.*"
	// AllSignalsSubject matches every signal subject.
	AllSignalsSubject = SignalSubjectPrefix + "*"
	// AllCoordSubject matches every coordinator API subject.
	AllCoordSubject = CoordSubjectPrefix + "*"

	// MaxTokenLen bounds one id token in a subject.
	MaxTokenLen = 128
)

// ValidToken reports whether s can be one subject token: 1..MaxTokenLen
// bytes of [A-Za-z0-9_-]. That rules out the separators and wildcards NATS
// gives meaning to ('.', '*', '>'), whitespace and control bytes, so an id
// from outside can never widen or redirect a subject.
func ValidToken(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrInvalidToken)
	}
	if len(s) > MaxTokenLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidToken, MaxTokenLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: byte %d is not in [A-Za-z0-9_-]", ErrInvalidToken, i)
		}
	}
	return nil
}

func subject(prefix, token string) (string, error) {
	if err := ValidToken(token); err != nil {
		return "", fmt.Errorf("subject %s<token>: %w", prefix, err)
	}
	return prefix + token, nil
}

// TaskSubject returns adk.task.<workerID>.
func TaskSubject(workerID string) (string, error) { return subject(TaskSubjectPrefix, workerID) }

// ResultSubject returns adk.result.<jobID>.<workerID>. The worker token
// is what NATS permissions bind to a worker's credentials (see
// WorkerPermissions), so a result names its sender unforgeably.
func ResultSubject(jobID, workerID string) (string, error) {
	if err := ValidToken(workerID); err != nil {
		return "", fmt.Errorf("result subject worker: %w", err)
	}
	s, err := subject(ResultSubjectPrefix, jobID)
	if err != nil {
		return "", err
	}
	return s + "." + workerID, nil
}

// ResultSender returns the worker token of a result subject, "" when subj
// is not one.
func ResultSender(subj string) string {
	rest, ok := strings.CutPrefix(subj, ResultSubjectPrefix)
	if !ok {
		return ""
	}
	job, worker, ok := strings.Cut(rest, ".")
	if !ok || ValidToken(job) != nil || ValidToken(worker) != nil {
		return ""
	}
	return worker
}

// SignalSubject returns adk.signal.<kind>.
func SignalSubject(kind string) (string, error) { return subject(SignalSubjectPrefix, kind) }

// CoordSubject returns adk.coord.v1.<op>.
func CoordSubject(op string) (string, error) { return subject(CoordSubjectPrefix, op) }
