package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// otlpSink is the outside world's OTLP backend: a real OTLP/HTTP server
// on 127.0.0.1 that decodes what it receives with the collector's pdata
// (JSON or protobuf, as the request says) and keeps it.
type otlpSink struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []ptrace.Span
	res     []map[string]any // resource attributes per span
	logs    []plog.LogRecord
	headers []http.Header
	// status, when set, answers every request with it (a down or
	// refusing backend).
	status int
}

func newOTLPSink(t *testing.T) *otlpSink {
	t.Helper()
	s := &otlpSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *otlpSink) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	status := s.status
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	if status != 0 {
		w.WriteHeader(status)
		return
	}
	json := r.Header.Get("Content-Type") == "application/json"
	switch {
	case strings.HasSuffix(r.URL.Path, "/v1/traces"):
		var td ptrace.Traces
		if json {
			td, err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
		} else {
			td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		}
		if err != nil {
			http.Error(w, "bad traces", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				for k := 0; k < ss.Spans().Len(); k++ {
					s.spans = append(s.spans, ss.Spans().At(k))
					s.res = append(s.res, rs.Resource().Attributes().AsRaw())
				}
			}
		}
		s.mu.Unlock()
	case r.URL.Path == "/v1/logs":
		var ld plog.Logs
		if json {
			ld, err = (&plog.JSONUnmarshaler{}).UnmarshalLogs(body)
		} else {
			ld, err = (&plog.ProtoUnmarshaler{}).UnmarshalLogs(body)
		}
		if err != nil {
			http.Error(w, "bad logs", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				sl := rl.ScopeLogs().At(j)
				for k := 0; k < sl.LogRecords().Len(); k++ {
					s.logs = append(s.logs, sl.LogRecords().At(k))
				}
			}
		}
		s.mu.Unlock()
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	if json {
		_, _ = w.Write([]byte("{}"))
	}
}

func (s *otlpSink) snapshot() ([]ptrace.Span, []map[string]any, []plog.LogRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ptrace.Span(nil), s.spans...), append([]map[string]any(nil), s.res...), append([]plog.LogRecord(nil), s.logs...)
}
