package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
)

// resultWindow is how long the first result of a batch waits for others
// of the same job before the batch is published (Config.ResultWindow),
// unless the batch holds every task the worker holds of that job: then
// nothing more can join it soon (the job's last results here, the tail of
// every job), and it leaves at once. It holds no run slot
// (the sample's slot is released before the publish), so it costs a task
// latency, not throughput; at 2 ms a 64-slot worker against a 200 ms model
// sent about one message per result, and every message is a JetStream
// store, a PubAck, a pull, an ack and (with the others of its fetch) a
// Raft finish.
const resultWindow = 10 * time.Millisecond

// resultBatcher publishes the results of concurrent tasks of one job in
// one message (group commit): the first result of a batch waits
// resultWindow, or until the batch is full, then publishes it with every
// result that joined; all of them return when it is stored. A result is
// only counted done once its batch is acked, as a single publish was.
type resultBatcher struct {
	w       *Worker
	mu      sync.Mutex
	pending map[string]*resultBatch // by job
	seq     uint64
	nonce   string // per process: batch ids never repeat across restarts
}

type resultBatch struct {
	results []api.Result
	bytes   int
	full    chan struct{} // closed when no more results fit
	done    chan struct{} // closed when published (or given up)
	err     error
}

func newResultBatcher(w *Worker) *resultBatcher {
	return &resultBatcher{w: w, pending: map[string]*resultBatch{}, nonce: fmt.Sprintf("%x", time.Now().UnixNano())}
}

// publish adds r to its job's batch and returns once the batch is stored.
// r's task is still held (it leaves the worker's running set after this
// returns), so a batch as large as heldOf holds all of them.
func (b *resultBatcher) publish(r api.Result) error {
	held := b.w.heldOf(r.JobID)
	b.mu.Lock()
	cur := b.pending[r.JobID]
	if cur != nil && (len(cur.results) >= api.MaxBatchResults || cur.bytes+len(r.Sample) > api.MaxResultBytes) {
		// No room: this one starts the next batch.
		delete(b.pending, r.JobID)
		closeOnce(cur.full)
		cur = nil
	}
	first := cur == nil
	if first {
		cur = &resultBatch{full: make(chan struct{}), done: make(chan struct{})}
		b.pending[r.JobID] = cur
	}
	cur.results = append(cur.results, r)
	cur.bytes += len(r.Sample)
	if len(cur.results) >= api.MaxBatchResults || len(cur.results) >= held {
		delete(b.pending, r.JobID)
		closeOnce(cur.full)
	}
	b.mu.Unlock()
	if !first {
		<-cur.done
		return cur.err
	}
	t := time.NewTimer(b.w.cfg.ResultWindow)
	select {
	case <-t.C:
	case <-cur.full:
	case <-b.w.ctx.Done():
	}
	t.Stop()
	b.mu.Lock()
	if b.pending[r.JobID] == cur {
		delete(b.pending, r.JobID)
	}
	b.seq++
	id := fmt.Sprintf("%s/%s/%d", b.w.cfg.ID, b.nonce, b.seq)
	results := cur.results
	b.mu.Unlock()
	cur.err = b.send(r.JobID, id, results)
	close(cur.done)
	return cur.err
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// send publishes one batch (a single result as before, so one result is
// the same message it always was), retrying with the same message id.
func (b *resultBatcher) send(jobID, id string, results []api.Result) error {
	var data []byte
	var err error
	if len(results) == 1 {
		data, err = wire.Encode(api.KindResult, &results[0])
		id = api.TaskID(results[0].JobID, results[0].Index) + "/" + b.w.cfg.ID
	} else {
		data, err = wire.Encode(api.KindResults, &api.ResultBatch{Results: results})
	}
	if err != nil {
		return err
	}
	subj, err := bus.ResultSubject(jobID, b.w.cfg.ID)
	if err != nil {
		return err
	}
	err = errors.New("worker stopping")
	for attempt := 0; attempt < 5 && b.w.ctx.Err() == nil; attempt++ {
		pctx, cancel := context.WithTimeout(b.w.ctx, 5*time.Second)
		_, err = b.w.js.Publish(pctx, subj, data, jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}
