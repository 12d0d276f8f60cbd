package coordinator

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A pipeline whose answers nobody reads (raft's pipelineDecode has ended
// on a Success=false answer) must still take more sends: raft's own
// netPipeline parks the second one forever, with the replication loop
// and Shutdown behind it (see raftTransport).
func TestRaftTransport_UnreadPipelineNeverBlocksSends(t *testing.T) {
	_, leader, err := newRaftTransport("127.0.0.1:0", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = leader.Close() }()
	follower, _, err := newRaftTransport("127.0.0.1:0", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = follower.Close() }()
	stop := make(chan struct{})
	served := make(chan struct{})
	go func() { // the follower: rejects every append, as after a log mismatch
		defer close(served)
		for {
			select {
			case rpc := <-follower.Consumer():
				rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: false}, nil)
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); <-served }()

	p, err := leader.AppendEntriesPipeline("f", follower.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	const sends = 4
	done := make(chan error, 1)
	go func() {
		for i := 0; i < sends; i++ {
			req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}, Term: 1, PrevLogEntry: uint64(i)}
			if _, err := p.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a failure detector, not synchronisation
		_ = p.Close() // frees the parked send
		<-done
		t.Fatalf("%d pipelined sends with their answers unread did not return", sends)
	}
	// The answers are all still there, in order, for a reader.
	for i := 0; i < sends; i++ {
		f := <-p.Consumer()
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		if got := f.Request().PrevLogEntry; got != uint64(i) {
			t.Fatalf("answer %d is to request %d", i, got)
		}
		if f.Response().Success {
			t.Fatalf("answer %d: Success, want the follower's refusal", i)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
