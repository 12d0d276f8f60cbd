package tracenode

import (
	"context"
	"fmt"
)

// Lag returns how many stream messages the node's durable consumer has
// not yet delivered or had acked: 0 means the node has applied everything
// the stream held when asked. It asks the JetStream server.
func (n *Node) Lag(ctx context.Context) (uint64, error) {
	info, err := n.cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("tracenode: consumer info: %w", err)
	}
	return info.NumPending + uint64(max(info.NumAckPending, 0)), nil
}

// Ready reports whether the node has caught up with its stream (Lag is
// 0); the error says why not.
func (n *Node) Ready(ctx context.Context) error {
	lag, err := n.Lag(ctx)
	if err != nil {
		return err
	}
	if lag > 0 {
		return fmt.Errorf("store node %s is %d messages behind its stream", n.cfg.Name, lag)
	}
	return nil
}
