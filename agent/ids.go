package agent

import (
	"math/rand/v2"
	"strconv"
	"sync"
)

// IDGenerator mints the ids of runs, invocations, events, workflows and
// tool calls that a provider left without one. kind is a short prefix
// ("run", "inv", "evt", "wf", "call").
type IDGenerator interface {
	NewID(kind string) string
}

// RandomIDs returns the default generator: kind-<16 hex digits>. The ids
// are unique, not secret.
func RandomIDs() IDGenerator { return randomIDs{} }

type randomIDs struct{}

func (randomIDs) NewID(kind string) string {
	var b [32]byte
	out := append(b[:0], kind...)
	out = append(out, '-')
	u := rand.Uint64()
	const hex = "0123456789abcdef"
	for i := 60; i >= 0; i -= 4 {
		out = append(out, hex[(u>>uint(i))&0xf])
	}
	return string(out)
}

// SequentialIDs returns a deterministic generator for tests and
// reproducible runs: kind-1, kind-2, ... counted per kind.
func SequentialIDs() IDGenerator { return &sequentialIDs{} }

// sequentialIDs counts per kind in a short list under a mutex: a run
// mints a handful of kinds, and the eval engine makes one generator per
// sample, so a sync.Map's per-kind nodes were ~20 of a sample's
// allocations. Room for five kinds inline (a run mints inv, run, evt,
// call and wf ids) keeps it in the 160-byte size class (eight: 224).
type sequentialIDs struct {
	mu     sync.Mutex
	inline [5]kindCount
	kinds  []kindCount // inline[:n] until a sixth kind
}

type kindCount struct {
	kind string
	n    uint64
}

func (s *sequentialIDs) NewID(kind string) string {
	s.mu.Lock()
	if s.kinds == nil {
		s.kinds = s.inline[:0]
	}
	var n uint64
	for i := range s.kinds {
		if s.kinds[i].kind == kind {
			s.kinds[i].n++
			n = s.kinds[i].n
			break
		}
	}
	if n == 0 {
		n = 1
		s.kinds = append(s.kinds, kindCount{kind: kind, n: n})
	}
	s.mu.Unlock()
	var b [32]byte
	out := append(b[:0], kind...)
	out = append(out, '-')
	return string(strconv.AppendUint(out, n, 10))
}
