package tracenode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Wire kinds of the status endpoint.
const (
	StatusRequestKind = "trace_status"
	StatusReplyKind   = "trace_status_reply"
	// MaxStatusNodes bounds the replies GatherStatus collects.
	MaxStatusNodes = 64
	maxStatusReply = 16 << 10
)

// StatusReply is one store node's own counters, answered on
// adk.trace.v1.status by every node. It carries aggregates only: no
// principal, stream or event. Lag is the node's durable consumer's
// pending plus unacked messages (LagError when JetStream did not say).
type StatusReply struct {
	Node     string      `msgpack:"node" json:"node"`
	Lag      uint64      `msgpack:"lag" json:"lag"`
	LagError string      `msgpack:"lag_error,omitempty" json:"lag_error,omitempty"`
	Store    StoreStatus `msgpack:"store" json:"store"`
	Stats    Stats       `msgpack:"stats" json:"node_counters"`
}

// StoreStatus is the node's trace store: its size and its drop and
// eviction counters (tracestore.Counters, with the node-local lifecycle
// counters that the store itself keeps out of its replicated state).
type StoreStatus struct {
	Events          int    `msgpack:"events" json:"events"`
	EncodedBytes    int64  `msgpack:"encoded_bytes" json:"encoded_bytes"`
	AppliedSequence uint64 `msgpack:"applied_sequence" json:"applied_sequence"`
	EvictedThrough  uint64 `msgpack:"evicted_through" json:"evicted_through"`
	Failed          bool   `msgpack:"failed,omitempty" json:"failed,omitempty"`

	Accepted                 uint64 `msgpack:"accepted" json:"accepted"`
	Rejected                 uint64 `msgpack:"rejected" json:"rejected"`
	ContentRejected          uint64 `msgpack:"content_rejected" json:"content_rejected"`
	OversizedRejected        uint64 `msgpack:"oversized_rejected" json:"oversized_rejected"`
	CapacityEvictions        uint64 `msgpack:"capacity_evictions" json:"capacity_evictions"`
	RetentionEvictions       uint64 `msgpack:"retention_evictions" json:"retention_evictions"`
	TombstonesPruned         uint64 `msgpack:"tombstones_pruned" json:"tombstones_pruned"`
	LifecycleDeliveryDropped uint64 `msgpack:"lifecycle_delivery_dropped" json:"lifecycle_delivery_dropped"`
}

// StatusLagTimeout bounds the consumer-info call behind Lag in a status
// answer: a slow JetStream must not hold the cluster view. It is below
// the 750 ms the cluster view gathers for (devapi.StoreStatusWait), so a
// node whose JetStream is slow still answers in time, with LagError. At
// 1 s it answered after the view had stopped listening, and every later
// request queued behind the slow one on the node's status handler.
const StatusLagTimeout = 400 * time.Millisecond

// Status returns the node's own counters (what adk.trace.v1.status
// answers).
func (n *Node) Status(ctx context.Context) StatusReply {
	st := n.cfg.Store.Status()
	r := StatusReply{Node: n.cfg.Name, Stats: n.Stats(), Store: StoreStatus{
		Events: st.Events, EncodedBytes: st.EncodedBytes, AppliedSequence: st.AppliedSequence, EvictedThrough: st.EvictedThrough,
		Failed: st.Failed, Accepted: st.Counters.Accepted, Rejected: st.Counters.Rejected, ContentRejected: st.Counters.ContentRejected,
		OversizedRejected: st.Counters.OversizedRejected, CapacityEvictions: st.Counters.CapacityEvictions,
		RetentionEvictions: st.Counters.RetentionEvictions, TombstonesPruned: st.Counters.TombstonesPruned,
		LifecycleDeliveryDropped: st.Counters.LifecycleDeliveryDropped,
	}}
	ctx, cancel := context.WithTimeout(ctx, StatusLagTimeout)
	defer cancel()
	lag, err := n.Lag(ctx)
	if err != nil {
		r.LagError = "consumer info unavailable"
	}
	r.Lag = lag
	return r
}

func (n *Node) handleStatus(r micro.Request) {
	data, err := wire.Encode(StatusReplyKind, n.Status(context.Background()))
	if err != nil {
		_ = r.Error("500", "encode status", nil)
		return
	}
	_ = r.Respond(data)
}

// GatherStatus asks every store node for its counters on one NATS
// request and collects the replies: until expect nodes answered (expect
// > 0: the caller knows the nodes, e.g. from the stream's consumers), or
// until wait passed since the request, or ctx ends. At most
// MaxStatusNodes replies; one per node name; sorted by node name. No
// reply at all is an error.
func GatherStatus(ctx context.Context, nc *nats.Conn, expect int, wait time.Duration) ([]StatusReply, error) {
	req, err := wire.Encode(StatusRequestKind, struct{}{})
	if err != nil {
		return nil, err
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("tracenode: status: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(bus.TraceStatusSubject, inbox, req); err != nil {
		return nil, fmt.Errorf("tracenode: status: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	seen := map[string]bool{}
	var out []StatusReply
	for len(out) < MaxStatusNodes && (expect <= 0 || len(out) < expect) {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // deadline: whoever answered is the view
		}
		var r StatusReply
		if wire.Decode(msg.Data, wire.DecodeLimits{MaxBytes: maxStatusReply}, StatusReplyKind, &r) != nil || seen[r.Node] {
			continue
		}
		seen[r.Node] = true
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("tracenode: no store node answered on " + bus.TraceStatusSubject)
	}
	slices.SortFunc(out, func(a, b StatusReply) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}
