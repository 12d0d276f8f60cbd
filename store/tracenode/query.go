package tracenode

import (
	"context"
	"errors"
	"fmt"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Wire kinds of the query service.
const (
	QueryRequestKind = "trace_query"
	QueryReplyKind   = "trace_query_reply"
	// MaxRequestBytes bounds a query request.
	MaxRequestBytes = 16 << 10
	// MaxReplyBytes bounds a reply a client decodes (a page is at most
	// max_query_bytes, 1 MiB by default, plus framing).
	MaxReplyBytes = 17 << 20
)

// Error codes of the service beyond the store's.
const (
	CodeUnauthenticated    = "trace_unauthenticated"
	CodeInvalidQuery       = "invalid_trace_query"
	CodeMinSequenceTimeout = "trace_min_sequence_timeout"
)

// QueryRequest is one adk.trace.v1.query request. The principal is never
// in the request: it is the one Token maps to.
type QueryRequest struct {
	Token       string            `msgpack:"token"`
	Selector    map[string]string `msgpack:"selector,omitempty"`
	AfterCursor *uint64           `msgpack:"after_cursor,omitempty"`
	Limit       int               `msgpack:"limit,omitempty"`
	MaxBytes    int               `msgpack:"max_bytes,omitempty"`
	// MinSequence makes the node wait (bounded) until it has applied this
	// stream sequence: read-your-writes for a publisher that was acked
	// with it.
	MinSequence uint64 `msgpack:"min_sequence,omitempty"`
}

// ReplyError is a coded error in a reply.
type ReplyError struct {
	Code   string          `msgpack:"code"`
	Detail string          `msgpack:"detail,omitempty"`
	Gap    *tracestore.Gap `msgpack:"gap,omitempty"`
}

// QueryReply is the reply: a page or an error, and the sequence the
// answering node had applied.
type QueryReply struct {
	Page            *tracestore.Page `msgpack:"page,omitempty"`
	Error           *ReplyError      `msgpack:"error,omitempty"`
	AppliedSequence uint64           `msgpack:"applied_sequence"`
	Node            string           `msgpack:"node"`
}

func (n *Node) serve() error {
	svc, err := micro.AddService(n.cfg.Conn, micro.Config{
		Name:        "adk-trace",
		Version:     "1.0.0",
		Description: "adk trace query",
		QueueGroup:  "adk-trace",
		Metadata:    map[string]string{"node": n.cfg.Name},
	})
	if err != nil {
		return fmt.Errorf("tracenode: query service: %w", err)
	}
	if err := svc.AddEndpoint("query", micro.HandlerFunc(n.handleQuery), micro.WithEndpointSubject(bus.TraceQuerySubject)); err != nil {
		_ = svc.Stop()
		return fmt.Errorf("tracenode: query endpoint: %w", err)
	}
	// Status goes to every node (no queue group): the cluster view wants
	// each node's own counters, not one node's.
	if err := svc.AddEndpoint("status", micro.HandlerFunc(n.handleStatus), micro.WithEndpointSubject(bus.TraceStatusSubject),
		micro.WithEndpointQueueGroupDisabled()); err != nil {
		_ = svc.Stop()
		return fmt.Errorf("tracenode: status endpoint: %w", err)
	}
	n.svc = svc
	return nil
}

func (n *Node) handleQuery(r micro.Request) {
	n.queries.Add(1)
	reply := n.answer(r.Data())
	data, err := wire.Encode(QueryReplyKind, reply)
	if err != nil {
		_ = r.Error("500", "encode reply", nil)
		return
	}
	_ = r.Respond(data)
}

func (n *Node) answer(data []byte) *QueryReply {
	st := n.cfg.Store
	reply := &QueryReply{Node: n.cfg.Name}
	fail := func(code, detail string) *QueryReply {
		reply.Error = &ReplyError{Code: code, Detail: detail}
		reply.AppliedSequence = st.AppliedSeq()
		return reply
	}
	var req QueryRequest
	if err := wire.Decode(data, wire.DecodeLimits{MaxBytes: MaxRequestBytes}, QueryRequestKind, &req); err != nil {
		n.badRequests.Add(1)
		return fail(CodeInvalidQuery, "malformed request")
	}
	principal, ok := n.cfg.Auth.Principal(req.Token)
	if !ok {
		n.authRejected.Add(1)
		return fail(CodeUnauthenticated, "missing or unknown token")
	}
	if req.MinSequence > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.MaxQueryWait)
		err := st.WaitApplied(ctx, req.MinSequence)
		cancel()
		if err != nil {
			return fail(CodeMinSequenceTimeout, "node has not applied min_sequence yet")
		}
	}
	reply.AppliedSequence = st.AppliedSeq()
	page, err := st.Query(principal, req.Selector, tracestore.QueryOptions{AfterCursor: req.AfterCursor, Limit: req.Limit, MaxBytes: req.MaxBytes})
	if err != nil {
		var e *tracestore.Error
		if errors.As(err, &e) {
			reply.Error = &ReplyError{Code: e.Code, Detail: e.Detail, Gap: e.Fields.Gap}
		} else {
			reply.Error = &ReplyError{Code: tracestore.CodeUnavailable}
		}
		return reply
	}
	reply.Page = page
	return reply
}

// Query sends one request to adk.trace.v1.query (any node answers) and
// returns its page, or a *tracestore.Error carrying the reply's code and
// gap.
func Query(ctx context.Context, nc *nats.Conn, req QueryRequest) (*QueryReply, error) {
	data, err := wire.Encode(QueryRequestKind, req)
	if err != nil {
		return nil, err
	}
	msg, err := nc.RequestWithContext(ctx, bus.TraceQuerySubject, data)
	if err != nil {
		return nil, fmt.Errorf("tracenode: query: %w", err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, fmt.Errorf("tracenode: query: service error %s: %s", code, msg.Header.Get(micro.ErrorHeader))
	}
	var reply QueryReply
	if err := wire.Decode(msg.Data, wire.DecodeLimits{MaxBytes: MaxReplyBytes}, QueryReplyKind, &reply); err != nil {
		return nil, fmt.Errorf("tracenode: query reply: %w", err)
	}
	if reply.Error != nil {
		return &reply, &tracestore.Error{Code: reply.Error.Code, Detail: reply.Error.Detail, Fields: tracestore.ErrorFields{Gap: reply.Error.Gap}}
	}
	if reply.Page == nil {
		return nil, errors.New("tracenode: query reply without page")
	}
	return &reply, nil
}
