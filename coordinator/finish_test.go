package coordinator

import (
	"testing"

	"github.com/fadcedab/adk/store/evalstore"
)

// TestFinishChunk_BoundsOutcomesAndBytes: a finish entry carries at most
// MaxTasksPerCommand outcomes and maxFinishSampleBytes of samples (a
// Badger transaction of the eval store holds 2.4 MiB), and a sample
// larger than the bound still goes, alone.
func TestFinishChunk_BoundsOutcomesAndBytes(t *testing.T) {
	outs := func(n, size int) []evalstore.Outcome {
		o := make([]evalstore.Outcome, n)
		for i := range o {
			o[i].Sample = make([]byte, size)
		}
		return o
	}
	for _, c := range []struct {
		n, size, max, want int
	}{
		{n: 1000, size: 100, max: 512, want: 512},    // the count bound
		{n: 512, size: 5 << 10, max: 512, want: 204}, // 204 × 5 KiB ≤ 1 MiB < 205 × 5 KiB
		{n: 3, size: 2 << 20, max: 512, want: 1},     // an oversized sample goes alone
		{n: 10, size: 0, max: 512, want: 10},         // lost tasks carry no sample
		{n: 0, size: 0, max: 512, want: 0},
	} {
		if got := finishChunk(outs(c.n, c.size), c.max); got != c.want {
			t.Errorf("%d outcomes of %d B (max %d): %d, want %d", c.n, c.size, c.max, got, c.want)
		}
	}
}
