package agent

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/observability"
)

func lifecycle(evs []*session.Event) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e.Workflow != nil {
			out = append(out, e.Workflow)
		}
	}
	return out
}

func types(ws []map[string]any) []string {
	var out []string
	for _, w := range ws {
		s := w["type"].(string)
		if n, ok := w["node_id"].(string); ok {
			s += ":" + n
		}
		out = append(out, s)
	}
	return out
}

func checkLifecycleV1(t *testing.T, ws []map[string]any, invocation string) {
	t.Helper()
	var last int64
	for _, w := range ws {
		for _, k := range []string{"schema_version", "type", "sequence", "timestamp", "workflow_id", "workflow_kind", "invocation_id"} {
			if _, ok := w[k]; !ok {
				t.Fatalf("lifecycle event %v lacks %s", w, k)
			}
		}
		if w["schema_version"] != 1 || w["invocation_id"] != invocation || w["timestamp"].(int64) < 0 {
			t.Fatalf("bad lifecycle event %v", w)
		}
		if w["workflow_id"] == ws[0]["workflow_id"] {
			seq := w["sequence"].(int64)
			if seq != last+1 {
				t.Fatalf("sequence %d after %d", seq, last)
			}
			last = seq
		}
	}
}

func TestWorkflow_Sequential(t *testing.T) {
	first, _ := NewLLMAgent(LLMConfig{Name: "researcher", Model: script(t, `{"provider":"scripted","default":{"steps":[{"text":"facts"}]}}`)})
	second, _ := NewLLMAgent(LLMConfig{Name: "writer", Model: script(t, `{"provider":"scripted","rules":[{"match":{"contains":"[researcher] said: facts"},"steps":[{"text":"essay from facts"}]}]}`)})
	seq, err := NewSequentialAgent(WorkflowConfig{Name: "pipeline", SubAgents: []Agent{first, second}})
	if err != nil {
		t.Fatal(err)
	}
	obs := &recObserver{}
	r := newRunner(t, seq, RunnerOptions{Observer: obs})
	tr := mustTurn(t, r, "write")
	if tr.FinalText != "essay from facts" {
		t.Fatalf("final %q (%v)", tr.FinalText, texts(tr.Events))
	}
	ws := lifecycle(tr.Events)
	want := []string{"workflow_started", "node_started:researcher", "node_completed:researcher", "node_started:writer", "node_completed:writer", "workflow_completed"}
	if got := types(ws); !reflect.DeepEqual(got, want) {
		t.Fatalf("lifecycle %v", got)
	}
	checkLifecycleV1(t, ws, tr.InvocationID)
	if ws[0]["workflow_kind"] != WorkflowSequential || ws[2]["outcome"] != OutcomeCompleted || ws[2]["node_type"] != "llm" {
		t.Fatalf("fields %v", ws)
	}
	if k := obs.kinds(); k[observability.KindWorkflow] != 1 || k[observability.KindAgent] != 3 || k[observability.KindModel] != 2 {
		t.Fatalf("observations %v", k)
	}
}

func TestWorkflow_Parallel(t *testing.T) {
	branch := func(name, text string) Agent {
		a, _ := NewLLMAgent(LLMConfig{Name: name, Model: script(t, `{"provider":"scripted","default":{"steps":[{"text":"`+text+`"}]}}`)})
		return a
	}
	t.Run("branches run and join", func(t *testing.T) {
		par, _ := NewParallelAgent(WorkflowConfig{Name: "fanout", SubAgents: []Agent{branch("a", "A"), branch("b", "B"), branch("c", "C")}})
		r := newRunner(t, par, RunnerOptions{})
		tr := mustTurn(t, r, "go")
		ws := lifecycle(tr.Events)
		checkLifecycleV1(t, ws, tr.InvocationID)
		got := types(ws)
		if got[0] != "workflow_started" || got[1] != "fork" || got[len(got)-2] != "join" || got[len(got)-1] != "workflow_completed" {
			t.Fatalf("lifecycle %v", got)
		}
		completed := 0
		for _, w := range ws {
			if w["type"] == LifecycleNodeCompleted {
				completed++
			}
		}
		join := ws[len(ws)-2]
		if completed != 3 || join["completed_count"] != 3 || join["branch_count"] != 3 || ws[1]["branch_count"] != 3 {
			t.Fatalf("join %v completed %d", join, completed)
		}
		// Session order equals yield order.
		sess, _ := r.Sessions().Get("s1")
		for i, ev := range tr.Events {
			if sess.Events[i+1].ID != ev.ID {
				t.Fatalf("session order differs at %d", i)
			}
		}
	})

	t.Run("a failing branch fails the workflow", func(t *testing.T) {
		bad, _ := NewLLMAgent(LLMConfig{Name: "bad", Model: script(t, `{"provider":"scripted","rules":[{"match":{"equals":"never"},"steps":[{"text":"x"}]}]}`)})
		par, _ := NewParallelAgent(WorkflowConfig{Name: "fanout", SubAgents: []Agent{branch("a", "A"), bad}})
		var events []*session.Event
		var runErr error
		for ev, err := range newRunner(t, par, RunnerOptions{}).Run(context.Background(), RunRequest{SessionID: "s", UserID: "u", Message: userMsg("go")}) {
			if err != nil {
				runErr = err
				break
			}
			events = append(events, ev)
		}
		if !errors.Is(runErr, ErrModelFailed) {
			t.Fatalf("err %v", runErr)
		}
		ws := lifecycle(events)
		if last := ws[len(ws)-1]; last["type"] != LifecycleWorkflowFailed || last["outcome"] != OutcomeFailed {
			t.Fatalf("last lifecycle %v", last)
		}
	})
}

func TestRunner_ObserverPairsEveryBoundary(t *testing.T) {
	child, _ := NewLLMAgent(LLMConfig{Name: "child", Tools: []Tool{weatherTool(&log{})},
		Model: script(t, `{"provider":"scripted","usage":{"input_tokens":7,"output_tokens":3},"default":{"steps":[{"tool_calls":[{"name":"get_weather","args":{"city":"Pune"}}]},{"text":"ok"}]}}`)})
	seq, _ := NewSequentialAgent(WorkflowConfig{Name: "wf", SubAgents: []Agent{child}})
	obs := &recObserver{}
	mustTurn(t, newRunner(t, seq, RunnerOptions{Observer: obs}), "q")
	k := obs.kinds()
	want := map[observability.Kind]int{observability.KindRun: 1, observability.KindAgent: 2, observability.KindWorkflow: 1, observability.KindModel: 2, observability.KindTool: 1}
	if !reflect.DeepEqual(k, want) {
		t.Fatalf("starts %v", k)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.ends) != len(obs.starts) {
		t.Fatalf("%d starts, %d ends", len(obs.starts), len(obs.ends))
	}
	for kind, n := range obs.open {
		if n != 0 {
			t.Fatalf("%s left open", kind)
		}
	}
	var sawUsage, sawTool bool
	for i, s := range obs.starts {
		if s.InvocationID == "" {
			t.Fatalf("observation %d without invocation id: %+v", i, s)
		}
		if s.Kind == observability.KindTool && s.Tool == "get_weather" && s.CallID != "" && s.WorkflowID != "" && s.NodeID == "child" {
			sawTool = true
		}
	}
	for _, e := range obs.ends {
		if e.Usage != nil && e.Usage.InputTokens == 7 {
			sawUsage = true
		}
	}
	if !sawUsage || !sawTool {
		t.Fatalf("usage %v tool %v: %+v", sawUsage, sawTool, obs.starts)
	}
}

func TestRunner_ObserverSeesErrorType(t *testing.T) {
	a, _ := NewLLMAgent(LLMConfig{Name: "root", Model: script(t, `{"provider":"scripted","default":{"steps":[{"text":"x"}]}}`)})
	obs := &recObserver{}
	r := newRunner(t, a, RunnerOptions{Observer: obs})
	mustTurn(t, r, "one")
	if _, err := turn(t, r, "two"); err != nil { // a new user message restarts the script
		t.Fatal(err)
	}
	exhausted, _ := NewLLMAgent(LLMConfig{Name: "root", MaxSteps: 3, Tools: []Tool{weatherTool(&log{})},
		Model: script(t, `{"provider":"scripted","default":{"steps":[{"tool_calls":[{"name":"get_weather","args":{"city":"x"}}]}]}}`)})
	obs = &recObserver{}
	_, err := turn(t, newRunner(t, exhausted, RunnerOptions{Observer: obs}), "q")
	if ErrorType(err) != "script_exhausted" {
		t.Fatalf("err %v type %s", err, ErrorType(err))
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	last := obs.ends[len(obs.ends)-1] // the run ends last
	if last.Err == nil || last.ErrorType != "script_exhausted" {
		t.Fatalf("run outcome %+v", last)
	}
}

func TestRunner_BreakStopsTheRun(t *testing.T) {
	par, _ := NewParallelAgent(WorkflowConfig{Name: "fanout", SubAgents: func() []Agent {
		var as []Agent
		for _, n := range []string{"a", "b", "c", "d"} {
			a, _ := NewLLMAgent(LLMConfig{Name: n, Tools: []Tool{weatherTool(&log{})}, Model: script(t, `{"provider":"scripted","default":{"steps":[
				{"tool_calls":[{"name":"get_weather","args":{"city":"x"}}]},{"tool_calls":[{"name":"get_weather","args":{"city":"y"}}]},{"text":"t"}]}}`)})
			as = append(as, a)
		}
		return as
	}()})
	r := newRunner(t, par, RunnerOptions{})
	n := 0
	for _, err := range r.Run(context.Background(), RunRequest{SessionID: "s", UserID: "u", Message: userMsg("go")}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 5 {
			break
		}
	}
	// Returning from the loop means every branch goroutine has ended
	// (goleak in TestMain checks it); the session holds what was yielded.
	sess, _ := r.Sessions().Get("s")
	if len(sess.Events) != 6 {
		t.Fatalf("session has %d events after breaking at 5", len(sess.Events))
	}
}
