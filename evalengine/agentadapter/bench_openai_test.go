package agentadapter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fadcedab/adk/agent"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/observability"
)

// BenchmarkRunOpenAISamples is the engine's per-sample cost as `adk eval
// run` pays it against an OpenAI-compatible provider (issue 19's pool
// goal: CPU per sample): 1,000 single-turn samples through the openai
// provider, at concurrency 64, against a fake on 127.0.0.1 that answers at
// once. The fake's own work is in the process too, so read allocs/sample
// and B/sample as the engine's and ns/sample as an upper bound.
func BenchmarkRunOpenAISamples(b *testing.B) {
	benchRunOpenAISamples(b, false)
}

// BenchmarkRunOpenAISamplesAsCLI is BenchmarkRunOpenAISamples as a local
// `adk eval run` configures the engine: traced by a tracer that exports
// nothing (ADK_TRACING's default without an exporter), with the agent's
// events captured (--capture-events' default).
func BenchmarkRunOpenAISamplesAsCLI(b *testing.B) {
	benchRunOpenAISamples(b, true)
}

func benchRunOpenAISamples(b *testing.B, asCLI bool) {
	body := `{"id":"chatcmpl-fake","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	cfg, err := agent.ParseConfig([]byte(`{"schema_version":1,"name":"bench","instruction":"Answer briefly.",
 "model":{"provider":"openai","model":"fake","base_url":"` + srv.URL + `/v1","max_attempts":1,"timeout_ms":30000}}`))
	if err != nil {
		b.Fatal(err)
	}
	opts := evalengine.DefaultOptions()
	opts.Samples, opts.Concurrency, opts.TimeoutMS = 100, 64, 600_000
	var ao Options
	var obs observability.Observer
	if asCLI {
		tracer, err := observability.New(observability.Config{})
		if err != nil {
			b.Fatal(err)
		}
		obs = tracer
		ao = Options{CaptureEvents: opts.CaptureEvents, Build: agent.BuildOptions{Observer: obs}}
	}
	a, err := New(cfg, ao)
	if err != nil {
		b.Fatal(err)
	}
	var cases []string
	for i := range 10 {
		cases = append(cases, fmt.Sprintf(`{"id":"case-%03d","input":"hello","expected":"ok"}`, i))
	}
	set, err := evalengine.ParseSet([]byte(`{"id":"bench","version":"1","cases":[` + strings.Join(cases, ",") + `]}`))
	if err != nil {
		b.Fatal(err)
	}
	rc := evalengine.RunConfig{Adapter: a, Metrics: evalengine.DefaultCriteria(), Options: opts, Observer: obs}
	const samples = 1000
	b.ReportAllocs()
	for b.Loop() {
		r, err := evalengine.Run(context.Background(), set, rc)
		if err != nil {
			b.Fatal(err)
		}
		if !r.Passed {
			b.Fatalf("pass rate %v", r.PassRate)
		}
		if _, err := evalengine.Render(r, evalengine.FormatJSON, evalengine.ExportOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
}
