package agent

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkRunnerScriptedStep measures the runner's overhead per scripted
// model call: a turn of one tool step and one final step (two model calls,
// one tool call through a Go tool with schema validation, four events), no
// plugins, the Nop observer. Reported as ns per model step.
func BenchmarkRunnerScriptedStep(b *testing.B) {
	prov := script(b, `{"provider":"scripted","usage":{"input_tokens":10,"output_tokens":2},"default":{"steps":[
		{"tool_calls":[{"name":"get_weather","args":{"city":"Pune"}}]},{"text":"done"}]}}`)
	a, err := NewLLMAgent(LLMConfig{Name: "root", Instruction: "be brief", Model: prov, Tools: []Tool{weatherTool(&log{})}})
	if err != nil {
		b.Fatal(err)
	}
	r := newRunner(b, a, RunnerOptions{IDs: RandomIDs()})
	ctx := context.Background()
	msg := userMsg("weather in Pune")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// A fresh session per turn keeps history (and so the cost) constant.
		sid := "s" + strconv.Itoa(i)
		for _, err := range r.Run(ctx, RunRequest{SessionID: sid, UserID: "u", Message: msg}) {
			if err != nil {
				b.Fatal(err)
			}
		}
		r.Sessions().Delete(sid)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/step")
}
