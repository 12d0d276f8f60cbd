package coordinator

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// raftTransport is the node's Raft transport: raft's TCP NetworkTransport
// (embedded, so raft still finds WithClose and WithPreVote on it) with
// pipelines that cannot wedge.
//
// In hashicorp/raft v1.8.0 a follower's Success=false answer (a log
// mismatch after a restart or a snapshot) or a newer term ends
// pipelineDecode, the only reader of the pipeline's Consumer channel,
// while the replication loop may still pick a pending trigger over the
// closed finish channel and send once more. netPipeline's channels are
// unbuffered at the default MaxRPCsInFlight, so its response decoder
// parks on the unread channel, that send parks behind it, and the
// deferred Close that would free both never runs: the follower gets
// heartbeats but no entry ever again, and Shutdown waits forever (the
// deadlock grafana/pyroscope#5518 describes). Turning pipelining off
// (MaxRPCsInFlight 1) avoids it, but replication then waits a round trip
// per batch, and BenchmarkClusterEval_10kTasks lost 22–75% of its
// throughput in three loaded pairs. So instead every pipeline's answers
// are drained by its own goroutine into a queue the replication loop
// reads: the decoder never parks, so no send does.
type raftTransport struct {
	*raft.NetworkTransport
}

func newRaftTransport(addr string, logger hclog.Logger) (*raft.NetworkTransport, raftTransport, error) {
	t, err := raft.NewTCPTransportWithLogger(addr, nil, 3, 5*time.Second, logger)
	if err != nil {
		return nil, raftTransport{}, err
	}
	return t, raftTransport{t}, nil
}

// AppendEntriesPipeline wraps the transport's pipeline in a drained one.
func (t raftTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newDrainedPipeline(p), nil
}

// drainedPipeline forwards an inner pipeline's answers to its own
// Consumer channel through a queue, so the inner pipeline's decoder never
// waits for a reader. The queue holds at most the answers to sends made
// after the reader stopped: raft's loop stops sending on a closed finish
// channel within a few iterations, and Close drops them.
type drainedPipeline struct {
	inner  raft.AppendPipeline
	out    chan raft.AppendFuture
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func newDrainedPipeline(inner raft.AppendPipeline) *drainedPipeline {
	p := &drainedPipeline{inner: inner, out: make(chan raft.AppendFuture), closed: make(chan struct{})}
	p.wg.Add(1)
	go p.forward()
	return p
}

// forward is owned by the pipeline: Close stops it and waits.
func (p *drainedPipeline) forward() {
	defer p.wg.Done()
	in := p.inner.Consumer()
	var q []raft.AppendFuture
	for {
		var out chan raft.AppendFuture
		var head raft.AppendFuture
		if len(q) > 0 {
			out, head = p.out, q[0]
		}
		select {
		case f := <-in:
			q = append(q, f)
		case out <- head:
			q[0] = nil
			q = q[1:]
		case <-p.closed:
			return
		}
	}
}

func (p *drainedPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	return p.inner.AppendEntries(args, resp)
}

func (p *drainedPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// Close closes the inner pipeline and stops the forwarder. Answers still
// queued are dropped, as raft drops an abandoned pipeline's.
func (p *drainedPipeline) Close() error {
	var err error
	p.once.Do(func() {
		close(p.closed)
		err = p.inner.Close()
		p.wg.Wait()
	})
	return err
}
