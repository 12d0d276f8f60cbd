package coordinator

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Ready reports whether the node can answer reads that reflect the
// cluster: Raft knows a leader, and this node has applied every entry it
// knows to be committed. The error says which half is missing; a
// follower that lags its leader is not ready until it caught up.
func (n *Node) Ready() error {
	if n.Leader() == "" {
		return fmt.Errorf("coordinator %s: raft has no leader", n.cfg.ID)
	}
	if n.raft.State() != raft.Leader {
		// A follower cut off from its leader knows no newer commit index:
		// without recent contact its applied index proves nothing.
		if since := time.Since(n.raft.LastContact()); since > 2*n.cfg.Timing.RaftHeartbeat {
			return fmt.Errorf("coordinator %s: no contact with the leader for %s", n.cfg.ID, since.Round(time.Millisecond))
		}
	}
	commit, applied := n.raft.CommitIndex(), n.raft.AppliedIndex()
	if applied < commit {
		return fmt.Errorf("coordinator %s: applied index %d behind commit index %d", n.cfg.ID, applied, commit)
	}
	return nil
}

// RaftIndexes returns the node's Raft commit and applied indexes (for
// metrics and /readyz).
func (n *Node) RaftIndexes() (commit, applied uint64) {
	return n.raft.CommitIndex(), n.raft.AppliedIndex()
}
