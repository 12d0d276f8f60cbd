package client

import (
	"strings"
	"testing"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestSeenIndex_AnotherClusterStartsOver: the index a client sends
// follows the replies it gets. A reply of another cluster than the one
// it tracks starts it over from that reply's index; the first identity
// it sees keeps the indexes seen before (they may be that cluster's: a
// cluster upgraded from builds without identities); a reply without one
// (an earlier build's node) only raises the index, as does one over the
// identity's bound.
func TestSeenIndex_AnotherClusterStartsOver(t *testing.T) {
	type reply struct {
		cluster string
		index   uint64
	}
	for _, c := range []struct {
		name        string
		replies     []reply
		wantCluster string
		wantIndex   uint64
	}{
		{"no identity: the highest index", []reply{{"", 7}, {"", 3}}, "", 7},
		{"one cluster: the highest index", []reply{{"a", 7}, {"a", 3}, {"", 5}}, "a", 7},
		{"the first identity keeps what came before", []reply{{"", 900}, {"a", 5}}, "a", 900},
		{"another cluster starts over", []reply{{"a", 900}, {"b", 5}}, "b", 5},
		{"then raises from there", []reply{{"a", 900}, {"b", 5}, {"b", 9}, {"", 8}}, "b", 9},
		{"an earlier build's node does not start over", []reply{{"a", 900}, {"", 5}}, "a", 900},
		{"an identity over its bound is none", []reply{{"a", 900}, {strings.Repeat("b", 65), 5}}, "a", 900},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s seenIndex
			for _, r := range c.replies {
				s.saw(r.cluster, r.index)
			}
			if cl, idx := s.get(); cl != c.wantCluster || idx != c.wantIndex {
				t.Fatalf("(%q, %d), want (%q, %d)", cl, idx, c.wantCluster, c.wantIndex)
			}
		})
	}
}
