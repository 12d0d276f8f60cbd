package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/worker"
	"github.com/nats-io/nats.go"
)

// TestHeartbeat_LateAnswersKeepTheWorkerUnfenced: a leader that answers
// every heartbeat four intervals late, well within FenceAfter, is a
// leader: the worker applies each answer when it comes and never fences.
// When the answers stop, it fences FenceAfter after the last answered
// heartbeat left. (Before, an answer had to come within the interval,
// and this worker fenced after FenceAfter: what testcluster's workers
// did under -race on a loaded machine, their leader answering 100-300 ms
// after a 100 ms interval.)
func TestHeartbeat_LateAnswersKeepTheWorkerUnfenced(t *testing.T) {
	const (
		interval   = 100 * time.Millisecond
		fenceAfter = 2 * time.Second
		late       = 4 * interval
		answers    = 20 // ~3 s of answers: longer than fenceAfter
	)
	srv, err := bus.StartServer(bus.ServerConfig{Name: "hb", StoreDir: t.TempDir(), DontListen: true,
		Users: []bus.User{{Name: "coord", Password: "coord-pw"}, bus.WorkerPermissions("w0", "w0-pw")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	leader, err := srv.Connect(nats.UserInfo("coord", "coord-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leader.Close)
	wc, err := srv.Connect(nats.UserInfo("w0", "w0-pw"), nats.CustomInboxPrefix(bus.WorkerInboxPrefix("w0")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wc.Close)

	// The leader's side of the protocol, answering each heartbeat `late`
	// after it arrived, in order, from a goroutine the test owns.
	type pending struct {
		m   *nats.Msg
		due time.Time
	}
	queue := make(chan pending, 1024)
	var answering atomic.Bool
	answering.Store(true)
	var answered atomic.Int64
	sub, err := leader.Subscribe(bus.HeartbeatSubjectPrefix+"w0", func(m *nats.Msg) {
		var hb api.Heartbeat
		if wire.Decode(m.Data, api.SmallLimits, api.KindHeartbeat, &hb) != nil || !answering.Load() {
			return
		}
		queue <- pending{m, time.Now().Add(late)}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rep, _ := wire.Encode(api.KindHBReply, &api.HeartbeatReply{Leader: "c0", WorkerTTLMS: fenceAfter.Milliseconds()})
		for {
			select {
			case <-ctx.Done():
				return
			case p := <-queue:
				// The answer's latency is what this test is about.
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(p.due)):
				}
				if p.m.Respond(rep) == nil {
					answered.Add(1)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait(); _ = sub.Unsubscribe() })

	logs := &fenceLog{}
	w, err := worker.Start(worker.Config{ID: "w0", NATS: wc, HeartbeatInterval: interval, FenceAfter: fenceAfter,
		Agents: map[string]evalengine.Adapter{"none": noAdapter{}}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	testutil.WaitFor(t, 30*time.Second, "the leader's late answers", func() bool { return answered.Load() >= answers })
	if n := logs.fences.Load(); n != 0 || w.Fenced() {
		t.Fatalf("the worker fenced itself %d times (fenced now: %v) while its leader answered every heartbeat %v late", n, w.Fenced(), late)
	}
	if last := w.LastAnswer(); last.IsZero() || time.Since(last) > fenceAfter {
		t.Fatalf("last answered heartbeat sent at %v (%v ago): the answers were not applied", last, time.Since(last))
	}

	// No answer any more: the fence still holds.
	answering.Store(false)
	stopped := time.Now()
	testutil.WaitFor(t, 30*time.Second, "the worker fenced", w.Fenced)
	if d := time.Since(stopped); d < fenceAfter-late-interval {
		t.Fatalf("fenced %v after the answers stopped, before FenceAfter (%v) could have passed", d, fenceAfter)
	}
}

// noAdapter is an agent no task of these tests calls.
type noAdapter struct{}

func (noAdapter) NewSession(context.Context, evalengine.SampleInfo) (evalengine.Session, error) {
	return nil, errors.New("no session in this test")
}

// fenceLog counts the worker's "no leader: fencing" records.
type fenceLog struct{ fences atomic.Int64 }

func (l *fenceLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *fenceLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "no leader: fencing") {
		l.fences.Add(1)
	}
	return nil
}
func (l *fenceLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *fenceLog) WithGroup(string) slog.Handler      { return l }
