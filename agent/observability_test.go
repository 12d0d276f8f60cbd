package agent

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/plugins"
	"github.com/fadcedab/adk/plugins/builtin"
)

// signalLog is an in-memory sync exporter: the system's own Tracer, with
// the outside world (an exporter backend) replaced by a slice.
type signalLog struct {
	mu   sync.Mutex
	sigs []observability.Signal
}

func (l *signalLog) Export(_ context.Context, s observability.Signal) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sigs = append(l.sigs, s)
	return nil
}

func (l *signalLog) snapshot() []observability.Signal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]observability.Signal(nil), l.sigs...)
}

// TestRunner_ObservabilityCorrelatesARunWithTools runs the bundled travel
// agent through a real Tracer and checks what issue 4 asks of a run: one
// trace, run → agent → model/tool parentage, lifecycle envelopes with the
// plugin trace, and no content anywhere in the signals by default.
func TestRunner_ObservabilityCorrelatesARunWithTools(t *testing.T) {
	log := &signalLog{}
	tr, err := observability.New(observability.Config{
		Exporters: []observability.ExporterDescriptor{{ID: "mem", Exporter: log}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close(context.Background()) })

	cfg, err := LoadConfig("../examples/travel/AGENT.json")
	if err != nil {
		t.Fatal(err)
	}
	logger, err := builtin.New("metadata_logger", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	logger.ID = "meta"
	r, err := cfg.Build(BuildOptions{Observer: tr, IDs: SequentialIDs(), Plugins: []plugins.Descriptor{logger}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	res := mustTurn(t, r, "Find flights from Bangalore to Pune tomorrow")
	if len(res.ToolCalls) != 1 {
		t.Fatalf("tool calls = %d, want 1", len(res.ToolCalls))
	}

	sigs := log.snapshot()
	spans := map[string]*observability.SpanSignal{} // span id -> end signal
	var ends []*observability.SpanSignal
	lifecycles := map[string]int{}
	traceIDs := map[string]bool{}
	for _, s := range sigs {
		switch v := s.(type) {
		case *observability.SpanSignal:
			traceIDs[v.TraceID] = true
			if v.Phase == observability.PhaseEnd {
				spans[v.SpanID] = v
				ends = append(ends, v)
			}
		case *observability.Envelope:
			traceIDs[v.Metadata.TraceID] = true
			if strings.HasPrefix(v.Event, "adk.lifecycle.") {
				lifecycles[v.Event]++
				if _, ok := v.Metadata.Attributes["plugin_trace"]; !ok {
					t.Errorf("%s lacks plugin_trace", v.Event)
				}
			}
		}
	}
	if len(traceIDs) != 1 {
		t.Errorf("signals span %d traces, want 1", len(traceIDs))
	}
	// run, agent, 2 model calls, 1 tool call.
	count := map[string]int{}
	for _, e := range ends {
		count[e.Name]++
		if e.ParentSpanID == "" {
			continue
		}
		if _, ok := spans[e.ParentSpanID]; !ok {
			t.Errorf("%s span's parent %s is not a span of this run", e.Name, e.ParentSpanID)
		}
	}
	if count["gen_ai.generate_content"] != 2 || count["gen_ai.execute_tool"] != 1 || count["gen_ai.invoke_agent"] != 2 {
		t.Errorf("end spans by name = %v, want 2 generate_content, 1 execute_tool, 2 invoke_agent (run+agent)", count)
	}
	for _, e := range ends {
		if e.Name == "gen_ai.generate_content" || e.Name == "gen_ai.execute_tool" {
			parent := spans[e.ParentSpanID]
			if parent == nil || parent.Name != "gen_ai.invoke_agent" || parent.ParentSpanID == "" {
				t.Errorf("%s is not a child of the agent span", e.Name)
			}
		}
	}
	for _, hook := range []string{"before_model", "after_model", "before_tool", "after_tool", "on_event"} {
		if lifecycles["adk.lifecycle."+hook] == 0 {
			t.Errorf("no adk.lifecycle.%s envelope; got %v", hook, lifecycles)
		}
	}
	raw, err := json.Marshal(sigs)
	if err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"Bangalore", "AI-505", "BLR", "travel assistant"} {
		if strings.Contains(string(raw), content) {
			t.Errorf("signals contain content %q", content)
		}
	}
	// The fare is a number: as a whole number, not as digits inside a
	// timestamp or an id, which may contain them by chance.
	if regexp.MustCompile(`(^|[^0-9A-Za-z])4200([^0-9A-Za-z]|$)`).Match(raw) {
		t.Errorf("signals contain content %q", "4200")
	}
}
