package devapi

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ClusterView is GET /dev/v1/cluster (and `adk cluster status`).
type ClusterView struct {
	// Coordinator is the answering coordinator's capabilities: leader,
	// Raft members, queue and active counts, workers it heard from. Nil
	// (with CoordinatorError) when no coordinator answered.
	Coordinator      *api.Capabilities `json:"coordinator"`
	CoordinatorError string            `json:"coordinator_error,omitempty"`
	// Signals is the ADK_SIGNALS stream and each store node's lag.
	Signals      *StreamView `json:"signals"`
	SignalsError string      `json:"signals_error,omitempty"`
}

// StreamView is the signal stream's counters and its store consumers.
type StreamView struct {
	Stream   string `json:"stream"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// Deleted counts messages removed from the middle of the stream;
	// Dropped those the stream discarded at its limits (first_seq - 1:
	// evicted from the front).
	Deleted    int              `json:"deleted"`
	Dropped    uint64           `json:"dropped"`
	StoreNodes []StoreNodeView  `json:"store_nodes"`
	Limits     map[string]int64 `json:"limits"`
	// StoreStatusError says why no store node answered with its own
	// counters (none runs a query service, or none answered in time).
	StoreStatusError string `json:"store_status_error,omitempty"`
}

// StoreNodeView is one store node's consumer: how far behind it is.
type StoreNodeView struct {
	Name       string `json:"name"`
	Lag        uint64 `json:"lag"`
	AckPending int    `json:"ack_pending"`
	Delivered  uint64 `json:"delivered_seq"`
	AckFloor   uint64 `json:"ack_floor_seq"`
	// Status is the node's own answer (adk.trace.v1.status): its store's
	// size, drop and eviction counters, its apply counters and the lag it
	// sees. Nil when the node did not answer (stopped, or serving no
	// queries) within StoreStatusWait.
	Status *tracenode.StatusReply `json:"status,omitempty"`
}

// StoreStatusWait bounds how long the cluster view waits for store nodes
// to report their own counters (more than tracenode.StatusLagTimeout, the
// bound of the lag lookup inside each node's answer).
const StoreStatusWait = 750 * time.Millisecond

// Cluster gathers the cluster view: the coordinator's capabilities and the
// signal stream's state. Either half may be missing (its error says why).
// coord or nc may be nil.
func Cluster(ctx context.Context, coord *client.Client, nc *nats.Conn) *ClusterView {
	v := &ClusterView{}
	if coord == nil {
		v.CoordinatorError = "no coordinator client"
	} else if caps, err := coord.Capabilities(ctx); err != nil {
		v.CoordinatorError = api.AsError(err).Code
	} else {
		v.Coordinator = caps
	}
	if nc == nil {
		v.SignalsError = "no NATS connection"
		return v
	}
	sv, err := signalsView(ctx, nc)
	if err != nil {
		v.SignalsError = err.Error()
	}
	v.Signals = sv
	return v
}

func signalsView(ctx context.Context, nc *nats.Conn) (*StreamView, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, bus.SignalStreamName)
	if err != nil {
		return nil, err
	}
	info := st.CachedInfo()
	sv := &StreamView{Stream: bus.SignalStreamName, Messages: info.State.Msgs, Bytes: info.State.Bytes,
		FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, Deleted: info.State.NumDeleted,
		StoreNodes: []StoreNodeView{},
		Limits:     map[string]int64{"max_bytes": info.Config.MaxBytes, "max_msgs": info.Config.MaxMsgs, "max_msg_size": int64(info.Config.MaxMsgSize)}}
	if info.State.FirstSeq > 1 {
		sv.Dropped = info.State.FirstSeq - 1
	}
	names := st.ConsumerNames(ctx)
	for name := range names.Name() {
		node, ok := strings.CutPrefix(name, tracenode.ConsumerName(""))
		if !ok {
			continue
		}
		c, err := st.Consumer(ctx, name)
		if err != nil {
			continue
		}
		ci := c.CachedInfo()
		sv.StoreNodes = append(sv.StoreNodes, StoreNodeView{Name: node, Lag: ci.NumPending, AckPending: ci.NumAckPending,
			Delivered: ci.Delivered.Stream, AckFloor: ci.AckFloor.Stream})
	}
	addNodeStatus(ctx, nc, sv)
	slices.SortFunc(sv.StoreNodes, func(a, b StoreNodeView) int { return strings.Compare(a.Name, b.Name) })
	return sv, names.Err()
}

// addNodeStatus asks every store node for its own counters and attaches
// each answer to its consumer's entry (a node answering without a
// consumer on the stream gets an entry of its own).
func addNodeStatus(ctx context.Context, nc *nats.Conn, sv *StreamView) {
	replies, err := tracenode.GatherStatus(ctx, nc, len(sv.StoreNodes), StoreStatusWait)
	if err != nil {
		sv.StoreStatusError = "no store node reported its counters within " + StoreStatusWait.String()
		return
	}
	for i := range replies {
		r := &replies[i]
		found := false
		for j := range sv.StoreNodes {
			if sv.StoreNodes[j].Name == r.Node {
				sv.StoreNodes[j].Status, found = r, true
			}
		}
		if !found {
			sv.StoreNodes = append(sv.StoreNodes, StoreNodeView{Name: r.Node, Lag: r.Lag, Status: r})
		}
	}
}

func (s *Server) cluster(w http.ResponseWriter, c *call) *Error {
	ctx, cancel := context.WithTimeout(c.r.Context(), 10*time.Second)
	defer cancel()
	return s.writeJSON(w, http.StatusOK, Cluster(ctx, s.o.Coord, s.o.NATS))
}
