package agent

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
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

type sequentialIDs struct {
	counters sync.Map // kind -> *atomic.Uint64
}

func (s *sequentialIDs) NewID(kind string) string {
	c, ok := s.counters.Load(kind)
	if !ok {
		c, _ = s.counters.LoadOrStore(kind, new(atomic.Uint64))
	}
	return kind + "-" + strconv.FormatUint(c.(*atomic.Uint64).Add(1), 10)
}
