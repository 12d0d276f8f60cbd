package coordinator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/nats-io/nats.go/jetstream"
)

// dispatched is the leader's own view, for one term, of where the tasks
// it dispatched stand between Raft and the worker's heartbeat: publish
// still unacked, waiting in the worker's queue, or handed to the worker.
// A task no heartbeat reports is lost only once it has been handed over
// and DispatchGrace has passed since: a task that waits in the queue
// behind a busy worker (prefetch, long samples, a stalled delivery) is not
// lost, however long it waits; its deadline still applies.
//
// It is leader-local and rebuilt by looking: a new leader knows no
// publishes and finds queued tasks by scanning the worker's queue.
type dispatched struct {
	mu         sync.Mutex
	publishing map[api.TaskRef]bool // publish not yet acked or given up

	// Owned by the leader loop's goroutine (no lock).
	handedAt map[api.TaskRef]time.Time // first seen past the worker's queue
	scans    map[string]queueScan      // per worker, the last scan
}

// queueScan is one look at a worker's undelivered tasks.
type queueScan struct {
	at     time.Time
	queued map[api.TaskRef]uint64   // task -> stream sequence of its message
	msgs   map[uint64][]api.TaskRef // message -> its tasks
}

// droppable returns the messages all of whose tasks are in failed: a
// message is deleted only when nothing in it may still run.
func (s queueScan) droppable(failed map[api.TaskRef]bool) []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	for ref := range failed {
		seq, ok := s.queued[ref]
		if !ok || seen[seq] {
			continue
		}
		seen[seq] = true
		all := true
		for _, r := range s.msgs[seq] {
			all = all && failed[r]
		}
		if all {
			out = append(out, seq)
		}
	}
	return out
}

func newDispatched() *dispatched {
	return &dispatched{publishing: map[api.TaskRef]bool{}, handedAt: map[api.TaskRef]time.Time{}, scans: map[string]queueScan{}}
}

func (d *dispatched) startPublish(ref api.TaskRef) {
	d.mu.Lock()
	d.publishing[ref] = true
	d.mu.Unlock()
}

func (d *dispatched) endPublish(ref api.TaskRef) {
	d.mu.Lock()
	delete(d.publishing, ref)
	d.mu.Unlock()
}

func (d *dispatched) isPublishing(ref api.TaskRef) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.publishing[ref]
}

// forgetExcept drops what it holds of tasks no longer in flight and of
// workers not live.
func (d *dispatched) forgetExcept(inflight map[string][]*evalrecord.Task, workers map[string]bool) {
	if len(d.handedAt) > 0 {
		still := make(map[api.TaskRef]bool, len(d.handedAt))
		for _, tasks := range inflight {
			for _, tk := range tasks {
				if ref := (api.TaskRef{JobID: tk.JobID, Index: tk.Index}); !d.handedAt[ref].IsZero() {
					still[ref] = true
				}
			}
		}
		for ref := range d.handedAt {
			if !still[ref] {
				delete(d.handedAt, ref)
			}
		}
	}
	for w := range d.scans {
		if !workers[w] {
			delete(d.scans, w)
		}
	}
}

// maxQueueScan bounds one scan of a worker's queue: the leader never
// dispatches more than a worker's capacity plus prefetch (≤ 4096 here).
const maxQueueScan = 8192

// queued returns the worker's tasks still waiting in its queue (stream
// messages past its consumer's last delivery), scanning at most every
// interval. ok is false when the queue could not be read: then nothing
// may be concluded.
func (n *Node) queued(ctx context.Context, d *dispatched, w string, now time.Time, interval time.Duration) (queueScan, bool) {
	if s, ok := d.scans[w]; ok && now.Sub(s.at) < interval {
		return s, true
	}
	s, err := n.scanQueue(ctx, w)
	if err != nil {
		n.log.Warn("scan worker queue", "worker", w, "err", err)
		return queueScan{}, false
	}
	s.at = now
	d.scans[w] = s
	return s, true
}

// QueueScans counts the worker queues this node scanned as leader, looking
// for unreported tasks still waiting to be delivered.
func (n *Node) QueueScans() int64 { return n.live.queueScans.Load() }

func (n *Node) scanQueue(ctx context.Context, w string) (queueScan, error) {
	n.live.queueScans.Add(1)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	subj, err := bus.TaskSubject(w)
	if err != nil {
		return queueScan{}, err
	}
	cons, err := n.js.Consumer(ctx, bus.TasksStream, bus.WorkerConsumer(w))
	if err != nil {
		return queueScan{}, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return queueScan{}, err
	}
	s, err := n.js.Stream(ctx, bus.TasksStream)
	if err != nil {
		return queueScan{}, err
	}
	out := queueScan{queued: map[api.TaskRef]uint64{}, msgs: map[uint64][]api.TaskRef{}}
	for seq := info.Delivered.Stream + 1; len(out.queued) < maxQueueScan; seq++ {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return queueScan{}, err
		}
		if ts, err := api.DecodeTasks(m.Data, w); err == nil {
			for _, t := range ts {
				ref := api.TaskRef{JobID: t.JobID, Index: t.Index}
				out.queued[ref] = m.Sequence
				out.msgs[m.Sequence] = append(out.msgs[m.Sequence], ref)
			}
		}
		seq = m.Sequence
	}
	return out, nil
}

// dropQueued deletes the queued messages of tasks that were just failed,
// so they never reach their worker (the fence in the FSM would reject
// their results anyway; this saves the work).
func (n *Node) dropQueued(ctx context.Context, seqs []uint64) {
	if len(seqs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := n.js.Stream(ctx, bus.TasksStream)
	if err != nil {
		return
	}
	for _, seq := range seqs {
		_ = s.DeleteMsg(ctx, seq)
	}
}
