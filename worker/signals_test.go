package worker

import (
	"errors"
	"testing"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/bustest"
)

// TestJobSignals_RoutesEachJobToItsOwner: a signal goes to the publisher
// of its job's principal whichever job's signal came before it, a job
// without a valid owner is refused and counted, and a forgotten job is
// refused even right after its signals were routed.
func TestJobSignals_RoutesEachJobToItsOwner(t *testing.T) {
	s := bustest.Start(t, bus.ServerConfig{})
	pool := bus.NewPublisherPool(s.NC, bus.HighRatePublisherConfig(nil), 0)
	defer pool.Close()
	j := &jobSignals{pool: pool}
	j.own("job-a", "alice")
	j.own("job-b", "bob")
	j.own("job-c", "not a token")
	for _, step := range []struct{ job, want string }{
		{"job-a", "alice"}, {"job-a", "alice"}, {"job-b", "bob"}, {"job-a", "alice"}, {"job-b", "bob"}, {"job-c", ""}, {"job-a", "alice"},
	} {
		p, err := j.publisher(step.job)
		switch {
		case step.want == "" && !errors.Is(err, errNoPrincipal):
			t.Fatalf("%s: err %v, want errNoPrincipal", step.job, err)
		case step.want != "" && (err != nil || p.Principal() != step.want):
			t.Fatalf("%s: publisher %v err %v, want %s's", step.job, p, err, step.want)
		}
	}
	j.forget("job-a") // the last job routed
	if _, err := j.publisher("job-a"); !errors.Is(err, errNoPrincipal) {
		t.Fatalf("forgotten job: err %v", err)
	}
	j.forget("job-b") // not the last one
	if _, err := j.publisher("job-b"); !errors.Is(err, errNoPrincipal) {
		t.Fatalf("forgotten job: err %v", err)
	}
	if n := j.noOwner.Load(); n != 3 {
		t.Fatalf("noOwner %d, want 3", n)
	}
}

// BenchmarkJobSignals_Route is the routing of one signal of the job a
// worker runs to its principal's publisher (five per traced task).
func BenchmarkJobSignals_Route(b *testing.B) {
	s := bustest.Start(b, bus.ServerConfig{})
	pool := bus.NewPublisherPool(s.NC, bus.HighRatePublisherConfig(nil), 0)
	defer pool.Close()
	j := &jobSignals{pool: pool}
	id := string([]byte("job-0123456789abcdef")) // not the literal the map holds
	j.own("job-0123456789abcdef", "team")
	j.own("job-other", "team")
	for b.Loop() {
		if _, err := j.publisher(id); err != nil {
			b.Fatal(err)
		}
	}
}
