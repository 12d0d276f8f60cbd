package devapi

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseQuery: the strict query parser never panics, accepts only the
// allowed keys once each with bounded UTF-8 values, and every refusal is
// a 400 invalid_evaluation_query.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "limit=3", "limit=3&limit=4", "scope=a&cursor=%zz", "a", "&&", "format=json&suite_name=x%00",
		"scope=%E2%82%AC", "run_id=r&after_cursor=18446744073709551616", strings.Repeat("x", 5000)} {
		f.Add(s)
	}
	allowed := []string{"scope", "limit", "cursor", "format", "suite_name", "run_id", "after_cursor"}
	f.Fuzz(func(t *testing.T, raw string) {
		q, e := parseQuery(raw, allowed)
		if e != nil {
			if e.Status != http.StatusBadRequest || e.Code != CodeInvalidQuery || q != nil {
				t.Fatalf("refusal %+v", e)
			}
			return
		}
		for k, v := range q {
			if !isAllowed(k, allowed) || len(v) > MaxQueryValueBytes || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				t.Fatalf("accepted %q=%q", k, v)
			}
		}
		if _, e := queryInt(q, "limit", 0, 1, 1000); e != nil && e.Status != http.StatusBadRequest {
			t.Fatalf("limit %+v", e)
		}
	})
}

// FuzzParseSubmit: the submission body parser never panics; what it
// accepts names an agent, a set object and only first-party metrics,
// and what it refuses is a 400 with a code.
func FuzzParseSubmit(f *testing.F) {
	for _, s := range []string{
		`{"agent_name":"a","set":{"id":"s"}}`,
		`{"agent_name":"a","set":{},"metrics":[{"id":"l","metric":"latency","threshold":0.5,"config":{"target_ms":100}}]}`,
		`{"agent_name":"a","set":{},"metrics":[{"id":"j","metric":"llm_judge"}]}`,
		`{"agent_name":"a","agent_name":"b","set":{}}`,
		`{"agent_name":"a","set":{},"module":"x"}`,
		`{"agent_name":"a","set":{}} {}`,
		`[]`, `{"agent_name":1}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, e := parseSubmit(data)
		if e != nil {
			if e.Status != http.StatusBadRequest || e.Code == "" || req != nil {
				t.Fatalf("refusal %+v", e)
			}
			return
		}
		if req.Agent == "" || !isObject(req.Set) {
			t.Fatalf("accepted %+v", req)
		}
		if strings.Contains(string(req.Criteria), "llm_judge") {
			t.Fatalf("accepted a judge: %s", req.Criteria)
		}
	})
}

// FuzzParsePrune: the prune body parser never panics; what it accepts
// has a positive cut-off and bounded limit and cursor, and every refusal
// is a 400 naming a field.
func FuzzParsePrune(f *testing.F) {
	for _, s := range []string{
		`{"older_than":"720h"}`, `{"before":"2026-01-02T15:04:05Z","limit":10,"cursor":"01ab","include_baselines":true}`,
		`{}`, `{"before":"x","older_than":"1h"}`, `{"older_than":"-1s"}`, `{"before":"0001-01-01T00:00:00Z"}`,
		`{"older_than":"1h","limit":-1}`, `{"older_than":"1h","older_than":"2h"}`, `{"older_than":"1h"} x`, "\xff",
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		o, e := parsePrune(data, now)
		if e != nil {
			if e.Status != http.StatusBadRequest || e.Code != CodeInvalidRequest || o != nil {
				t.Fatalf("refusal %+v", e)
			}
			return
		}
		if o.Before <= 0 || o.Limit < 0 || o.Limit > MaxPruneLimit || len(o.Cursor) > 2*MaxQueryValueBytes {
			t.Fatalf("accepted %+v", o)
		}
	})
}

// FuzzParseReportBodies: the render and compare bodies' decoding never
// panics; every refusal is a 400 invalid_evaluation_report with a reason,
// and a report it accepts is a decoded result or comparison.
func FuzzParseReportBodies(f *testing.F) {
	for _, s := range []string{
		`{"report":{},"format":"json"}`,
		`{"report":{"report_type":"baseline_comparison"},"format":"markdown"}`,
		`{"report":[],"format":"json","options":{"max_output_bytes":0}}`,
		`{"baseline_job_id":"j1","current_job_id":"j2"}`,
		`{"baseline":{},"current":{},"options":{}}`,
		`{"report":{},"report":{}}`, `{"report":{}} x`, `{"x":1}`, "\xff", `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(what string, e *Error) {
			if e.Status != http.StatusBadRequest || e.Code != CodeInvalidReport {
				t.Fatalf("%s refusal %+v", what, e)
			}
		}
		var rb RenderBody
		if e := decodeBody(data, &rb, CodeInvalidReport); e != nil {
			check("render body", e)
		} else if v, e := decodeReportValue(rb.Report); e != nil {
			check("report", e)
			if v != nil {
				t.Fatalf("refused report decoded to %T", v)
			}
		} else if v == nil {
			t.Fatal("accepted report decoded to nil")
		}
		var cb CompareBody
		if e := decodeBody(data, &cb, CodeInvalidReport); e != nil {
			check("compare body", e)
		}
	})
}
