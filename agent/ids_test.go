package agent

import (
	"fmt"
	"sync"
	"testing"
)

func TestSequentialIDs_CountPerKind(t *testing.T) {
	g := SequentialIDs()
	var got []string
	for _, k := range []string{"run", "evt", "evt", "run", "call", "evt"} {
		got = append(got, g.NewID(k))
	}
	want := []string{"run-1", "evt-1", "evt-2", "run-2", "call-1", "evt-3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	// More kinds than the inline list holds keep counting.
	for i := range 12 {
		if id, want := g.NewID(fmt.Sprintf("k%d", i)), fmt.Sprintf("k%d-1", i); id != want {
			t.Fatalf("id %s, want %s", id, want)
		}
	}
	if id := g.NewID("k11"); id != "k11-2" {
		t.Fatalf("id %s, want k11-2", id)
	}
}

// Parallel agents mint ids at once: each is unique (run under -race).
func TestSequentialIDs_Concurrent(t *testing.T) {
	g := SequentialIDs()
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				id := g.NewID("evt")
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate id %s", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 800 {
		t.Fatalf("%d ids, want 800", len(seen))
	}
}

// The eval engine makes a generator per sample: a fresh one minting a
// run's usual kinds allocates the generator and the id strings, nothing
// per kind (a sync.Map made ~20 allocations here).
func TestSequentialIDs_FreshGeneratorAllocations(t *testing.T) {
	kinds := []string{"run", "inv", "evt", "wf", "call"}
	allocs := testing.AllocsPerRun(100, func() {
		g := SequentialIDs()
		for _, k := range kinds {
			_ = g.NewID(k)
			_ = g.NewID(k)
		}
	})
	if allocs > 11 {
		t.Fatalf("%.0f allocations for a generator and 10 ids, want at most 11", allocs)
	}
}
