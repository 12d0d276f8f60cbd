package evalcore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/internal/samplescope"
	"github.com/fadcedab/adk/internal/secrets"
	"github.com/fadcedab/adk/observability"
)

// SampleID derives the deterministic sample id (CONTRACTS §5.4): "sample-"
// and the lowercase hex of the first 12 bytes of SHA-256 over set id,
// version, case id and the decimal sample index, NUL-separated.
func SampleID(setID, setVersion, caseID string, sampleIndex int) string {
	h := sha256.New()
	var buf [64]byte
	h.Write([]byte(setID))
	h.Write([]byte{0})
	h.Write([]byte(setVersion))
	h.Write([]byte{0})
	h.Write([]byte(caseID))
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(buf[:0], int64(sampleIndex), 10))
	sum := h.Sum(buf[:0])
	return "sample-" + hex.EncodeToString(sum[:12])
}

// Progress is reported after every finished sample.
type Progress struct {
	Done    int // samples finished
	Total   int
	Passed  int // samples passed so far
	Errors  int // samples in error so far
	Elapsed time.Duration
}

// RunConfig is what a run needs besides the set: the adapter, the metrics
// in descriptor order, the options and an optional progress callback.
type RunConfig struct {
	Adapter Adapter
	Metrics []Metric
	Options Options
	// Progress, if set, is called after each sample, one call at a time,
	// from the engine's workers; it must be quick.
	Progress func(Progress)
	// Observer, if set, traces every sample: a KindEval span is the root
	// of the sample's trace (its turns' runs are children), each turn
	// records its run_id and trace_id, and every metric verdict is a
	// gen_ai.evaluation.result event when the observer records them.
	Observer observability.Observer
	// Finished are samples of this same set, metrics and options that an
	// interrupted run recorded (a resume journal, see ReadStream). They
	// are not run again and enter the result as they are.
	Finished []StreamSample
	// OnSample, if set, is called with every sample this run finishes, one
	// call at a time, before Progress. It is not called for Finished
	// samples, nor for samples that the run's deadline or cancellation cut
	// off (those count as unfinished: a resumed run runs them again).
	OnSample func(caseIndex int, s *SampleResult)
	// DropSamples is for runs too big for one document: OnSample streams
	// every sample out (a StreamWriter), the engine keeps only each
	// case's aggregate once its samples are done, serves cases case-major
	// (a case's samples together, so few cases hold samples at once) and
	// applies no report budget. OnSample then also gets the samples the
	// run's end cut off (as timeout), since the stream is the result. The
	// Result is a stream summary (StreamWriter.WriteSummary writes its
	// case lines), which Render refuses: its Cases is nil, the cases'
	// aggregates being kept compactly until WriteSummary builds each
	// case's line. Needs OnSample.
	DropSamples bool
	// WorkersRunning, if set, is called each time one of the run's
	// workers finds no sample left (or the run's end) and stops, with how
	// many still run, one call at a time: the last call is 0, before Run
	// returns. A worker that stopped makes no call any more, so at most
	// that many samples can still call a model at once: the local runner
	// closes the provider connections beyond them while the run waits for
	// its last answers (agent.KeepIdleConnections). It must be quick.
	WorkersRunning func(n int)
}

// Run evaluates set: every case Options.Samples times through the
// adapter, in a pool of Options.Concurrency workers (at most
// SampleConcurrency samples of one case at once), and aggregates the
// result. Samples the run deadline cuts off are recorded as timeout. A
// cancelled ctx ends the run with evaluation_cancelled and no result.
func Run(ctx context.Context, set *Set, cfg RunConfig) (*Result, error) {
	e, err := newEngine(set, cfg)
	if err != nil {
		return nil, err
	}
	return e.run(ctx)
}

// RunSample runs one (case, sample) the way Run does, for a distributed
// worker that owns a single task. ctx carries the sample's deadline and
// cancellation; the caller bounds it (Options.CaseTimeoutMS is applied on
// top). Aggregate the collected samples with Aggregate.
func RunSample(ctx context.Context, set *Set, cfg RunConfig, caseIndex, sampleIndex int) (SampleResult, error) {
	r, err := NewSampleRunner(set, cfg.Metrics, cfg.Options)
	if err != nil {
		return SampleResult{}, err
	}
	return r.Run(ctx, cfg.Adapter, caseIndex, sampleIndex)
}

// SampleRunner runs single samples of one validated (set, metrics,
// options): a worker that runs thousands of tasks of a job validates the
// set once, not once per task. It holds no per-run state and is safe for
// concurrent use; the set must not be changed while it is in use.
type SampleRunner struct {
	e engine
}

// NewSampleRunner validates set, metrics and options as Run does.
func NewSampleRunner(set *Set, metrics []Metric, opts Options) (*SampleRunner, error) {
	e, err := newEngine(set, RunConfig{Adapter: noAdapter{}, Metrics: metrics, Options: opts})
	if err != nil {
		return nil, err
	}
	return &SampleRunner{e: *e}, nil
}

// Run runs (caseIndex, sampleIndex) through adapter, the way Run does.
func (r *SampleRunner) Run(ctx context.Context, adapter Adapter, caseIndex, sampleIndex int) (SampleResult, error) {
	return r.RunObserved(ctx, adapter, nil, caseIndex, sampleIndex)
}

// RunObserved is Run traced through obs (RunConfig.Observer); nil is Run.
func (r *SampleRunner) RunObserved(ctx context.Context, adapter Adapter, obs observability.Observer, caseIndex, sampleIndex int) (SampleResult, error) {
	return r.run(ctx, nil, time.Time{}, adapter, obs, caseIndex, sampleIndex)
}

// run runs one sample; scope and deadline are runSample's.
func (r *SampleRunner) run(ctx context.Context, scope *samplescope.Scope, deadline time.Time, adapter Adapter, obs observability.Observer, caseIndex, sampleIndex int) (SampleResult, error) {
	if adapter == nil {
		return SampleResult{}, NewErr(CodeInvalidAdapter, "nil adapter")
	}
	if caseIndex < 0 || caseIndex >= len(r.e.set.Cases) || sampleIndex < 0 || sampleIndex >= r.e.opts.Samples {
		return SampleResult{}, NewErr(CodeInvalidSampleResults, "sample out of range")
	}
	e := r.e
	e.adapter = adapter
	e.observer = obs
	return e.runSample(ctx, scope, deadline, caseIndex, sampleIndex), nil
}

// SampleSlot is a cancel scope for samples run one at a time, the way
// Run's workers lend one to theirs (internal/samplescope): a sample run
// in the slot (SampleRunner.RunInSlot) makes one context, which the
// agent Runner and the model call share, instead of each nesting its own.
// It is for a caller that runs single samples in a loop, one after the
// other, on a goroutine of its own (a fleet worker's run slot).
//
// Its context derives from the parent given to NewSampleSlot and ends with
// it or with Cancel, which also ends the sample running in the slot, as
// cancelling that sample's parent would (a killed task). A cancelled slot
// runs every later sample as cancelled: make a new one. Close releases it.
type SampleSlot struct {
	ctx    context.Context
	cancel context.CancelFunc
	scope  *samplescope.Scope
	stop   func()
	// busy is set while a sample runs in the slot: a second, concurrent
	// RunInSlot does not get the scope.
	busy atomic.Bool
}

// NewSampleSlot returns a slot whose samples' contexts derive from
// parent; the caller closes it.
func NewSampleSlot(parent context.Context) *SampleSlot {
	ctx, cancel := context.WithCancel(parent)
	ctx, scope, stop := samplescope.New(ctx)
	return &SampleSlot{ctx: ctx, cancel: cancel, scope: scope, stop: stop}
}

// Context is the slot's context: RunInSlot's ctx is it, or it with values
// added (context.WithValue).
func (s *SampleSlot) Context() context.Context { return s.ctx }

// Cancel ends the slot's context, and so the sample running in it.
func (s *SampleSlot) Cancel() { s.cancel() }

// Close releases the slot (and cancels it); it runs no sample after.
func (s *SampleSlot) Close() {
	s.stop()
	s.cancel()
}

// RunInSlot is RunObserved with the sample's context lent to slot (see
// SampleSlot). ctx is the slot's context, or it with values added; the
// sample's deadline is the earliest of deadline (zero: none), ctx's and
// the case timeout, and it ends when the slot's context does. A ctx of
// another slot or with a cancel of its own, or a call while another
// sample runs in the slot, runs as RunObserved(ctx) does, deadline
// applied, with no scope lent.
func (r *SampleRunner) RunInSlot(ctx context.Context, slot *SampleSlot, deadline time.Time, adapter Adapter, obs observability.Observer, caseIndex, sampleIndex int) (SampleResult, error) {
	scope := slot.lend(ctx)
	if scope != nil {
		defer slot.busy.Store(false)
	}
	return r.run(ctx, scope, deadline, adapter, obs, caseIndex, sampleIndex)
}

// lend returns the slot's scope for a sample whose parent is ctx, or nil
// when ctx is not the slot's context (values aside) or a sample runs in
// the slot already.
func (s *SampleSlot) lend(ctx context.Context) *samplescope.Scope {
	if s == nil || ctx.Done() != s.ctx.Done() || samplescope.Of(ctx) != s.scope || !s.busy.CompareAndSwap(false, true) {
		return nil
	}
	return s.scope
}

// noAdapter stands in while a SampleRunner validates: each Run names its
// own adapter.
type noAdapter struct{}

func (noAdapter) NewSession(context.Context, SampleInfo) (Session, error) {
	return nil, NewErr(CodeInvalidAdapter, "nil adapter")
}

// ErrorSample is the record of a sample that never ran or whose worker was
// lost (tag e.g. worker_lost, timeout): status error, no turns.
func ErrorSample(set *Set, caseIndex, sampleIndex int, tag string) SampleResult {
	c := &set.Cases[caseIndex]
	return SampleResult{
		CaseID:      c.ID,
		SampleID:    SampleID(set.ID, set.Version, c.ID, sampleIndex),
		SampleIndex: sampleIndex,
		Status:      SampleStatusError,
		Turns:       []TurnResult{},
		Trajectory:  []TrajectoryItem{},
		Criteria:    []MetricResult{},
		Metadata:    MetaOrEmpty(c.Metadata),
		Error:       tag,
	}
}

type engine struct {
	set         *Set
	adapter     Adapter
	metrics     []Metric
	turnMetrics []int
	caseMetrics []int
	opts        Options
	progress    func(Progress)
	observer    observability.Observer
	caseTimeout time.Duration
	finished    []StreamSample
	onSample    func(int, *SampleResult)
	drop        bool
	// workersRunning is RunConfig.WorkersRunning, or a no-op.
	workersRunning func(int)
}

func newEngine(set *Set, cfg RunConfig) (*engine, error) {
	if err := set.check(); err != nil {
		return nil, err
	}
	opts, err := cfg.Options.Normalize()
	if err != nil {
		return nil, err
	}
	if err := opts.checkSampleTotal(len(set.Cases)); err != nil {
		return nil, err
	}
	if cfg.Adapter == nil {
		return nil, NewErr(CodeInvalidAdapter, "nil adapter")
	}
	if len(cfg.Metrics) == 0 && opts.EmptyCriteria != EmptyCriteriaPass {
		return nil, NewErr(CodeEmptyCriteria, "")
	}
	if err := ValidateMetrics(cfg.Metrics); err != nil {
		return nil, err
	}
	e := &engine{
		set:         set,
		adapter:     cfg.Adapter,
		metrics:     cfg.Metrics,
		opts:        opts,
		progress:    cfg.Progress,
		observer:    cfg.Observer,
		caseTimeout: time.Duration(opts.CaseTimeoutMS) * time.Millisecond,
		onSample:    cfg.OnSample,
		drop:        cfg.DropSamples,
	}
	e.workersRunning = cfg.WorkersRunning
	if e.workersRunning == nil {
		e.workersRunning = func(int) {}
	}
	if cfg.DropSamples && cfg.OnSample == nil {
		return nil, NewErr(CodeInvalidEvalOptions, "drop_samples needs on_sample")
	}
	if err := checkFinished(set, opts, cfg.Finished); err != nil {
		return nil, err
	}
	e.finished = cfg.Finished
	for i, m := range cfg.Metrics {
		if m.Turn != nil {
			e.turnMetrics = append(e.turnMetrics, i)
		} else {
			e.caseMetrics = append(e.caseMetrics, i)
		}
	}
	return e, nil
}

// scheduler hands out (case, sample) specs to the workers: sample-major
// round robin over the cases, at most SampleConcurrency samples of a case
// in flight. A case sits in the ready queue exactly when it has samples
// left and a free per-case slot.
type scheduler struct {
	mu         sync.Mutex
	cond       *sync.Cond
	ready      []int // FIFO of case indices; head is the next to serve
	head       int
	nextSample []int
	inflight   []int
	undispatch int
	perCase    int
	samples    int
	stopped    bool
	// have reports samples that are already finished (a resumed run); nil
	// when there are none.
	have func(c, s int) bool
	// caseMajor serves a case's samples before the next case's (the
	// drop-samples mode) instead of sample-major round robin.
	caseMajor bool
}

func newScheduler(cases, samples, perCase int, have func(c, s int) bool) *scheduler {
	s := &scheduler{
		ready:      make([]int, 0, cases*2),
		nextSample: make([]int, cases),
		inflight:   make([]int, cases),
		perCase:    perCase,
		samples:    samples,
		have:       have,
	}
	s.cond = sync.NewCond(&s.mu)
	for c := range cases {
		s.skipHad(c)
		if s.nextSample[c] < samples {
			s.ready = append(s.ready, c)
		}
		if have == nil {
			s.undispatch += samples
			continue
		}
		for i := range samples {
			if !have(c, i) {
				s.undispatch++
			}
		}
	}
	return s
}

// skipHad moves case c's next sample past the ones already finished.
func (s *scheduler) skipHad(c int) {
	if s.have == nil {
		return
	}
	for s.nextSample[c] < s.samples && s.have(c, s.nextSample[c]) {
		s.nextSample[c]++
	}
}

// next blocks until a spec is available; ok is false when there is no more
// work or the scheduler was stopped.
func (s *scheduler) next() (caseIdx, sampleIdx int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.stopped || s.undispatch == 0 {
			return 0, 0, false
		}
		if s.head < len(s.ready) {
			c := s.ready[s.head]
			si := s.nextSample[c]
			s.nextSample[c]++
			s.skipHad(c)
			s.inflight[c]++
			s.undispatch--
			if s.undispatch == 0 {
				s.cond.Broadcast() // idle workers can exit
			}
			again := s.nextSample[c] < s.samples && s.inflight[c] < s.perCase
			if s.caseMajor && again {
				return c, si, true // stays at the front: its next sample goes first
			}
			s.head++
			if s.head > 1024 && s.head*2 > len(s.ready) {
				s.ready = append(s.ready[:0], s.ready[s.head:]...)
				s.head = 0
			}
			if again {
				s.ready = append(s.ready, c)
			}
			return c, si, true
		}
		s.cond.Wait()
	}
}

// done releases the per-case slot of a finished sample.
func (s *scheduler) done(c int) {
	s.mu.Lock()
	s.inflight[c]--
	if s.nextSample[c] < s.samples && s.inflight[c] == s.perCase-1 {
		s.ready = append(s.ready, c)
		s.cond.Signal()
	}
	s.mu.Unlock()
}

// stop makes every next call return false.
func (s *scheduler) stop() {
	s.mu.Lock()
	s.stopped = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (e *engine) run(ctx context.Context) (*Result, error) {
	start := time.Now()
	nCases, nSamples := len(e.set.Cases), e.opts.Samples
	total := nCases * nSamples
	runCtx, cancel := context.WithTimeout(ctx, time.Duration(e.opts.TimeoutMS)*time.Millisecond)
	defer cancel()

	// byCase holds the samples of each case. Dropping samples, a case's
	// slots exist only from its first finished sample until its aggregate
	// is taken, so memory follows the cases in flight, not the set.
	byCase := make([][]SampleResult, nCases)
	slots := func(c int) []SampleResult {
		if byCase[c] == nil {
			byCase[c] = make([]SampleResult, nSamples)
		}
		return byCase[c]
	}
	if !e.drop {
		for i := range byCase {
			slots(i)
		}
	}
	var (
		agg       *runAgg
		remaining []int // samples of each case not yet finished (drop mode)
	)
	if e.drop {
		agg = newCompactRunAgg(headerOf(e.set, e.opts, 0), descsOf(e.metrics), nCases)
		remaining = make([]int, nCases)
		for i := range remaining {
			remaining[i] = nSamples
		}
	}
	// caseDone takes a finished case's aggregate and drops its samples
	// (drop mode only).
	caseDone := func(c int) {
		agg.addCase(c, byCase[c])
		byCase[c] = nil
	}
	var have func(c, s int) bool
	if len(e.finished) > 0 {
		// The scheduler asks under its own lock, while the workers record
		// samples into byCase (and, dropping samples, make and drop its
		// cases' slots) under theirs: it asks a set of its own, made
		// before they start, a bit per sample.
		had := make([]uint64, (total+63)/64)
		for _, f := range e.finished {
			slots(f.CaseIndex)[f.Sample.SampleIndex] = f.Sample
			i := f.CaseIndex*nSamples + f.Sample.SampleIndex
			had[i/64] |= 1 << (i % 64)
		}
		have = func(c, s int) bool {
			i := c*nSamples + s
			return had[i/64]&(1<<(i%64)) != 0
		}
	}
	sched := newScheduler(nCases, nSamples, e.opts.SampleConcurrency, have)
	sched.caseMajor = e.drop
	if e.drop {
		for _, f := range e.finished {
			if remaining[f.CaseIndex]--; remaining[f.CaseIndex] == 0 {
				caseDone(f.CaseIndex)
			}
		}
	}
	// The budget mirrors the contract's incremental report budget, charged
	// with an over-estimate of each sample's encoding (doc.go, decision
	// 10). Dropping samples, the caller streams them: no single document,
	// no budget.
	budget := e.opts.MaxReportBytes - ResultFixedBytes(nCases, len(e.metrics))
	var (
		mu             sync.Mutex
		done, passed   int
		errCount       int
		budgetExceeded bool
		// sampleBytes sums the samples' canonical JSON sizes, each
		// encoded by the worker that ran it and kept in sampleJSON, so
		// neither the final size check nor rendering encodes every sample
		// again after the last one finished (resultSize, CanonicalResult).
		sampleBytes int
		sizeErr     error
		sampleJSON  [][][]byte
	)
	if !e.drop {
		sampleJSON = make([][][]byte, nCases)
		for c := range sampleJSON {
			sampleJSON[c] = make([][]byte, nSamples)
		}
	}
	addSize := func(c, si int, b []byte, err error) {
		if err != nil {
			sizeErr = err
		}
		sampleBytes += len(b)
		sampleJSON[c][si] = b
	}
	for _, f := range e.finished {
		if !e.drop {
			b, err := canonjson.Marshal(&f.Sample)
			addSize(f.CaseIndex, f.Sample.SampleIndex, b, err)
		}
		done++
		switch {
		case f.Sample.Status == SampleStatusError:
			errCount++
		case f.Sample.Passed:
			passed++
		}
		budget -= f.Sample.approxSize()
	}
	budgetExceeded = budget < 0 && !e.drop
	stopOnDone := context.AfterFunc(runCtx, sched.stop)
	defer stopOnDone()

	if budgetExceeded {
		sched.stop() // not even the fixed overhead fits
	}
	workers := min(e.opts.Concurrency, total-len(e.finished))
	var wg sync.WaitGroup
	// stopped tells WorkersRunning of a worker's stop, one call at a
	// time, so that the counts it hears only go down.
	var stopMu sync.Mutex
	running := workers
	stopped := func() {
		stopMu.Lock()
		running--
		e.workersRunning(running)
		stopMu.Unlock()
	}
	// Run owns the workers: it waits for every one before returning.
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			growWorkerStack()
			// A worker's samples are children of a context of its own
			// rather than of runCtx: each sample's context registers in
			// its parent's children map and leaves it when done, and in
			// runCtx's one map, under its one lock, that was 256 workers'
			// map writes contending (~3% of a run's CPU). The run's end
			// reaches every sample through wctx all the same.
			wctx, wcancel := context.WithCancel(runCtx)
			defer wcancel()
			// One cancel scope per sample: the Runner and the model
			// call share the sample's context instead of nesting their
			// own (samplescope; the scope's one hook is on wctx).
			wctx, scope, stopScope := samplescope.New(wctx)
			defer stopScope()
			for {
				c, s, ok := sched.next()
				if !ok || runCtx.Err() != nil {
					stopped()
					return // an undispatched sample is recorded as timeout below
				}
				res := e.runSample(wctx, scope, time.Time{}, c, s)
				// A sample the run's end cut off is not finished: a resume
				// runs it again.
				cut := runCtx.Err() != nil && (res.Error == TagTimeout || res.Error == TagCancelled)
				var enc []byte
				var encErr error
				if !e.drop {
					enc, encErr = encodeSample(&res)
				}
				mu.Lock()
				if !e.drop {
					addSize(c, s, enc, encErr)
				}
				slot := &slots(c)[s]
				*slot = res
				sched.done(c)
				if e.onSample != nil && (!cut || e.drop) {
					e.onSample(c, slot)
				}
				done++
				switch {
				case res.Status == SampleStatusError:
					errCount++
				case res.Passed:
					passed++
				}
				if e.drop {
					if remaining[c]--; remaining[c] == 0 {
						caseDone(c)
					}
				} else {
					budget -= res.approxSize()
					if budget < 0 && !budgetExceeded {
						budgetExceeded = true
						sched.stop()
					}
				}
				if e.progress != nil {
					e.progress(Progress{Done: done, Total: total, Passed: passed, Errors: errCount, Elapsed: time.Since(start)})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	if ctx.Err() != nil {
		return nil, &Error{Code: CodeEvaluationCancelled, Err: ctx.Err()}
	}
	if budgetExceeded {
		return nil, NewErr(CodeReportBudgetExceeded, "")
	}
	// Samples never dispatched before the run deadline are timeouts.
	for c := range byCase {
		if e.drop && remaining[c] == 0 {
			continue
		}
		ss := slots(c)
		for s := range ss {
			if ss[s].SampleID == "" {
				ss[s] = ErrorSample(e.set, c, s, TagTimeout)
				if e.drop {
					e.onSample(c, &ss[s]) // the stream is the result
				} else {
					b, err := canonjson.Marshal(&ss[s])
					addSize(c, s, b, err)
				}
			}
		}
		if e.drop {
			caseDone(c)
		}
	}
	if e.drop {
		// No samples, and the cases kept compactly (Cases is nil): the
		// caller streamed the samples. Not marked checked, so Render
		// refuses it; the stream summary is its use.
		return agg.finish(time.Since(start).Milliseconds()), nil
	}
	r := aggregate(headerOf(e.set, e.opts, time.Since(start)), descsOf(e.metrics), byCase)
	r.sampleJSON = sampleJSON
	n, err := resultSize(r, sampleBytes)
	if err != nil || sizeErr != nil {
		return nil, ReasonErr(CodeReportTooLarge, "encode_failed", "")
	}
	if n > e.opts.MaxReportBytes {
		return nil, NewErr(CodeReportTooLarge, strconv.Itoa(n))
	}
	return r.markChecked(), nil
}

// workerStackFrame is the frame growWorkerStack takes: with what a worker
// already uses, enough that its stack grows once, from the 2 KiB a
// goroutine starts with straight to 16 KiB. A sample's call path through
// an agent and net/http is ~10-14 KiB deep, so a worker left alone grows
// 2 → 4 → 8 → 16 KiB, and each step copies the deep stack and walks its
// frames (runtime.copystack): ~3 copies per worker, in the first wave,
// when 256 workers start at once. Growing at the start copies one
// shallow frame instead.
const workerStackFrame = 12 << 10

// stackSink keeps growWorkerStack's frame from being optimised away.
var stackSink atomic.Uint32

// growWorkerStack grows the calling goroutine's stack to what a sample
// needs, while it is shallow (see workerStackFrame).
//
//go:noinline
func growWorkerStack() {
	var frame [workerStackFrame]byte
	i := stackSink.Load() % workerStackFrame
	frame[i]++
	stackSink.Store(uint32(frame[i]) - 1)
}

// ResultFixedBytes is what the report budget charges a result of nCases
// cases and nMetrics metrics before any sample: a run whose options'
// MaxReportBytes is below it cannot keep its samples in one document, so
// its caller streams them from the start (RunConfig.DropSamples).
func ResultFixedBytes(nCases, nMetrics int) int {
	return 4096 + 1024*nCases + 512*nMetrics
}

// resultSize is the size of r's canonical JSON encoding (the document
// the JSON report is, without its final newline), given the sum of its
// samples' sizes: r is encoded without its samples, and each case's
// "samples":null becomes the samples' array (a slice element encodes as
// it does alone, as CanonicalResult relies on).
func resultSize(r *Result, sampleBytes int) (int, error) {
	type plain Result
	head := *r
	head.sampleJSON = nil
	if r.Cases != nil {
		head.Cases = make([]CaseResult, len(r.Cases))
	}
	n := sampleBytes
	for i := range r.Cases {
		head.Cases[i] = r.Cases[i]
		head.Cases[i].Samples = nil
		if k := len(r.Cases[i].Samples); r.Cases[i].Samples != nil {
			n += len("[]") - len("null") + max(k-1, 0) // brackets for null, commas
		}
	}
	b, err := canonjson.Marshal((*plain)(&head))
	return len(b) + n, err
}

// runSample runs one (case, sample). It never panics and never returns
// before the session is closed. scope, when set, is the calling worker's
// (parent carries it): the sample's context is lent to it, so that the
// Runner and the model calls share it (samplescope). The sample's
// deadline is the case timeout's, or deadline when that is earlier
// (zero: none), or parent's.
func (e *engine) runSample(parent context.Context, scope *samplescope.Scope, deadline time.Time, ci, si int) SampleResult {
	start := time.Now()
	c := &e.set.Cases[ci]
	res := SampleResult{
		CaseID:      c.ID,
		SampleID:    SampleID(e.set.ID, e.set.Version, c.ID, si),
		SampleIndex: si,
		Turns:       make([]TurnResult, 0, len(c.Turns)),
		Trajectory:  []TrajectoryItem{},
		Criteria:    make([]MetricResult, 0, len(e.caseMetrics)),
		Metadata:    MetaOrEmpty(c.Metadata),
	}
	end := time.Now().Add(e.caseTimeout)
	if !deadline.IsZero() && deadline.Before(end) {
		end = deadline
	}
	ctx, cancel := context.WithDeadline(parent, end)
	if scope != nil {
		scope.Begin(ctx, cancel)
		defer scope.End()
	} else {
		defer cancel()
	}
	fail := func(tag string) {
		if res.Error == "" {
			res.Error = tag
		}
	}
	ctxTag := func() string {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return TagTimeout
		}
		return TagCancelled
	}

	var tr *sampleTrace
	if e.observer != nil {
		ctx, tr = e.startSampleTrace(ctx, c.ID, res.SampleID)
		res.TraceID = tr.traceID
		defer func() { tr.end(&res) }()
	}
	info := SampleInfo{SetID: e.set.ID, SetVersion: e.set.Version, Case: c, CaseIndex: ci, SampleID: res.SampleID, SampleIndex: si}
	sess, err := e.newSession(ctx, info)
	switch {
	case ctx.Err() != nil:
		fail(ctxTag())
	case err != nil:
		fail(err.Error())
	}
	var outputs []TurnOutput
	var latencies []int64
	if res.Error == "" {
		outputs = make([]TurnOutput, 0, len(c.Turns))
		latencies = make([]int64, 0, len(c.Turns))
		for ti := range c.Turns {
			t := &c.Turns[ti]
			if ctx.Err() != nil {
				fail(ctxTag())
				break
			}
			in := TurnInput{CaseID: c.ID, CaseIndex: ci, SampleID: res.SampleID, SampleIndex: si, TurnID: t.ID, TurnIndex: ti, Input: t.Input, Turn: t}
			turnStart := time.Now()
			tctx, runID := tr.turn(ctx, ti)
			out, tag := e.turn(tctx, sess, in)
			latency := time.Since(turnStart).Milliseconds()
			if ctx.Err() != nil {
				fail(ctxTag()) // a late reply is a timeout
				break
			}
			if tag != "" {
				fail(tag)
				break
			}
			outputs = append(outputs, out)
			latencies = append(latencies, latency)
			tres := e.turnResult(ctx, &res, c, ci, si, t, ti, out, latency)
			if tr != nil {
				tres.RunID, tres.TraceID = runID, tr.traceID
				tr.scores(ctx, tres.Metrics)
			}
			res.Turns = append(res.Turns, tres)
		}
	}
	if res.Error == "" && len(e.caseMetrics) > 0 {
		ev := CaseEval{Case: c, CaseIndex: ci, SampleID: res.SampleID, SampleIndex: si, Outputs: outputs, LatenciesMS: latencies}
		for _, mi := range e.caseMetrics {
			m := &e.metrics[mi]
			sc := scoreSafely(func() Score { return m.Case.ScoreCase(ctx, ev) })
			res.Criteria = append(res.Criteria, metricResult(m, ScopeCase, sc))
		}
		tr.scores(ctx, res.Criteria)
		if ctx.Err() != nil {
			fail(ctxTag())
		}
	}
	if sess != nil {
		if err := closeSafely(sess); err != nil {
			fail(AdapterTag(err, TagAdapterTerminateFailed))
		}
	}
	res.DurationMS = time.Since(start).Milliseconds()
	finishSample(&res)
	return res
}

// finishSample derives passed and status from the sample's parts.
func finishSample(res *SampleResult) {
	if res.Error != "" {
		res.Status, res.Passed = SampleStatusError, false
		return
	}
	res.Passed = true
	for i := range res.Turns {
		if !res.Turns[i].Passed {
			res.Passed = false
		}
	}
	for i := range res.Criteria {
		if !res.Criteria[i].Passed {
			res.Passed = false
		}
	}
	res.Status = SampleStatusFailed
	if res.Passed {
		res.Status = SampleStatusPassed
	}
}

// newSession calls the adapter, turning a panic or an error into a tag
// (returned as the error's text).
func (e *engine) newSession(ctx context.Context, info SampleInfo) (sess Session, err error) {
	defer func() {
		if p := recover(); p != nil {
			sess, err = nil, errors.New(TagAdapterInitException)
		}
	}()
	sess, err = e.adapter.NewSession(ctx, info)
	if err != nil {
		return nil, errors.New(AdapterTag(err, TagAdapterInitFailed))
	}
	if sess == nil {
		return nil, errors.New(TagInvalidAdapterResult)
	}
	return sess, nil
}

// turn runs one adapter turn; tag is "" on success.
func (e *engine) turn(ctx context.Context, sess Session, in TurnInput) (out TurnOutput, tag string) {
	defer func() {
		if p := recover(); p != nil {
			out, tag = TurnOutput{}, TagAdapterException
		}
	}()
	out, err := sess.Turn(ctx, in)
	if err != nil {
		return TurnOutput{}, AdapterTag(err, TagAdapterFailed)
	}
	for _, s := range out.Trajectory {
		if s.Tool == "" || (s.Kind != "" && s.Kind != KindToolCall && s.Kind != KindToolResponse) {
			return TurnOutput{}, TagInvalidAdapterResult
		}
	}
	return out, ""
}

func closeSafely(sess Session) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &AdapterError{Tag: TagAdapterException}
		}
	}()
	return sess.Close()
}

func scoreSafely(f func() Score) (s Score) {
	defer func() {
		if p := recover(); p != nil {
			s = ScoreError("metric_exception")
		}
	}()
	return f().normalize()
}

func metricResult(m *Metric, scope string, sc Score) MetricResult {
	meta := sc.Metadata
	if len(meta) == 0 {
		meta = map[string]any{}
	} else {
		// The metric's own map, kept as it is unless it holds a secret
		// (a Score is read-only once returned, like a TurnOutput).
		meta, _ = secrets.PruneShared(meta).(map[string]any)
	}
	return MetricResult{
		MetricID:  m.ID,
		Kind:      m.kind(),
		Scope:     scope,
		Score:     sc.Value,
		Threshold: m.Threshold,
		Passed:    sc.Status == StatusOK && sc.Value >= m.Threshold,
		Status:    sc.Status,
		Metadata:  meta,
	}
}

// turnResult records one answered turn, appends its public trajectory to
// the sample's and runs the turn metrics.
func (e *engine) turnResult(ctx context.Context, res *SampleResult, c *Case, ci, si int, t *Turn, ti int, out TurnOutput, latency int64) TurnResult {
	first := len(res.Trajectory)
	for _, s := range out.Trajectory {
		item := TrajectoryItem{TurnID: t.ID, Kind: s.Kind, Tool: s.Tool}
		if item.Kind == "" {
			item.Kind = KindToolCall
		}
		if s.CallID != "" {
			id := s.CallID
			item.CallID = &id
		}
		if e.opts.CaptureToolContent {
			if item.Kind == KindToolCall {
				item.Args = pruneShared(s.Args)
				if item.Args == nil {
					item.Args = map[string]any{}
				}
			} else {
				item.Result = pruneShared(s.Result)
			}
		}
		res.Trajectory = append(res.Trajectory, item)
	}
	meta := adapterMetadata(out.Metadata)
	meta["runtime_latency_ms"] = latency
	tr := TurnResult{
		TurnID:          t.ID,
		Input:           t.Input,
		Expected:        t.Expected,
		Actual:          out.Output,
		Passed:          true,
		Metrics:         make([]MetricResult, 0, len(e.turnMetrics)),
		Trajectory:      res.Trajectory[first:len(res.Trajectory):len(res.Trajectory)],
		Metadata:        MetaOrEmpty(t.Metadata),
		AdapterMetadata: meta,
	}
	if e.opts.CaptureEvents {
		tr.Events = make([]any, len(out.Events))
		for i, ev := range out.Events {
			tr.Events[i] = pruneShared(ev)
		}
	}
	if len(e.turnMetrics) > 0 {
		ev := TurnEval{Case: c, CaseIndex: ci, SampleID: res.SampleID, SampleIndex: si, Turn: t, TurnIndex: ti, Output: out, LatencyMS: latency}
		for _, mi := range e.turnMetrics {
			m := &e.metrics[mi]
			sc := scoreSafely(func() Score { return m.Turn.ScoreTurn(ctx, ev) })
			mr := metricResult(m, ScopeTurn, sc)
			if !mr.Passed {
				tr.Passed = false
			}
			tr.Metrics = append(tr.Metrics, mr)
		}
	}
	return tr
}

// adapterMetadataPruner keeps the token usage counters that the
// sensitive-key rule would drop ("token"); everything else secret-named goes.
var adapterMetadataPruner = secrets.NewPruner(
	"input_tokens", "output_tokens", "prompt_tokens", "completion_tokens", "total_tokens",
	"cache_read_input_tokens", "cache_creation_input_tokens", "reasoning_tokens",
)

// adapterMetadata is a turn's adapter metadata as the result keeps it: a
// map of the engine's own, with room for runtime_latency_ms, holding what
// adapterMetadataPruner keeps, its values shared with the adapter's
// (pruneShared).
func adapterMetadata(m map[string]any) map[string]any {
	kept, _ := adapterMetadataPruner.PruneShared(m).(map[string]any)
	out := make(map[string]any, len(kept)+1)
	for k, v := range kept {
		out[k] = v
	}
	return out
}

// pruneShared is PruneValue for what a sample's result keeps of its
// adapter's output (captured events, tool args and results): it shares
// what holds no secret rather than copying it (secrets.PruneShared). The
// adapter's output is read-only once returned (TurnOutput), so the result
// may point into it.
func pruneShared(v any) any {
	switch v.(type) {
	case map[string]any, []any:
		return secrets.PruneShared(v)
	}
	return v
}

// PruneValue returns a copy of a JSON object or array with its
// secret-named entries removed at every depth (secrets.Prune); other
// values are returned as they are.
func PruneValue(v any) any {
	switch v.(type) {
	case map[string]any, []any:
		return secrets.Prune(v)
	}
	return v
}

func MetaOrEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// approxSize estimates the sample's serialized size for the report budget.
func (s *SampleResult) approxSize() int {
	n := 256 + len(s.CaseID) + len(s.SampleID) + len(s.Error) + approxSize(s.Metadata)
	for i := range s.Turns {
		t := &s.Turns[i]
		n += 160 + len(t.TurnID) + approxSize(t.Input) + approxSize(t.Expected) + approxSize(t.Actual) +
			approxSize(t.Metadata) + approxSize(t.AdapterMetadata)
		for _, ev := range t.Events {
			n += approxSize(ev)
		}
		n += len(t.Metrics) * 200
		for j := range t.Trajectory {
			n += 2 * (80 + len(t.Trajectory[j].Tool) + approxSize(t.Trajectory[j].Args) + approxSize(t.Trajectory[j].Result))
		}
	}
	for i := range s.Criteria {
		n += 200 + approxSize(s.Criteria[i].Metadata)
	}
	return n
}

// checkFinished checks the samples a resumed run starts from: in range,
// of the set's cases, with their deterministic ids, each at most once.
func checkFinished(set *Set, opts Options, finished []StreamSample) error {
	if len(finished) == 0 {
		return nil
	}
	seen := make(map[[2]int]bool, len(finished))
	for _, f := range finished {
		ci, si := f.CaseIndex, f.Sample.SampleIndex
		if ci < 0 || ci >= len(set.Cases) || si < 0 || si >= opts.Samples {
			return NewErr(CodeInvalidSampleResults, "finished sample out of range")
		}
		id := set.Cases[ci].ID
		if f.Sample.CaseID != id || f.Sample.SampleID != SampleID(set.ID, set.Version, id, si) {
			return NewErr(CodeInvalidSampleResults, "sample id "+id+"#"+strconv.Itoa(si))
		}
		if seen[[2]int{ci, si}] {
			return NewErr(CodeInvalidSampleResults, "duplicate "+id+"#"+strconv.Itoa(si))
		}
		seen[[2]int{ci, si}] = true
	}
	return nil
}
