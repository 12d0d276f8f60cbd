// Command fleetbench measures fleet scaling of the eval cluster, as issue 8
// asks: separate `adk coordinator` and `adk worker` processes around a NATS
// server (JetStream) embedded in this process, the workers' agent calling
// a local OpenAI-compatible server (openaifake) that answers after -delay.
//
//  1. Scaling: with 1, 2 and 4 workers of capacity 64, one job of
//     workers × 64 × -rounds single-turn samples each. Throughput is
//     tasks/s from submit to completion, and steady-state (10% to 90%
//     done, excluding ramp-up and tail); the ideal is workers × 64 /
//     delay. Goal: within 10% of it.
//  2. Memory: one -rss-tasks job (default 10,000) on the largest fleet;
//     the coordinator leader's peak RSS over the job (VmHWM, reset at
//     submit through /proc/PID/clear_refs) and its RSS after.
//
// "slots busy" is the mean number of calls the fake held between 10% and
// 90% done over workers × capacity: below 100%, worker slots waited for
// tasks (dispatch) or spent time outside the model call; near 100% with a
// low rate, calls took longer than -delay (an overloaded machine).
// "assigned" is the mean number of tasks the leader had dispatched and not
// yet seen done over the same window; a worker accepts capacity × 2 (its
// run slots and as many prefetched), so well below workers × capacity × 2
// the workers wait for the leader. "held" is what the workers' heartbeats
// list as theirs (fetched: being acked, prefetched, running or publishing
// the result), sampled once a second: assigned − held is in transit (in
// JetStream before the fetch, results on their way through Raft), and held
// − the fake's in-flight calls is the workers' own overhead (the double
// ack, tasks waiting for a run slot, the sample around its model call, the
// result publish).
//
// Every row also gives each process's CPU seconds over the job, from
// /proc/PID/stat: leader, followers, workers, the fake, and this process
// (the NATS server and the driver), and the model calls and new TCP
// connections the fake saw (one call per task; connections reused). Workers join between rows and stay, so
// the 4-worker rows run on a fleet that has already run the earlier jobs.
//
//	go build -o bin/adk ./cmd/adk && go build -o bin/openaifake ./bench/openaifake
//	go run ./bench/fleetbench -adk bin/adk -openaifake bin/openaifake
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// benchConfig is what one run measures.
type benchConfig struct {
	fleet    fleetConfig
	counts   []int // worker counts of the scaling rows, ascending
	rounds   int   // tasks per worker slot in a scaling job
	rssTasks int   // tasks of the memory job (0: none)
	idle     time.Duration
	rssOnly  bool // only the memory job (no scaling rows)
	rssCases int  // cases of the memory job (0: rssTasks/100, 100 samples each)
	keepDir  bool
}

func main() {
	var cfg benchConfig
	var counts, workerArgs string
	flag.StringVar(&cfg.fleet.adk, "adk", "bin/adk", "the adk binary")
	flag.StringVar(&cfg.fleet.fake, "openaifake", "bin/openaifake", "the openaifake binary")
	flag.DurationVar(&cfg.fleet.delay, "delay", 200*time.Millisecond, "model latency of the fake server")
	flag.IntVar(&cfg.fleet.coordinators, "coordinators", 3, "coordinator processes (Raft voters): 1 or 3")
	flag.IntVar(&cfg.fleet.capacity, "capacity", 64, "--capacity of every worker")
	flag.StringVar(&counts, "workers", "1,2,4", "worker counts of the scaling rows")
	flag.IntVar(&cfg.rounds, "rounds", 10, "tasks per worker slot in a scaling job (tasks = workers × capacity × rounds)")
	flag.IntVar(&cfg.rssTasks, "rss-tasks", 10_000, "tasks of the leader-RSS job on the largest fleet (0: skip)")
	flag.BoolVar(&cfg.rssOnly, "rss-only", false, "run only the leader-RSS job (workers: the largest count), no scaling rows")
	flag.IntVar(&cfg.rssCases, "rss-cases", 0, "cases of the leader-RSS job, rss-tasks/rss-cases samples each (0: 100 samples a case); -rss-cases 100000 -rss-tasks 100000 submits a 100,000-case set, uploaded in parts")
	flag.StringVar(&workerArgs, "worker-args", "", "more flags for every adk worker, space separated (for experiments)")
	flag.StringVar(&cfg.fleet.profileDir, "profile", "", "directory every adk process writes its CPU profile (ID.pprof, written when it stops) and its peak-heap profile (ID.heap.pprof) to")
	rlRPM := flag.Int("ratelimit-rpm", 0, "instead of the scaling rows: the fleet rate-limit row, the agent declaring and the fake enforcing this many requests per minute")
	rlWorkers := flag.Int("ratelimit-workers", 4, "workers of the rate-limit row")
	flag.IntVar(&cfg.fleet.declared, "ratelimit-declared", -1, "with -ratelimit-rpm: what the agent declares instead of the fake's limit (0: no rate_limit, the control; above it: AIMD must find the limit)")
	flag.IntVar(&cfg.fleet.idle, "ratelimit-idle", 0, "with -ratelimit-rpm: how many of the workers share the endpoint's limit but get no task (their agent has another name): uneven demand")
	rlSeconds := flag.Float64("ratelimit-seconds", 30, "length of the rate-limit job at the limit (samples = seconds × rpm / 60)")
	flag.BoolVar(&cfg.fleet.signals, "signals", true, "create ADK_SIGNALS as adk serve does, so the workers' traces land in a stream as in a real fleet (false: no stream, every signal publish fails, as this bench ran before 2026-12-02)")
	flag.DurationVar(&cfg.idle, "idle", 2*time.Second, "after the scaling rows, how long to measure each process's CPU with no job (0: skip)")
	flag.BoolVar(&cfg.keepDir, "keep", false, "keep the scratch directory (data dirs and process logs)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("fleetbench: ")
	for _, s := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			log.Fatalf("-workers %q: not a list of positive counts", counts)
		}
		cfg.counts = append(cfg.counts, n)
	}
	cfg.fleet.workerArgs = strings.Fields(workerArgs)
	for _, p := range []*string{&cfg.fleet.adk, &cfg.fleet.fake, &cfg.fleet.profileDir} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			log.Fatal(err)
		}
		*p = abs
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.fleet.profileDir != "" {
		// The driver's own profile is mostly the embedded NATS server's.
		pf, err := os.Create(filepath.Join(cfg.fleet.profileDir, "driver.pprof"))
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			log.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = pf.Close()
		}()
	}
	loadBefore := loadAverage()
	if *rlRPM > 0 {
		cfg.fleet.rpm = *rlRPM // the header and the verdict read it
		r, err := runRateLimit(ctx, cfg, *rlWorkers, *rlRPM, *rlSeconds)
		printRateRun(os.Stdout, cfg, r)
		fmt.Printf("\nload average (1, 5, 15 min) before: %s, after: %s, on %d CPUs\n", loadBefore, loadAverage(), runtime.NumCPU())
		if err != nil {
			log.Fatal(err)
		}
		if !r.ok() && cfg.fleet.declaredRPM() == *rlRPM {
			log.Fatal("rate-limit row out of bounds")
		}
		return
	}
	rows, idle, err := run(ctx, cfg)
	printTables(os.Stdout, cfg, rows)
	printIdle(os.Stdout, cfg.idle, idle)
	// The figures are only as good as the machine was idle.
	fmt.Printf("\nload average (1, 5, 15 min) before: %s, after: %s, on %d CPUs\n", loadBefore, loadAverage(), runtime.NumCPU())
	if err != nil {
		log.Fatal(err)
	}
}

// run starts a fleet, runs the scaling jobs and the memory job, and stops
// the fleet. It returns the rows measured so far with any error.
func run(ctx context.Context, cfg benchConfig) (rows []jobRun, idle []procCPU, err error) {
	if cfg.fleet.coordinators != 1 && cfg.fleet.coordinators != 3 {
		return nil, nil, fmt.Errorf("coordinators must be 1 or 3, not %d", cfg.fleet.coordinators)
	}
	if len(cfg.counts) == 0 || !slices.IsSorted(cfg.counts) || cfg.rounds < 1 || cfg.rounds > 100 || cfg.fleet.capacity < 1 || cfg.rssTasks < 0 || cfg.idle < 0 {
		return nil, nil, errors.New("worker counts must be ascending, rounds 1..100, capacity positive and -idle not negative")
	}
	if cfg.fleet.dir == "" {
		if cfg.fleet.dir, err = os.MkdirTemp("", "adk-fleetbench-"); err != nil {
			return nil, nil, err
		}
		if cfg.keepDir {
			log.Printf("scratch directory %s", cfg.fleet.dir)
		} else {
			defer os.RemoveAll(cfg.fleet.dir)
		}
	}
	cfg.fleet.maxWorkers = cfg.counts[len(cfg.counts)-1]
	f, err := startFleet(ctx, cfg.fleet)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if serr := f.stop(); serr != nil && err == nil {
			err = fmt.Errorf("stop: %w", serr)
		}
	}()

	for _, n := range cfg.counts {
		for len(f.workers) < n {
			if err := f.addWorker(ctx); err != nil {
				return rows, nil, err
			}
		}
		if cfg.rssOnly {
			continue
		}
		// One case per worker slot, one sample per round (at most 100).
		r, err := f.runJob(ctx, "scaling", n*cfg.fleet.capacity, cfg.rounds)
		if err != nil {
			return rows, nil, err // a partial row would mislead
		}
		rows = append(rows, r)
	}
	if cfg.idle > 0 && !cfg.rssOnly {
		if idle, err = f.idleCPU(ctx, cfg.idle); err != nil {
			return rows, nil, err
		}
	}
	if cfg.rssTasks > 0 {
		samples := min(100, cfg.rssTasks)
		if cfg.rssCases > 0 {
			samples = max(1, cfg.rssTasks/cfg.rssCases)
		}
		r, err := f.runJob(ctx, "leader-rss", (cfg.rssTasks+samples-1)/samples, samples)
		if err != nil {
			return rows, idle, err
		}
		rows = append(rows, r)
	}
	return rows, idle, nil
}

// printIdle prints what every process spent with no job: the fixed cost
// (Raft heartbeats, worker heartbeats, tickers) that every row pays on top
// of its tasks.
func printIdle(w io.Writer, d time.Duration, idle []procCPU) {
	if len(idle) == 0 {
		return
	}
	var parts []string
	for _, c := range idle {
		label := c.role
		if c.id != "" {
			label += " " + c.id
		}
		parts = append(parts, fmt.Sprintf("%s %.1f%%", label, 100*c.cpu.Seconds()/d.Seconds()))
	}
	fmt.Fprintf(w, "\nIdle CPU over %v after the scaling rows (share of one core; driver = embedded NATS server): %s\n", d, strings.Join(parts, ", "))
}

func printTables(w io.Writer, cfg benchConfig, rows []jobRun) {
	fc := cfg.fleet
	extra := ""
	if len(fc.workerArgs) > 0 {
		extra = " (worker flags " + strings.Join(fc.workerArgs, " ") + ")"
	}
	fmt.Fprintf(w, "eval cluster fleet: %d coordinator process(es), workers of capacity %d%s, openai provider against openaifake (%v per call), NATS embedded in the driver\n\n",
		fc.coordinators, fc.capacity, extra, fc.delay)
	fmt.Fprintf(w, "| %-10s | %7s | %6s | %8s | %8s | %14s | %8s | %8s | %9s | %6s | %13s | %12s | %10s | %8s | %6s |\n",
		"job", "workers", "tasks", "wall", "tasks/s", "steady tasks/s", "ideal/s", "of ideal", "steady of", "errors", "leader peak", "leader after", "slots busy", "assigned", "held")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", dashes(12), dashes(9), dashes(8), dashes(10), dashes(10), dashes(16), dashes(10), dashes(10), dashes(11), dashes(8), dashes(15), dashes(14), dashes(12), dashes(10), dashes(8))
	for _, r := range rows {
		ideal := float64(r.workers*fc.capacity) / fc.delay.Seconds()
		rate := float64(r.tasks) / r.wall.Seconds()
		steady, steadyOf := "-", "-"
		if r.steady > 0 {
			steady, steadyOf = fmt.Sprintf("%.0f", r.steady), fmt.Sprintf("%.1f%%", 100*r.steady/ideal)
		}
		busy, assigned, held := "-", "-", "-"
		if r.inFlight > 0 {
			busy = fmt.Sprintf("%.1f%%", 100*r.inFlight/float64(r.workers*fc.capacity))
			assigned, held = fmt.Sprintf("%.0f", r.assigned), fmt.Sprintf("%.0f", r.held)
		}
		fmt.Fprintf(w, "| %-10s | %7d | %6d | %7.2fs | %8.0f | %14s | %8.0f | %7.1f%% | %9s | %6d | %9.1f MiB | %8.1f MiB | %10s | %8s | %6s |\n",
			r.name, r.workers, r.tasks, r.wall.Seconds(), rate, steady, ideal, 100*rate/ideal, steadyOf, r.errors,
			mib(r.peakRSS), mib(r.rssAfter), busy, assigned, held)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "CPU seconds per process over each job (leader is "+leaders(rows)+"; driver = this process: embedded NATS server + polling)")
	fmt.Fprintln(w)
	for _, r := range rows {
		var parts []string
		var workers time.Duration
		for _, c := range r.cpu {
			label := c.role
			if c.role != "fake" {
				label += " " + c.id
			}
			if c.role == "worker" {
				workers += c.cpu
			}
			parts = append(parts, fmt.Sprintf("%s %.2f", label, c.cpu.Seconds()))
		}
		per := "-"
		if r.tasks > 0 {
			per = fmt.Sprintf("%.0f", float64(workers.Microseconds())/float64(r.tasks))
		}
		fmt.Fprintf(w, "- %s, %d worker(s), %d tasks, %.2fs (submit answered at %.2fs, first task dispatched at %.2fs, first model call at %.3fs, first done at %.2fs, last model answer at %.3fs, all at %.2fs): %s; driver %.2f; worker µs/task %s; %d model calls over %d new connections; leader heap in use peak %.1f MiB; leader completion: %s; result stream %d lines read in %.2fs%s\n",
			r.name, r.workers, r.tasks, r.wall.Seconds(), r.submitted.Seconds(), r.dispatched.Seconds(), r.firstCall.Seconds(), r.first.Seconds(), r.lastAnswer.Seconds(), r.all.Seconds(), strings.Join(parts, ", "), r.benchCPU.Seconds(), per, r.modelCalls, r.newConns, mib(r.peakHeap),
			r.completion, r.streamLines, r.streamRead.Seconds(), signalNote(r))
		fmt.Fprintf(w, "  per call: %s in the fake beyond the delay, %s from an answer to the next request on its connection (%d such); %s\n",
			ms(r.late), ms(r.turnaround), r.gaps, roundSplit(r))
		if h := r.heartbeats; h.count > 0 {
			fmt.Fprintf(w, "  heartbeats: %d, %.0f B and %.0f finished tasks listed on average\n", h.count, float64(h.bytes)/float64(h.count), float64(h.recent)/float64(h.count))
		}
		if r.moved != "" {
			fmt.Fprintf(w, "  (leadership moved from %s to %s during the job: the peak RSS, heap and CPU split are %s's as far as they go)\n", r.leader, r.moved, r.leader)
		}
	}
}

// signalNote says how many signal batches ADK_SIGNALS stored over the
// job ("" when the bench runs without the stream).
func signalNote(r jobRun) string {
	if r.signalMsgs == 0 {
		return ""
	}
	return fmt.Sprintf("; ADK_SIGNALS stored %d signal batches", r.signalMsgs)
}

func leaders(rows []jobRun) string {
	var ids []string
	for _, r := range rows {
		if !slices.Contains(ids, r.leader) {
			ids = append(ids, r.leader)
		}
	}
	return strings.Join(ids, ", ")
}

// loadAverage returns the first three fields of /proc/loadavg.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func dashes(n int) string { return strings.Repeat("-", n) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// roundSplit gives a scaling row's loss against its ideal as start-up
// (submit to first model call), the rounds (first call to last answer,
// less rounds × delay, per round) and the tail (last answer to done).
func roundSplit(r jobRun) string {
	slots := r.workers * r.capacity
	if slots == 0 || r.tasks%slots != 0 || r.firstCall <= 0 || r.lastAnswer <= r.firstCall {
		return "no round split"
	}
	rounds := r.tasks / slots
	lost := r.lastAnswer - r.firstCall - time.Duration(rounds)*r.delay
	return fmt.Sprintf("lost against ideal: start-up %s, %d rounds %s (%s a round), tail %s",
		ms(r.firstCall), rounds, ms(lost), ms(lost/time.Duration(rounds)), ms(r.wall-r.lastAnswer))
}
