package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// rateRun is the rate-limit row (issue 17): workers sharing one endpoint's
// declared limit against a fake that answers 429 above it.
type rateRun struct {
	workers, tasks    int
	rpm               int
	served, throttled int
	achieved          float64 // completions per minute, first to last
	wall              time.Duration
	errors            int
}

// The bench's pass marks: the fleet's rate within 10% of the limit, under
// 1% of calls answered 429 (no sample may fail: runJob refuses errors).
const (
	rateTolerance = 0.10
	maxThrottled  = 0.01
)

func (r rateRun) ok() bool {
	calls := r.served + r.throttled
	return r.errors == 0 && r.served == r.tasks && math.Abs(r.achieved-float64(r.rpm)) <= rateTolerance*float64(r.rpm) &&
		calls > 0 && float64(r.throttled) < maxThrottled*float64(calls)
}

// runRateLimit starts a fleet of workers whose agent declares
// rate_limit.requests_per_minute rpm against a fake limited to rpm, runs
// one job of seconds × rpm/60 single-call samples, and measures the
// fleet's rate at the fake and its 429s.
func runRateLimit(ctx context.Context, cfg benchConfig, workers, rpm int, seconds float64) (r rateRun, err error) {
	cfg.fleet.rpm = rpm
	cfg.fleet.maxWorkers = workers
	if cfg.fleet.idle < 0 || cfg.fleet.idle >= workers {
		return r, fmt.Errorf("-ratelimit-idle %d: want 0..%d (at least one worker runs the job)", cfg.fleet.idle, workers-1)
	}
	if cfg.fleet.dir == "" {
		if cfg.fleet.dir, err = os.MkdirTemp("", "adk-fleetbench-rl-"); err != nil {
			return r, err
		}
		if !cfg.keepDir {
			defer os.RemoveAll(cfg.fleet.dir)
		}
	}
	f, err := startFleet(ctx, cfg.fleet)
	if err != nil {
		return r, err
	}
	defer func() {
		if serr := f.stop(); serr != nil && err == nil {
			err = fmt.Errorf("stop: %w", serr)
		}
	}()
	for len(f.workers) < workers {
		if err := f.addWorker(ctx); err != nil {
			return r, err
		}
	}
	tasks := max(1, int(seconds*float64(rpm)/60))
	job, jerr := f.runJob(ctx, "ratelimit", tasks, 1)
	r = rateRun{workers: workers, tasks: tasks, rpm: rpm, wall: job.wall, errors: job.errors}
	st, err := f.fakeStats(ctx)
	if err != nil {
		return r, errors.Join(jerr, err)
	}
	r.served, r.throttled = st.Served, st.Throttled
	if span := time.Duration(st.LastNS - st.FirstNS); st.Served > 1 && span > 0 {
		r.achieved = float64(st.Served-1) / span.Minutes()
	}
	return r, jerr
}

func printRateRun(w io.Writer, cfg benchConfig, r rateRun) {
	calls := r.served + r.throttled
	share := 0.0
	if calls > 0 {
		share = 100 * float64(r.throttled) / float64(calls)
	}
	verdict := "PASS"
	if !r.ok() {
		verdict = "FAIL"
	}
	declared := "none (control)"
	if d := cfg.fleet.declaredRPM(); d > 0 {
		declared = fmt.Sprint(d)
	}
	demand := "every worker runs the job"
	if cfg.fleet.idle > 0 {
		demand = fmt.Sprintf("%d of them idle (declaring the same endpoint and limit, no task)", cfg.fleet.idle)
	}
	fmt.Fprintf(w, "fleet rate limit: %d workers of capacity %d (%s), %d coordinator(s), agent rate_limit.requests_per_minute %s, openaifake answering 429 above %d/min (burst 2 s, %v per call)\n\n",
		r.workers, cfg.fleet.capacity, demand, cfg.fleet.coordinators, declared, r.rpm, cfg.fleet.delay)
	fmt.Fprintf(w, "| samples | wall | completions | achieved /min | of limit | 429s | 429 share | sample errors | verdict |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(w, "| %d | %.1fs | %d | %.0f | %.1f%% | %d | %.2f%% | %d | %s |\n",
		r.tasks, r.wall.Seconds(), r.served, r.achieved, 100*r.achieved/float64(r.rpm), r.throttled, share, r.errors, verdict)
	fmt.Fprintf(w, "\npass: achieved within %.0f%% of the limit, under %.0f%% of calls answered 429, no sample failed\n", 100*rateTolerance, 100*maxThrottled)
}
