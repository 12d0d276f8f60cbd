package tracestore

import (
	"encoding/json"
	"testing"
)

func evalSpanJSON(trace, job, cs, sample string) []byte {
	attrs := map[string]any{"gen_ai.operation.name": "invoke_agent"}
	for k, v := range map[string]string{"adk.eval.job_id": job, "adk.eval.case_id": cs, "adk.eval.sample_id": sample, "adk.eval.worker_id": "w1"} {
		if v != "" {
			attrs[k] = v
		}
	}
	b, _ := json.Marshal(map[string]any{
		"schema_version": 2, "signal": "span", "phase": "end", "name": "gen_ai.invoke_agent", "kind": "server",
		"trace_id": trace, "span_id": "00000000000000bb", "trace_flags": 1, "start_time_unix_nano": 1000,
		"end_time_unix_nano": 2000, "duration_nano": 1000, "status": "ok", "attributes": attrs,
	})
	return b
}

func TestStore_EvalSelectorsNestJobCaseSample(t *testing.T) {
	s := openStore(t, Options{})
	c1 := appendOK(t, s, "p", KindObservability, evalSpanJSON("t1", "job-1", "case-a", "0"), 1)
	c2 := appendOK(t, s, "p", KindObservability, evalSpanJSON("t2", "job-1", "case-a", "1"), 1)
	c3 := appendOK(t, s, "p", KindObservability, evalSpanJSON("t3", "job-1", "case-b", "0"), 1)
	appendOK(t, s, "p", KindObservability, evalSpanJSON("t4", "job-2", "case-a", "0"), 1)
	appendOK(t, s, "p", KindObservability, evalSpanJSON("t5", "", "case-a", "0"), 1) // no job: not eval-indexed
	appendOK(t, s, "other", KindObservability, evalSpanJSON("t6", "job-1", "case-a", "0"), 1)
	for _, tc := range []struct {
		name string
		sel  Selector
		want []uint64
	}{
		{"job", Selector{"job_id": "job-1"}, []uint64{c1, c2, c3}},
		{"case", Selector{"job_id": "job-1", "case_id": "case-a"}, []uint64{c1, c2}},
		{"sample", Selector{"job_id": "job-1", "case_id": "case-a", "sample_id": "1"}, []uint64{c2}},
		{"unknown job", Selector{"job_id": "job-9"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := s.Query("p", tc.sel, QueryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := cursors(t, page)
			if len(got) != len(tc.want) {
				t.Fatalf("cursors %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("cursors %v, want %v", got, tc.want)
				}
			}
		})
	}
	for _, sel := range []Selector{
		{"case_id": "case-a"},
		{"job_id": "job-1", "sample_id": "0"},
		{"job_id": "job-1", "run_id": "r"},
		{"job_id": ""},
		{"worker_id": "w1"},
	} {
		_, err := s.Query("p", sel, QueryOptions{})
		wantCode(t, err, CodeInvalidSelector)
	}
}
