package agent

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/model/scripted"
	"github.com/fadcedab/adk/agent/session"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/plugins"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// script builds a scripted provider from JSON.
func script(t testing.TB, js string) *scripted.Provider {
	t.Helper()
	p, err := scripted.Parse([]byte(js))
	if err != nil {
		t.Fatalf("scripted: %v", err)
	}
	return p
}

// recordingProvider wraps a provider and records the requests it receives.
type recordingProvider struct {
	model.Provider
	mu   sync.Mutex
	reqs []*model.Request
}

func (p *recordingProvider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	return p.Provider.Generate(ctx, req)
}

func (p *recordingProvider) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

func newRunner(t testing.TB, root Agent, opts RunnerOptions) *Runner {
	t.Helper()
	if opts.IDs == nil {
		opts.IDs = SequentialIDs()
	}
	r, err := NewRunner(root, opts)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	return r
}

func userMsg(text string) model.Message {
	return model.Message{Role: model.RoleUser, Parts: []model.Part{{Text: text}}}
}

func turn(t testing.TB, r *Runner, text string) (*TurnResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.RunTurn(ctx, RunRequest{SessionID: "s1", UserID: "u1", Message: userMsg(text)})
}

func mustTurn(t testing.TB, r *Runner, text string) *TurnResult {
	t.Helper()
	tr, err := turn(t, r, text)
	if err != nil {
		t.Fatalf("turn %q: %v", text, err)
	}
	return tr
}

func pipeline(t testing.TB, descs ...plugins.Descriptor) *plugins.Pipeline {
	t.Helper()
	p, err := plugins.Compile(descs)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// log is a concurrency-safe ordered record of what ran.
type log struct {
	mu    sync.Mutex
	items []string
}

func (l *log) add(s string) {
	l.mu.Lock()
	l.items = append(l.items, s)
	l.mu.Unlock()
}

func (l *log) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.items...)
}

func (l *log) count(s string) int {
	n := 0
	for _, x := range l.all() {
		if x == s {
			n++
		}
	}
	return n
}

// recObserver records observation starts and ends.
type recObserver struct {
	mu     sync.Mutex
	starts []observability.Observation
	ends   []observability.Outcome
	open   map[observability.Kind]int
}

func (o *recObserver) Start(ctx context.Context, obs observability.Observation) (context.Context, func(observability.Outcome)) {
	o.mu.Lock()
	o.starts = append(o.starts, obs)
	if o.open == nil {
		o.open = map[observability.Kind]int{}
	}
	o.open[obs.Kind]++
	o.mu.Unlock()
	var once sync.Once
	return ctx, func(out observability.Outcome) {
		once.Do(func() {
			o.mu.Lock()
			o.ends = append(o.ends, out)
			o.open[obs.Kind]--
			o.mu.Unlock()
		})
	}
}

func (o *recObserver) kinds() map[observability.Kind]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := map[observability.Kind]int{}
	for _, s := range o.starts {
		m[s.Kind]++
	}
	return m
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func texts(evs []*session.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Content != nil {
			out = append(out, e.Author+":"+e.Content.Text())
		}
	}
	return out
}
