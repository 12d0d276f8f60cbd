package plugins

import (
	"context"
	"fmt"
	"testing"

	"github.com/fadcedab/adk/agent/model"
)

// BenchmarkPipeline measures the pipeline's overhead per hook call (one Run
// of before_model) with 0, 1 and 8 observing plugins: each plugin call pays
// a value copy, a goroutine, a deadline and the trace.
func BenchmarkPipeline(b *testing.B) {
	obs := Hooks{BeforeModel: func(context.Context, CallContext, *model.Request, map[string]any) (Outcome, error) {
		return Observe(), nil
	}}
	req := request("what is the weather in Paris?")
	cc := CallContext{RunID: "r", InvocationID: "i", Agent: "root", Model: "m"}
	for _, n := range []int{0, 1, 8} {
		b.Run(fmt.Sprintf("plugins=%d", n), func(b *testing.B) {
			descs := make([]Descriptor, n)
			for i := range descs {
				descs[i] = Descriptor{ID: fmt.Sprint("p", i), Plugin: obs}
			}
			p, err := Compile(descs)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if r := p.Run(ctx, HookBeforeModel, cc, req); r.Disposition != DispositionContinue {
					b.Fatal(r.Disposition)
				}
			}
		})
	}
	b.Run("plugins=1/amend", func(b *testing.B) {
		p, err := Compile([]Descriptor{{ID: "a", Mode: ModeIntervene, Plugin: Hooks{BeforeModel: func(_ context.Context, _ CallContext, r *model.Request, _ map[string]any) (Outcome, error) {
			return Amend(r), nil
		}}}})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		b.ReportAllocs()
		for b.Loop() {
			p.Run(context.Background(), HookBeforeModel, cc, req)
		}
	})
}
