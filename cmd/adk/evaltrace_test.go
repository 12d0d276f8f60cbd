package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fadcedab/adk/observability"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// travelEval runs the travel example locally through the built binary
// with env and returns the result.
func travelEval(t *testing.T, env []string, extra ...string) (execResult, map[string]any) {
	t.Helper()
	root := repoRoot(t)
	args := append([]string{"eval", "run", "--config", filepath.Join(root, "examples/travel/AGENT.json"),
		"--eval-set", filepath.Join(root, "examples/travel/evalset.json"), "--criteria", filepath.Join(root, "examples/travel/criteria.json"),
		"--samples", "2", "--concurrency", "4"}, extra...)
	r := runADK(t, t.TempDir(), env, args...)
	var doc map[string]any
	if r.code == exitOK || r.code == exitFailed {
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("result: %v\n%s", err, r.stderr)
		}
	}
	return r, doc
}

// sampleTraces returns each sample's turn trace ids from a result.
func sampleTraces(t *testing.T, doc map[string]any) (samples int, traceIDs map[string]bool) {
	t.Helper()
	traceIDs = map[string]bool{}
	for _, c := range doc["cases"].([]any) {
		for _, s := range c.(map[string]any)["samples"].([]any) {
			samples++
			for _, turn := range s.(map[string]any)["turns"].([]any) {
				tid, _ := turn.(map[string]any)["trace_id"].(string)
				rid, _ := turn.(map[string]any)["run_id"].(string)
				if tid == "" || !strings.HasPrefix(rid, "run-"+tid) {
					t.Fatalf("turn without trace_id/run_id: %v", turn)
				}
				traceIDs[tid] = true
			}
		}
	}
	return samples, traceIDs
}

func TestEvalRun_ExportsOneTracePerSampleToOTLP(t *testing.T) {
	t.Parallel()
	sink := newOTLPSink(t)
	r, doc := travelEval(t, []string{"ADK_OTLP_ENDPOINT=" + sink.srv.URL, "OTEL_SERVICE_NAME=travel-evals", "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=ci,team=travel",
		"OTEL_EXPORTER_OTLP_HEADERS=x-api-key=sekrit-Qv8"})
	if r.code != exitOK && r.code != exitFailed {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "dropped") {
		t.Fatalf("drops with a healthy backend: %s", r.stderr)
	}
	samples, traces := sampleTraces(t, doc)
	if len(traces) != samples {
		t.Fatalf("%d samples but %d distinct trace ids in the result", samples, len(traces))
	}
	spans, res, logs := sink.snapshot()
	byTrace := map[string]map[string]bool{}
	for _, sp := range spans {
		tid := sp.TraceID().String()
		if byTrace[tid] == nil {
			byTrace[tid] = map[string]bool{}
		}
		byTrace[tid][sp.SpanID().String()] = true
	}
	if len(byTrace) != samples {
		t.Fatalf("backend got %d traces for %d samples", len(byTrace), samples)
	}
	names := map[string]int{}
	for i, sp := range spans {
		tid := sp.TraceID().String()
		if !traces[tid] {
			t.Fatalf("span of trace %s not in the result", tid)
		}
		names[sp.Name()]++
		if sp.ParentSpanID().IsEmpty() {
			if sp.Name() != "gen_ai.evaluate" {
				t.Errorf("root span %s, want gen_ai.evaluate", sp.Name())
			}
		} else if !byTrace[tid][sp.ParentSpanID().String()] {
			t.Errorf("span %s has a parent outside its trace", sp.Name())
		}
		sp.Attributes().Range(func(k string, v pcommon.Value) bool {
			if observability.IsForbiddenAttributeKey(k) {
				t.Errorf("content attribute %s on %s", k, sp.Name())
			}
			return true
		})
		if c, ok := sp.Attributes().Get(observability.AttrEvalCaseID); !ok || c.Str() == "" {
			t.Errorf("span %s lacks %s", sp.Name(), observability.AttrEvalCaseID)
		}
		if res[i]["service.name"] != "travel-evals" || res[i]["deployment.environment"] != "ci" {
			t.Errorf("resource %v", res[i])
		}
	}
	for _, n := range []string{"gen_ai.evaluate", "gen_ai.invoke_agent", "gen_ai.generate_content", "gen_ai.execute_tool"} {
		if names[n] == 0 {
			t.Errorf("no %s span (got %v)", n, names)
		}
	}
	if names["gen_ai.evaluate"] != samples {
		t.Errorf("%d sample spans for %d samples", names["gen_ai.evaluate"], samples)
	}
	scores := 0
	for _, l := range logs {
		if l.EventName() == observability.EventEvaluationResult {
			scores++
			if _, ok := l.Attributes().Get(observability.AttrEvaluationScoreValue); !ok || !traces[l.TraceID().String()] {
				t.Errorf("evaluation result without score or trace")
			}
		}
	}
	if scores == 0 {
		t.Error("no gen_ai.evaluation.result events")
	}
	for _, h := range sink.headers {
		if h.Get("X-Api-Key") != "sekrit-Qv8" {
			t.Fatal("OTEL_EXPORTER_OTLP_HEADERS not sent")
		}
	}
}

func TestEvalRun_CollectorDownOrRefusingKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	base, _ := travelEval(t, nil)
	sink := newOTLPSink(t)
	sink.mu.Lock()
	sink.status = 503 // under the lock: the handler reads it, and the race detector cannot see the binary's request order
	sink.mu.Unlock()
	for name, env := range map[string][]string{
		"down":    {"ADK_OTLP_ENDPOINT=http://127.0.0.1:1"},
		"refuses": {"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.srv.URL},
	} {
		t.Run(name, func(t *testing.T) {
			r, _ := travelEval(t, env, "--trace-drain", "300ms")
			if r.code != base.code {
				t.Fatalf("exit %d, untraced run %d: %s", r.code, base.code, r.stderr)
			}
			if strings.Count(r.stderr, "adk: traces:") != 1 || !strings.Contains(r.stderr, "signals dropped") {
				t.Fatalf("stderr: %q", r.stderr)
			}
		})
	}
}

func TestEvalRun_MalformedOTELVariablesFailNamingThem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ env, name string }{
		{"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer sekrit-Zx1,", "OTEL_EXPORTER_OTLP_HEADERS"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=ftp://sekrit-Zx1", "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://h:1/v1/traces?k=sekrit-Zx1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"OTEL_RESOURCE_ATTRIBUTES=prompt=sekrit-Zx1", "OTEL_RESOURCE_ATTRIBUTES"},
		{"ADK_OTLP_ENDPOINT=http://sekrit-Zx1:1/path", "ADK_OTLP_ENDPOINT"},
	} {
		env := []string{tc.env}
		if !strings.HasPrefix(tc.env, "ADK_") && !strings.Contains(tc.env, "ENDPOINT") {
			env = append(env, "ADK_OTLP_ENDPOINT=http://127.0.0.1:1")
		}
		r, _ := travelEval(t, env)
		if r.code != exitError || !strings.Contains(r.stderr, tc.name) || strings.Contains(r.stderr, "sekrit") {
			t.Errorf("%s: exit %d, stderr %q", tc.name, r.code, r.stderr)
		}
	}
}
