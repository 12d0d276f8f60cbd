package client

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestSeenIndex_AnotherClusterStartsOver: the index a client sends
// follows the replies it gets. A reply of another cluster than the one
// it tracks, the first identity included, starts it over from that
// reply's index (a node naming an identity has applied every index
// before it was drawn); a reply without one (an earlier build's node)
// only raises the index, as does one over the identity's bound; a reply
// without an index (an error) moves nothing. A reply of a cluster the
// client left is refused and changes nothing, until readmitted. Before,
// the client flipped between two clusters whose answers interleaved,
// taking the old cluster's state for the new one's, and the first
// identity kept an index of the log before it, so a cluster both
// upgraded and wiped under the client was waited for in vain.
func TestSeenIndex_AnotherClusterStartsOver(t *testing.T) {
	type reply struct {
		cluster string
		index   uint64
		refused bool // saw reports false
	}
	for _, c := range []struct {
		name        string
		replies     []reply
		wantCluster string
		wantIndex   uint64
	}{
		{"no identity: the highest index", []reply{{"", 7, false}, {"", 3, false}}, "", 7},
		{"one cluster: the highest index", []reply{{"a", 7, false}, {"a", 3, false}, {"", 5, false}}, "a", 7},
		{"the first identity starts over", []reply{{"", 900, false}, {"a", 5, false}}, "a", 5},
		{"another cluster starts over", []reply{{"a", 900, false}, {"b", 5, false}}, "b", 5},
		{"then raises from there", []reply{{"a", 900, false}, {"b", 5, false}, {"b", 9, false}, {"", 8, false}}, "b", 9},
		{"an earlier build's node does not start over", []reply{{"a", 900, false}, {"", 5, false}}, "a", 900},
		{"an identity over its bound is none", []reply{{"a", 900, false}, {strings.Repeat("b", 65), 5, false}}, "a", 900},
		{"an answer without an index moves nothing", []reply{{"a", 900, false}, {"b", 0, false}}, "a", 900},
		{"the cluster left is refused", []reply{{"a", 900, false}, {"b", 5, false}, {"a", 901, true}, {"b", 6, false}, {"a", 902, true}}, "b", 6},
		{"and another after it starts over", []reply{{"a", 900, false}, {"b", 5, false}, {"c", 3, false}, {"b", 7, true}, {"a", 9, true}}, "c", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s seenIndex
			for i, r := range c.replies {
				if took := s.saw(r.cluster, r.index); took == r.refused {
					t.Fatalf("reply %d (%q, %d): taken %v", i, r.cluster, r.index, took)
				}
			}
			if cl, idx := s.get(); cl != c.wantCluster || idx != c.wantIndex {
				t.Fatalf("(%q, %d), want (%q, %d)", cl, idx, c.wantCluster, c.wantIndex)
			}
		})
	}
	t.Run("readmitted, the cluster left is taken again", func(t *testing.T) {
		var s seenIndex
		s.saw("a", 900)
		s.saw("b", 5)
		s.readmit("a")
		if !s.saw("a", 901) {
			t.Fatal("refused after readmit")
		}
		if cl, idx := s.get(); cl != "a" || idx != 901 {
			t.Fatalf("(%q, %d), want (a, 901)", cl, idx)
		}
		if s.saw("b", 6) {
			t.Fatal("b, now left, taken")
		}
	})
	t.Run("replies taken at once keep the highest index", func(t *testing.T) {
		var s seenIndex
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 500 {
					s.saw("a", uint64(4*i+g+1))
					s.get()
				}
			})
		}
		wg.Wait()
		if cl, idx := s.get(); cl != "a" || idx != 2000 {
			t.Fatalf("(%q, %d), want (a, 2000)", cl, idx)
		}
	})
	t.Run("at most maxLeftClusters are remembered", func(t *testing.T) {
		var s seenIndex
		for i := range maxLeftClusters + 2 {
			s.saw(fmt.Sprintf("c%d", i), uint64(i+1))
		}
		if len(s.left) != maxLeftClusters || s.left[0] != "c1" {
			t.Fatalf("left %v", s.left)
		}
	})
}
