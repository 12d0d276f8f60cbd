package worker

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/nats-io/nats.go"
)

// TestFenceIfSilent_FirstAnswerDuringTheCheckKillsNothing: the fence
// check of a worker no leader has answered, past FenceAfter since its
// start, can run while the first answer is applied. onAnswer stores the
// answer's time in lastLeader, then marks the worker answered
// (answeredSent); a second goroutine does those two stores in that order
// while the check runs, the check started a little later each round so
// that the stores fall at every point of it. Whatever the interleaving,
// the check must kill none of the held tasks (none can have started: it
// saw no answer yet, or a fresh one). It read lastLeader first: a first
// answer that landed between its two reads looked like an answer gone
// stale, and the held task was killed as worker_lost.
func TestFenceIfSilent_FirstAnswerDuringTheCheckKillsNothing(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the check and the answer must run at once: GOMAXPROCS < 2")
	}
	// At most 20,000 rounds or 3 s: on a machine whose other core is
	// busy the two rarely overlap, and the test is then only slower.
	const rounds = 20_000
	deadline := time.Now().Add(3 * time.Second)
	var spin atomic.Int64 // the check's delay, in atomic adds
	for i := 0; i < rounds && time.Now().Before(deadline); i++ {
		// A FenceAfter of an hour: an answer stays fresh through any stall
		// of a loaded machine, so only a stale reading can fence.
		w := &Worker{cfg: Config{ID: "w0", FenceAfter: time.Hour}, log: slog.New(slog.DiscardHandler), running: map[api.TaskRef]*heldTask{}}
		ctx, cancel := context.WithCancel(context.Background())
		h := &heldTask{cancel: cancel}
		w.running[api.TaskRef{JobID: "j1", Index: 0}] = h
		w.lastLeader.Store(time.Now().Add(-2 * time.Hour).UnixNano()) // started 2 h ago, never answered
		raceCheckWithAnswer(w, &spin, i%256, func() {
			// onAnswer's two stores, in its order.
			at := time.Now().UnixNano()
			w.lastLeader.Store(at)
			w.answeredSent.Store(at)
		})
		if w.fenced.Load() || h.fenced.Load() || ctx.Err() != nil {
			cancel()
			t.Fatalf("round %d (check after %d adds): the check fenced the worker (%v) and killed its held task (fenced %v, killed %v) while its first answer came",
				i, i%256, w.fenced.Load(), h.fenced.Load(), ctx.Err() != nil)
		}
		cancel()
	}
}

// TestFenceIfSilent_AnswerDuringTheCheckIsNeverFencedAfter: the fence
// check of a worker whose last answer went stale can run while a fresh
// answer is applied (onAnswer, the real one, on a second goroutine, the
// check started a little later each round so that the answer lands at
// every point of it). The check may fence and kill only before the
// answer lands, which then unfences the worker; it must never kill a
// held task once the answer's time is in lastLeader, nor leave the worker
// fenced after the answer. It read a stale lastLeader, then fenced: an
// answer applied between the two (its unfence a no-op) was followed by a
// fence and the held task's kill as worker_lost, and the worker stayed
// fenced until the next answer.
func TestFenceIfSilent_AnswerDuringTheCheckIsNeverFencedAfter(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the check and the answer must run at once: GOMAXPROCS < 2")
	}
	reply, err := wire.Encode(api.KindHBReply, &api.HeartbeatReply{Leader: "c0"})
	if err != nil {
		t.Fatal(err)
	}
	// At most 20,000 rounds or 1 s (it keeps both cores busy): the old
	// code failed within 205 rounds under -race, 2,848 without.
	const rounds = 20_000
	deadline := time.Now().Add(time.Second)
	var spin atomic.Int64 // the check's delay, in atomic adds
	for i := 0; i < rounds && time.Now().Before(deadline); i++ {
		// A FenceAfter of an hour: the answer stays fresh through any
		// stall of a loaded machine, and the last one (2 h ago) is stale.
		w := &Worker{cfg: Config{ID: "w0", FenceAfter: time.Hour}, log: slog.New(slog.DiscardHandler),
			running: map[api.TaskRef]*heldTask{}, answered: make(chan struct{})}
		stale := time.Now().Add(-2 * time.Hour).UnixNano()
		w.lastLeader.Store(stale)
		w.answeredSent.Store(stale)
		w.hbAnswers = heartbeatAnswers{inbox: "_INBOX.w0", out: map[uint64]sentHeartbeat{1: {at: time.Now(), done: make(chan struct{})}}}
		_, cancel := context.WithCancel(context.Background())
		var killedAfter atomic.Bool // killed once the answer's time was in lastLeader
		h := &heldTask{cancel: func() {
			if w.lastLeader.Load() != stale {
				killedAfter.Store(true)
			}
			cancel()
		}}
		w.running[api.TaskRef{JobID: "j1", Index: 0}] = h
		raceCheckWithAnswer(w, &spin, i%1024, func() {
			w.onAnswer(&nats.Msg{Subject: "_INBOX.w0.1", Data: reply})
		})
		if w.lastLeader.Load() == stale {
			cancel()
			t.Fatalf("round %d: the answer was not applied", i)
		}
		if killedAfter.Load() || w.fenced.Load() {
			cancel()
			t.Fatalf("round %d (check after %d adds): after the answer landed, the check killed the held task (%v, fenced %v) or left the worker fenced (%v)",
				i, i%1024, killedAfter.Load(), h.fenced.Load(), w.fenced.Load())
		}
		cancel()
	}
}

// raceCheckWithAnswer runs answer on a second goroutine and w's fence
// check on this one, released together, the check after adds atomic adds
// to spin, so that over rounds the answer falls at every point of the
// check. It returns once both are done.
func raceCheckWithAnswer(w *Worker, spin *atomic.Int64, adds int, answer func()) {
	var ready, start atomic.Bool
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		ready.Store(true)
		for !start.Load() {
			runtime.Gosched()
		}
		answer()
	}()
	for !ready.Load() {
		runtime.Gosched()
	}
	start.Store(true)
	for range adds {
		spin.Add(1)
	}
	w.fenceIfSilent()
	<-answered
}
