package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
)

// scope is the app scope of the benchmark's jobs.
const scope = "fleetbench"

// jobRun is one measured job.
type jobRun struct {
	name    string
	workers int
	tasks   int
	// capacity and delay are the fleet's: a scaling row is
	// tasks / (workers × capacity) rounds of delay.
	capacity int
	delay    time.Duration
	wall     time.Duration // submit to terminal
	// first and all are when status first showed a task done and every
	// task done (after submit; 0 if no poll saw it before the end).
	first, all time.Duration
	submitted  time.Duration // the submit call's answer
	dispatched time.Duration // status first showed a task dispatched
	// firstCall and lastAnswer are when the fake received the job's first
	// model call and wrote its last answer (after submit): start-up is
	// firstCall, the tail is wall − lastAnswer, with no poll rounding.
	firstCall, lastAnswer time.Duration
	steady                float64 // tasks/s between 10% and 90% done (0 if too few polls)
	inFlight              float64 // mean model calls held by the fake between 10% and 90% done
	assigned              float64 // mean tasks dispatched and not done between 10% and 90% done
	held                  float64 // mean tasks the workers held (heartbeats) over the same window
	// late is the mean time a call spent in the fake beyond the delay;
	// turnaround the mean time from an answer to the next request on the
	// same connection (the worker's part of a round), over gaps gaps.
	late, turnaround time.Duration
	gaps             int64
	// Model calls the fake answered and connections it accepted during
	// the job.
	modelCalls, newConns int
	errors               int
	leader               string
	peakRSS              int64 // leader's VmHWM over the job (reset at submit), bytes
	peakHeap             int64 // leader's largest go_memstats_heap_inuse_bytes, sampled every ~0.5 s
	rssAfter             int64 // leader's VmRSS at the end, bytes
	cpu                  []procCPU
	benchCPU             time.Duration // this process: NATS server and the driver
	// completion is the leader's "job completed" timings (tail_ms: from
	// noticing every task done to the completion applied; commit_ms,
	// store_ms), "" if its log has none.
	completion string
	// The result read back as the jsonl stream (client.ResultStream).
	// signalMsgs is the signal batches ADK_SIGNALS stored during the job
	// (fleetConfig.signals).
	signalMsgs  uint64
	streamLines int64
	streamRead  time.Duration
	moved       string // the leader at the end, if leadership moved during the job
	// heartbeats are the workers' heartbeats heard during the job.
	heartbeats hbStats
}

// procCPU is the CPU a process spent during a job.
type procCPU struct {
	role, id string
	cpu      time.Duration
}

// evalSet returns a set of cases single-turn cases answered "ok".
func evalSet(id string, cases int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"schema_version":2,"id":%q,"version":"1","cases":[`, id)
	for i := range cases {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"c%05d","turns":[{"id":"t","input":"hello","expected_response":"ok"}]}`, i)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// runJob submits cases × samples tasks, polls progress until the job is
// terminal, and measures it. The job must complete without task errors.
func (f *fleet) runJob(ctx context.Context, name string, cases, samples int) (jobRun, error) {
	r := jobRun{name: name, workers: len(f.workers), tasks: cases * samples, capacity: f.cfg.capacity, delay: f.cfg.delay}
	opts := evalengine.DefaultOptions()
	opts.Samples = samples
	opts.CaptureEvents = false
	opts.TimeoutMS = int((30 * time.Minute).Milliseconds())
	optsDoc, err := evalengine.EncodeOptions(opts)
	if err != nil {
		return r, err
	}
	leader, err := f.leader(ctx)
	if err != nil {
		return r, err
	}
	r.leader = leader.id
	if err := resetPeakRSS(leader.pid()); err != nil {
		return r, fmt.Errorf("reset the leader's peak RSS: %w", err)
	}
	signalsBefore := f.signalSeq(ctx)
	before := f.cpuSnapshot()
	hbBefore := f.heartbeatStats()
	if err := f.resetFakeTimes(ctx); err != nil {
		return r, err
	}
	fakeBefore, err := f.fakeStats(ctx)
	if err != nil {
		return r, err
	}

	start := time.Now()
	j, err := f.cl.Submit(ctx, scope, api.SubmitRequest{Set: evalSet(fmt.Sprintf("%s-%d", name, r.workers), cases), Agent: "bench", Options: optsDoc})
	if err != nil {
		return r, fmt.Errorf("submit: %w", err)
	}
	r.submitted = time.Since(start)
	var t10, t90 time.Time
	var d10, d90 int
	var inFlightSum, assignedSum, heldSum, inFlightN, polls int
	seen := time.Now() // when the last status (or the submit) answered
	for !j.Phase.Terminal() {
		// A poll every 50 ms that the coordinator holds until the job
		// ends (api.Request.WaitMS): the end is seen when it happens, as
		// `adk eval run --cluster` sees it. A coordinator of an earlier
		// build answers at once, and pace keeps the polls 50 ms apart.
		pace := time.Now().Add(pollEvery)
		next, err := f.cl.StatusWait(ctx, scope, j.JobID, pollEvery)
		if err != nil {
			return r, fmt.Errorf("status: %w", err)
		}
		j, seen = next, time.Now()
		for _, p := range f.procs() {
			if p.exited() {
				return r, fmt.Errorf("%s %s exited during the job: %v\n%s", p.role, p.id, p.err, p.logTail(20))
			}
		}
		if polls++; polls%10 == 1 {
			r.peakHeap = max(r.peakHeap, heapInUse(ctx, leader.metrics))
		}
		now, done := seen, j.Progress.Done
		if r.dispatched == 0 && j.Progress.Dispatched > 0 {
			r.dispatched = now.Sub(start)
		}
		if r.first == 0 && done > 0 {
			r.first = now.Sub(start)
		}
		if r.all == 0 && done >= r.tasks {
			r.all = now.Sub(start)
		}
		if t10.IsZero() && done*10 >= r.tasks {
			t10, d10 = now, done
		}
		if t90.IsZero() && done*10 >= r.tasks*9 {
			t90, d90 = now, done
		}
		if !t10.IsZero() && t90.IsZero() {
			st, err := f.fakeStats(ctx)
			if err != nil {
				return r, err
			}
			inFlightSum, inFlightN = inFlightSum+st.InFlight, inFlightN+1
			assignedSum += j.Progress.Dispatched - done
			heldSum += f.heldTasks()
		}
		if !j.Phase.Terminal() {
			if err := pause(ctx, time.Until(pace)); err != nil {
				return r, fmt.Errorf("job %s: %w", j.JobID, err)
			}
		}
	}
	r.wall = seen.Sub(start)
	after := f.cpuSnapshot()
	hbAfter := f.heartbeatStats()
	r.heartbeats = hbStats{count: hbAfter.count - hbBefore.count, bytes: hbAfter.bytes - hbBefore.bytes, recent: hbAfter.recent - hbBefore.recent}
	fakeAfter, err := f.fakeStats(ctx)
	if err != nil {
		return r, err
	}
	r.modelCalls, r.newConns = fakeAfter.Served-fakeBefore.Served, fakeAfter.Conns-fakeBefore.Conns
	if fakeAfter.FirstNS > 0 && fakeAfter.LastNS > 0 {
		r.firstCall, r.lastAnswer = time.Unix(0, fakeAfter.FirstNS).Sub(start), time.Unix(0, fakeAfter.LastNS).Sub(start)
	}
	if fakeAfter.LateN > 0 {
		r.late = time.Duration(fakeAfter.LateNS / fakeAfter.LateN)
	}
	if fakeAfter.GapN > 0 {
		r.turnaround, r.gaps = time.Duration(fakeAfter.GapNS/fakeAfter.GapN), fakeAfter.GapN
	}
	if !t90.IsZero() && t90.After(t10) && d90 > d10 {
		r.steady = float64(d90-d10) / t90.Sub(t10).Seconds()
	}
	if inFlightN > 0 {
		r.inFlight = float64(inFlightSum) / float64(inFlightN)
		r.assigned = float64(assignedSum) / float64(inFlightN)
		r.held = float64(heldSum) / float64(inFlightN)
	}
	r.peakHeap = max(r.peakHeap, heapInUse(ctx, leader.metrics))
	m, err := readMemory(leader.pid())
	if err != nil {
		return r, err
	}
	r.peakRSS, r.rssAfter = m.hwm, m.rss
	if now, err := f.leader(ctx); err != nil {
		return r, err
	} else if now != leader {
		// The RSS and CPU split belong to two leaders: the row says so
		// (a loaded machine moves leadership; the job itself survives).
		r.moved = now.id
	}
	for _, p := range f.procs() {
		role := p.role
		if role == "coordinator" {
			role = "follower"
			if p == leader {
				role = "leader"
			}
		}
		r.cpu = append(r.cpu, procCPU{role: role, id: p.id, cpu: after[p.pid()] - before[p.pid()]})
	}
	r.benchCPU = after[os.Getpid()] - before[os.Getpid()]
	r.errors = j.Progress.Errors
	for _, c := range f.coords {
		if l := c.completionLine(j.JobID); l != "" {
			r.completion = c.id + " " + l
		}
	}
	if j.Phase == evalrecord.PhaseCompleted {
		// The result of any size reads back, page by page (a build from
		// before results were records answers invalid_request: -1).
		t := time.Now()
		n, err := f.cl.ResultStream(ctx, scope, j.JobID, io.Discard, 0)
		switch {
		case err != nil && api.AsError(err).Code == api.CodeInvalidRequest:
			n = -1
		case err != nil:
			return r, fmt.Errorf("job %s: read its result stream: %w", j.JobID, err)
		}
		r.streamLines, r.streamRead = n, time.Since(t)
	}
	if f.cfg.signals {
		r.signalMsgs = f.signalSeq(ctx) - signalsBefore
	}
	// The memory job measures the leader's heap and RSS, which a few
	// tasks lost to a loaded machine (worker_lost) do not change: it is
	// kept, with its errors in the table, under 1% of its tasks.
	memoryOnly := name == "leader-rss" && j.Progress.Errors*100 < r.tasks
	if j.Phase != evalrecord.PhaseCompleted || j.Progress.Done != r.tasks || j.Progress.Errors != 0 && !memoryOnly {
		return r, fmt.Errorf("job %s ended %s (%s): %d/%d done, %d errors%s", j.JobID, j.Phase, j.Reason, j.Progress.Done, r.tasks, j.Progress.Errors,
			f.sampleErrors(ctx, j))
	}
	return r, nil
}

// pollEvery is how often a job's status is read.
const pollEvery = 50 * time.Millisecond

// cpuSnapshot reads the CPU of every child and of this process, by pid.
// A process that cannot be read counts zero.
func (f *fleet) cpuSnapshot() map[int]time.Duration {
	s := map[int]time.Duration{}
	for _, pid := range append(pids(f.procs()), os.Getpid()) {
		s[pid], _ = cpuTime(pid)
	}
	return s
}

func pids(ps []*proc) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.pid()
	}
	return out
}

// fakeStats is openaifake's GET /stats.
type fakeStats struct {
	Served   int `json:"served"`
	InFlight int `json:"in_flight"`
	Conns    int `json:"conns"`
	// With openaifake -rpm: 429s answered, first and last completion.
	Throttled int   `json:"throttled"`
	FirstNS   int64 `json:"first_ns"`
	LastNS    int64 `json:"last_ns"`
	// Since the reset: time in the fake beyond the delay, and from an
	// answer to the next request on its connection (sums and counts).
	LateNS int64 `json:"late_ns"`
	LateN  int64 `json:"late_n"`
	GapNS  int64 `json:"gap_ns"`
	GapN   int64 `json:"gap_n"`
}

// fakeStats asks openaifake for its counters.
func (f *fleet) fakeStats(ctx context.Context) (fakeStats, error) {
	var st fakeStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+f.fakeURL+"/stats", nil)
	if err != nil {
		return st, err
	}
	began := time.Now()
	resp, err := f.http.Do(req)
	if err != nil {
		return st, f.fakeError("openaifake stats", began, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, f.fakeError("openaifake stats", began, err)
	}
	return st, nil
}

// fakeError is a failed call to openaifake's /stats with what tells a
// slow fake from a dead one: how long the call took, whether the fake
// process still runs, and the machine's load (a row lost once to a stats
// timeout at load ~15 in session 13, and the error said no more).
func (f *fleet) fakeError(what string, began time.Time, err error) error {
	state := "running"
	if f.fake == nil {
		state = "not started"
	} else if f.fake.exited() {
		state = fmt.Sprintf("exited (%v, log %s)", f.fake.err, f.fake.log)
	}
	return fmt.Errorf("%s after %v (fake %s, load %s): %w", what, time.Since(began).Round(time.Millisecond), state, loadAverage(), err)
}

// resetFakeTimes clears openaifake's first and last call times, so the
// next job's are its own.
func (f *fleet) resetFakeTimes(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+f.fakeURL+"/stats/reset", nil)
	if err != nil {
		return err
	}
	began := time.Now()
	resp, err := f.http.Do(req)
	if err != nil {
		return f.fakeError("openaifake stats reset", began, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("openaifake stats reset: %s", resp.Status)
	}
	return nil
}

// sampleErrors summarises a completed job's error samples by error tag,
// or returns "" when there is no result to read.
func (f *fleet) sampleErrors(ctx context.Context, j *evalrecord.Job) string {
	if j.Phase != evalrecord.PhaseCompleted {
		return ""
	}
	data, err := f.cl.Result(ctx, scope, j.JobID)
	if err != nil {
		return ""
	}
	var res evalengine.Result
	if err := json.Unmarshal(data, &res); err != nil {
		return ""
	}
	tags := map[string]int{}
	for _, c := range res.Cases {
		for _, smp := range c.Samples {
			if smp.Status == evalengine.SampleStatusError {
				tags[smp.Error]++
			}
		}
	}
	var parts []string
	for tag, n := range tags {
		parts = append(parts, fmt.Sprintf("%s ×%d", tag, n))
	}
	slices.Sort(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}

// heapInUse reads go_memstats_heap_inuse_bytes from a coordinator's
// /metrics (0 when it cannot): the leader's live heap, where VmHWM also
// counts what the collector has not returned to the OS.
func heapInUse(ctx context.Context, addr string) int64 {
	if addr == "" {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f)
		}
	}
	return 0
}

// idleCPU measures every process's CPU over d with no job running (after
// the fleet settled from the last one): what the fleet costs standing
// still, which each row pays on top of its tasks.
func (f *fleet) idleCPU(ctx context.Context, d time.Duration) ([]procCPU, error) {
	leader, err := f.leader(ctx)
	if err != nil {
		return nil, err
	}
	before := f.cpuSnapshot()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d): // a measuring window, not a synchronisation
	}
	after := f.cpuSnapshot()
	var out []procCPU
	for _, p := range f.procs() {
		role := p.role
		if role == "coordinator" {
			role = "follower"
			if p == leader {
				role = "leader"
			}
		}
		out = append(out, procCPU{role: role, id: p.id, cpu: after[p.pid()] - before[p.pid()]})
	}
	return append(out, procCPU{role: "driver", cpu: after[os.Getpid()] - before[os.Getpid()]}), nil
}
