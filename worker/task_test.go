package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model/ratelimit"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/observability"
)

// providerFake is testutil.CannedProvider, except that a request whose
// body holds "slow" gets no answer until the client closes its
// connection; slow has a value for each such request as it arrives.
func providerFake(tb testing.TB) (url string, slow <-chan struct{}) {
	tb.Helper()
	arrived := make(chan struct{}, 16)
	url = testutil.CannedProvider(tb, func(body []byte) bool {
		if !bytes.Contains(body, []byte("slow")) {
			return false
		}
		select {
		case arrived <- struct{}{}:
		default:
		}
		return true
	})
	return url, arrived
}

// taskSetDoc is the set the task tests run: a case the fake answers and one
// it never answers.
const taskSetDoc = `{"id":"tasks","version":"1","cases":[
 {"id":"hello","input":"hello","expected":"ok"},
 {"id":"slow","input":"be slow","expected":"ok"}]}`

const (
	caseHello = 0
	caseSlow  = 1
)

// taskWorker is a worker with what run needs and nothing it does not:
// the job "j1" of taskSetDoc prepared with opts and cached, the agent "a"
// from an AGENT.json against baseURL loaded as Start loads it (the
// openai provider, on the lean call path), a fresh leader answer, and
// the tracer when traced. It is stopped with the test.
func taskWorker(tb testing.TB, baseURL string, opts evalengine.Options, traced bool) *Worker {
	tb.Helper()
	agentFile := filepath.Join(tb.TempDir(), "AGENT.json")
	doc := `{"schema_version":1,"name":"task","instruction":"Answer briefly.",
 "model":{"provider":"openai","model":"fake","base_url":"` + baseURL + `/v1","max_attempts":1,"timeout_ms":30000}}`
	if err := os.WriteFile(agentFile, []byte(doc), 0o600); err != nil {
		tb.Fatal(err)
	}
	w := &Worker{cfg: Config{ID: "w0", FenceAfter: time.Hour}, log: slog.New(slog.DiscardHandler), running: map[api.TaskRef]*heldTask{}, specs: map[string]*jobSpec{},
		owners: map[string]int64{}, answered: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	tb.Cleanup(w.cancel)
	var obs observability.Observer
	if traced {
		tracer, err := observability.New(observability.Config{})
		if err != nil {
			tb.Fatal(err)
		}
		w.tracer, obs = tracer, tracer
	}
	agents, err := loadAgentFiles(map[string]string{"a": agentFile}, obs, ratelimit.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	w.agents = agents
	optJSON, err := json.Marshal(opts)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := evalengine.Prepare([]byte(taskSetDoc), nil, optJSON)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := evalengine.NewSampleRunner(p.Set, p.Metrics, p.Options)
	if err != nil {
		tb.Fatal(err)
	}
	spec := &jobSpec{p: p, runner: r, agent: "a", ready: make(chan struct{})}
	close(spec.ready)
	w.specs["j1"] = spec
	w.answeredSent.Store(time.Now().UnixNano())
	return w
}

// taskCtx is a held task's context and state as accept makes them.
func (w *Worker) taskCtx(task api.Task) (context.Context, *heldTask) {
	ctx, cancel := context.WithDeadline(w.ctx, time.UnixMilli(task.DeadlineAt))
	return ctx, &heldTask{cancel: cancel}
}

// maskedSample is a result's sample as JSON without what differs between
// any two runs: durations and latencies (and no trace ids: untraced).
func maskedSample(t *testing.T, res api.Result) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(res.Sample, &v); err != nil {
		t.Fatalf("sample %q: %v", res.Sample, err)
	}
	var strip func(v any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "duration_ms" || strings.HasSuffix(k, "latency_ms") {
					delete(x, k)
					continue
				}
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	return v
}

// TestRun_InSlotLikeNested runs tasks through a run slot (one cancel
// scope per sample) and through the task's own context (the engine's,
// the Runner's and the call's nested scopes, as before slots), and
// checks that each gives the same result: a pass, a call cut off by the
// case timeout, and one cut off by the task's deadline (earlier than the
// case timeout's); then that the slot still runs a sample after them.
func TestRun_InSlotLikeNested(t *testing.T) {
	opts := evalengine.DefaultOptions()
	opts.CaseTimeoutMS = 300
	url, _ := providerFake(t)
	w := taskWorker(t, url, opts, false)
	slot := evalengine.NewSampleSlot(w.ctx)
	defer slot.Close()
	for _, tc := range []struct {
		name     string
		caseIdx  int
		deadline time.Duration // the task's, from now
		tag      string
	}{
		{"passes", caseHello, time.Minute, ""},
		{"case timeout", caseSlow, time.Minute, evalengine.TagTimeout},
		{"task deadline", caseSlow, 150 * time.Millisecond, evalengine.TagTimeout},
		{"passes after", caseHello, time.Minute, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]api.Result
			for i, inSlot := range []bool{false, true} {
				task := api.Task{JobID: "j1", Index: tc.caseIdx, CaseIndex: tc.caseIdx, DeadlineAt: time.Now().Add(tc.deadline).UnixMilli()}
				ctx, h := w.taskCtx(task)
				s := slot
				if !inSlot {
					s = nil
				}
				res, ok := w.run(ctx, task, h, s)
				h.cancel()
				if !ok {
					t.Fatalf("in slot %v: no result", inSlot)
				}
				got[i] = res
			}
			var sample evalengine.SampleResult
			if err := json.Unmarshal(got[1].Sample, &sample); err != nil {
				t.Fatal(err)
			}
			if sample.Error != tc.tag || got[1].Error != (tc.tag != "") {
				t.Fatalf("in a slot: error %q (result error %v), want %q", sample.Error, got[1].Error, tc.tag)
			}
			if a, b := maskedSample(t, got[0]), maskedSample(t, got[1]); !reflect.DeepEqual(a, b) {
				t.Fatalf("the task in a slot differs from the nested run:\n%v\n%v", b, a)
			}
			if slot.Context().Err() != nil {
				t.Fatal("a task that was not killed ended its slot")
			}
		})
	}
}

// TestRun_KillStopsTheSampleInItsSlot kills a task whose model call
// waits on the provider: the call stops at once, the task reports
// nothing (the leader owns a killed task's outcome), as a task killed
// under its own context does, and the slot is spent. A task killed
// before it enters a slot runs under its own (dead) context, as before.
func TestRun_KillStopsTheSampleInItsSlot(t *testing.T) {
	opts := evalengine.DefaultOptions()
	opts.CaseTimeoutMS = 60_000
	url, slow := providerFake(t)
	w := taskWorker(t, url, opts, false)
	for _, inSlot := range []bool{false, true} {
		t.Run("in slot "+strconv.FormatBool(inSlot), func(t *testing.T) {
			slot := evalengine.NewSampleSlot(w.ctx)
			defer slot.Close()
			s := slot
			if !inSlot {
				s = nil
			}
			task := api.Task{JobID: "j1", Index: caseSlow, CaseIndex: caseSlow, DeadlineAt: time.Now().Add(time.Minute).UnixMilli()}
			ctx, h := w.taskCtx(task)
			w.mu.Lock()
			w.running[api.TaskRef{JobID: "j1", Index: caseSlow}] = h
			w.mu.Unlock()
			defer func() {
				w.mu.Lock()
				delete(w.running, api.TaskRef{JobID: "j1", Index: caseSlow})
				w.mu.Unlock()
			}()
			type ran struct {
				res api.Result
				ok  bool
			}
			done := make(chan ran, 1)
			go func() {
				res, ok := w.run(ctx, task, h, s)
				done <- ran{res, ok}
			}()
			<-slow // the call is on the wire, armed
			killed := time.Now()
			w.kill([]api.TaskRef{{JobID: "j1", Index: caseSlow}})
			var r ran
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("a killed task's call did not stop")
			}
			if r.ok {
				t.Fatalf("a killed task reported a result: %s", r.res.Sample)
			}
			if d := time.Since(killed); d > 5*time.Second {
				t.Fatalf("the killed task stopped after %v", d)
			}
			if inSlot && slot.Context().Err() == nil {
				t.Fatal("the kill did not cancel the task's slot")
			}
		})
	}
	t.Run("killed before its slot", func(t *testing.T) {
		// Killed after the start gates, before its sample: it runs
		// under its own context, which the kill ended (cancelled).
		slot := evalengine.NewSampleSlot(w.ctx)
		defer slot.Close()
		task := api.Task{JobID: "j1", Index: caseHello, CaseIndex: caseHello, DeadlineAt: time.Now().Add(time.Minute).UnixMilli()}
		ctx, h := w.taskCtx(task)
		h.kill()
		spec := w.specs["j1"]
		sample, err := w.runSample(ctx, task, h, slot, spec, w.agents["a"].plain, nil)
		if err != nil || sample.Error != evalengine.TagCancelled {
			t.Fatalf("error %q (%v), want %q", sample.Error, err, evalengine.TagCancelled)
		}
		if slot.Context().Err() != nil {
			t.Fatal("a task killed before it entered the slot cancelled it")
		}
	})
}

// TestRunner_TaskAfterAKillPasses checks the runner's side: a runner
// whose task was killed mid-call, spending its slot, runs the next task
// to a pass (in a new slot; run never enters a spent one).
func TestRunner_TaskAfterAKillPasses(t *testing.T) {
	opts := evalengine.DefaultOptions()
	opts.CaseTimeoutMS = 60_000
	url, arrived := providerFake(t)
	w := taskWorker(t, url, opts, false)
	w.runq = make(chan *runReq)
	w.wg.Add(1)
	go func() { defer w.wg.Done(); w.runner() }()
	defer func() { w.cancel(); w.wg.Wait() }()

	slow := api.Task{JobID: "j1", Index: caseSlow, CaseIndex: caseSlow, DeadlineAt: time.Now().Add(time.Minute).UnixMilli()}
	ctx, h := w.taskCtx(slow)
	r := &runReq{ctx: ctx, task: slow, h: h, done: make(chan struct{}, 1)}
	w.runq <- r
	<-arrived // the call is on the wire
	h.kill()
	<-r.done
	if r.ok {
		t.Fatalf("a killed task reported a result: %s", r.res.Sample)
	}
	hello := api.Task{JobID: "j1", Index: caseHello, CaseIndex: caseHello, DeadlineAt: time.Now().Add(time.Minute).UnixMilli()}
	ctx, h = w.taskCtx(hello)
	defer h.cancel()
	r = &runReq{ctx: ctx, task: hello, h: h, done: make(chan struct{}, 1)}
	w.runq <- r
	<-r.done
	var sample evalengine.SampleResult
	if err := json.Unmarshal(r.res.Sample, &sample); err != nil || !r.ok || !sample.Passed {
		t.Fatalf("the task after a kill: ok %v, sample %s (%v)", r.ok, r.res.Sample, err)
	}
}

// BenchmarkWorkerTask is what a worker pays per task from the run slot
// to the result it publishes (Worker.run: the job's spec from the cache,
// the start gates, the sample against a provider fake on 127.0.0.1 that
// answers at once, the result's JSON), plus the task's context as accept
// makes it and its end; not the NATS fetch, ack and publish. "nested" is
// the sample under the task's own context, as before run slots (the
// engine's WithTimeout, the Runner's WithCancel, the call's
// context.AfterFunc); "slot" in the runner's slot. One task at a time,
// on one goroutine; the fake's work is in the process too, so read
// allocs/op and B/op as the worker's and cpu-ns/task (rusage, the whole
// process) as an upper bound.
func BenchmarkWorkerTask(b *testing.B) {
	for _, traced := range []bool{false, true} {
		for _, inSlot := range []bool{false, true} {
			name := "nested"
			if inSlot {
				name = "slot"
			}
			if traced {
				name += "/traced"
			}
			b.Run(name, func(b *testing.B) {
				opts := evalengine.DefaultOptions()
				opts.CaptureEvents = false
				url, _ := providerFake(b)
				w := taskWorker(b, url, opts, traced)
				var slot *evalengine.SampleSlot
				if inSlot {
					slot = evalengine.NewSampleSlot(w.ctx)
					defer slot.Close()
				}
				task := api.Task{JobID: "j1", Index: caseHello, CaseIndex: caseHello, DeadlineAt: time.Now().Add(time.Hour).UnixMilli()}
				runTask := func() {
					ctx, h := w.taskCtx(task)
					res, ok := w.run(ctx, task, h, slot)
					h.cancel()
					if !ok || res.Error {
						b.Fatalf("task: ok %v, sample %s", ok, res.Sample)
					}
				}
				runTask() // the connection, pools and type caches
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					runTask()
				}
				b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/task")
			})
		}
	}
}

// processCPU is this process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
