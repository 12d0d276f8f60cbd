package agentadapter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent"
	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/plugins"
)

// scopeServer is an OpenAI-compatible fake: a request whose text holds
// "slow" gets no answer until the client closes its connection; any other
// gets "ok".
func scopeServer(t *testing.T) string {
	t.Helper()
	const body = `{"id":"chatcmpl-fake","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), "slow") {
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// scopeAdapter is an openai agent against baseURL (the lean call path) with
// a plugin that halts any model call whose input holds "halt".
func scopeAdapter(t *testing.T, baseURL string) *Adapter {
	t.Helper()
	cfg := mustConfig(t, `{"schema_version":1,"name":"scoped","instruction":"Answer briefly.",
 "model":{"provider":"openai","model":"fake","base_url":"`+baseURL+`/v1","max_attempts":1,"timeout_ms":30000}}`)
	guard := plugins.Descriptor{ID: "guard", Mode: plugins.ModeIntervene, Plugin: plugins.Hooks{
		BeforeModel: func(_ context.Context, _ plugins.CallContext, r *model.Request, _ map[string]any) (plugins.Outcome, error) {
			if strings.Contains(r.Messages[len(r.Messages)-1].Text(), "halt") {
				return plugins.Halt("not allowed"), nil
			}
			return plugins.Observe(), nil
		},
	}}
	a, err := New(cfg, Options{CaptureEvents: true, Build: agent.BuildOptions{Plugins: []plugins.Descriptor{guard}}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// masked is a sample as JSON without what differs between any two runs:
// durations, latencies and trace ids.
func masked(t *testing.T, s evalengine.SampleResult) any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(v any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "duration_ms" || k == "latency_ms" || k == "trace_id" || strings.HasSuffix(k, "latency_ms") {
					delete(x, k)
					continue
				}
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	return v
}

// TestRun_OneScopePerSample runs samples that pass, time out in the model
// call and are halted by a plugin, on one worker (concurrency 1: each
// sample reuses the worker's scope), and checks each against the same
// sample run alone (SampleRunner.Run, which lends no scope and nests the
// Runner's and the call's own) and in a run slot (RunInSlot, the fleet
// worker's path, one slot for all): same tags, same results.
func TestRun_OneScopePerSample(t *testing.T) {
	a := scopeAdapter(t, scopeServer(t))
	set := mustSet(t, `{"id":"scope","version":"1","cases":[
 {"id":"first","input":"hello","expected":"ok"},
 {"id":"slow","input":"be slow","expected":"ok"},
 {"id":"halted","input":"halt now","expected":"ok"},
 {"id":"last","input":"hello again","expected":"ok"}]}`)
	o := evalengine.DefaultOptions()
	o.Samples, o.Concurrency, o.CaseTimeoutMS = 2, 1, 300
	metrics := evalengine.DefaultCriteria()
	start := time.Now()
	r, err := evalengine.Run(context.Background(), set, evalengine.RunConfig{Adapter: a, Metrics: metrics, Options: o})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the run took %v: a slow sample was not stopped at its deadline", d)
	}
	want := map[string]string{"first": "", "slow": evalengine.TagTimeout, "halted": "plugin_halted", "last": ""}
	single, err := evalengine.NewSampleRunner(set, metrics, o)
	if err != nil {
		t.Fatal(err)
	}
	slot := evalengine.NewSampleSlot(context.Background())
	defer slot.Close()
	for ci, c := range r.Cases {
		for si, s := range c.Samples {
			if s.Error != want[c.CaseID] || (s.Error == "") != s.Passed {
				t.Fatalf("case %s sample %d: error %q passed %v; want error %q", c.CaseID, si, s.Error, s.Passed, want[c.CaseID])
			}
			alone, err := single.Run(context.Background(), a, ci, si)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := masked(t, s), masked(t, alone); !reflect.DeepEqual(got, want) {
				t.Fatalf("case %s sample %d differs from the sample run alone:\n%v\n%v", c.CaseID, si, got, want)
			}
			inSlot, err := single.RunInSlot(slot.Context(), slot, time.Time{}, a, nil, ci, si)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := masked(t, inSlot), masked(t, alone); !reflect.DeepEqual(got, want) {
				t.Fatalf("case %s sample %d in a slot differs from the sample run alone:\n%v\n%v", c.CaseID, si, got, want)
			}
		}
	}
}

// TestRun_CancelEndsAScopedCallPromptly cancels a run while its samples'
// model calls wait on the server.
func TestRun_CancelEndsAScopedCallPromptly(t *testing.T) {
	a := scopeAdapter(t, scopeServer(t))
	set := mustSet(t, `{"id":"scope","version":"1","cases":[{"id":"slow","input":"be slow","expected":"ok"}]}`)
	o := evalengine.DefaultOptions()
	o.Samples, o.Concurrency = 4, 4
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := evalengine.Run(ctx, set, evalengine.RunConfig{Adapter: a, Metrics: evalengine.DefaultCriteria(), Options: o})
	if evalengine.ErrorCode(err) != evalengine.CodeEvaluationCancelled {
		t.Fatalf("err %v: want evaluation_cancelled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancel honoured after %v", d)
	}
}
