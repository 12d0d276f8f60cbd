package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/bus/wire"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/internal/loopback"
	"github.com/fadcedab/adk/settings"
)

// fleetConfig sizes a fleet.
type fleetConfig struct {
	adk, fake    string        // binaries
	dir          string        // scratch directory (data dirs, logs, agent file)
	delay        time.Duration // model latency of the fake
	coordinators int           // 1 or 3
	maxWorkers   int           // allowlisted worker ids w1..wN
	capacity     int           // --capacity of every worker
	workerArgs   []string      // more flags for every worker (experiments)
	profileDir   string        // when set, every adk process writes DIR/ID.pprof (CPU) and DIR/ID.heap.pprof (peak heap)
	// rpm, when set, makes the fake answer 429 above rpm requests per
	// minute and the agent declare rate_limit.requests_per_minute rpm.
	rpm int
	// declared, when rpm is set and declared ≥ 0, is what the agent
	// declares instead (0: no rate_limit block, the control).
	declared int
	// idle, with rpm set, is how many of the workers (the last ones) run
	// the same agent file under another name, which no job asks for: they
	// share the endpoint's limit but have no calls to make (uneven demand).
	idle int
	// signals creates ADK_SIGNALS with the settings' defaults before any
	// process starts, as `adk serve` does (and an operator does on an
	// external NATS server): the workers' traces then land in a stream,
	// as in a real fleet. Without it every signal publish gets no
	// responders, is retried and is counted failed.
	signals bool
}

// fleet is a running eval cluster of separate processes around a NATS
// server embedded in this process: openaifake, coordinators, workers.
type fleet struct {
	cfg     fleetConfig
	srv     *bus.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	cl      *client.Client
	fake    *proc
	fakeURL string
	http    *http.Client // to the fake's /stats

	hbMu    sync.Mutex
	held    map[string]int // tasks each worker holds, from its last heartbeat
	hbStats hbStats        // every heartbeat heard, summed (under hbMu)
	coords  []*proc
	workers []*proc
}

// proc is one child process with its log file.
type proc struct {
	role, id string
	metrics  string // a coordinator's --metrics-addr (heap in use)
	cmd      *exec.Cmd
	log      string
	done     chan struct{} // closed when Wait returned
	err      error         // Wait's error, read after done
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// startProc starts bin with args, stdout and stderr going to DIR/ID.log,
// with env added to this process's environment.
func startProc(dir, role, id string, env []string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, id+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", role, id, err)
	}
	p := &proc{role: role, id: id, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to grace, then kills. It returns an
// error when the process had to be killed or exited non-zero.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return fmt.Errorf("%s %s had exited: %v (log %s)", p.role, p.id, p.err, p.log)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s %s: %v (log %s)", p.role, p.id, p.err, p.log)
		}
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s %s did not stop within %v; killed (log %s)", p.role, p.id, grace, p.log)
	}
}

// completionLine returns the timings of the leader's "job completed" line
// for job (tail_ms, commit_ms, store_ms, records), "" if there is none.
func (p *proc) completionLine(job string) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.Contains(l, "job completed") || !strings.Contains(l, job) {
			continue
		}
		var keep []string
		for _, f := range strings.Fields(l) {
			for _, k := range []string{"records=", "tail_ms=", "commit_ms=", "store_ms="} {
				if strings.HasPrefix(f, k) {
					keep = append(keep, f)
				}
			}
		}
		return strings.Join(keep, " ")
	}
	return ""
}

// logTail returns the last n lines of the process's log.
func (p *proc) logTail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startFleet starts NATS, the fake and the coordinators, and waits until
// the coordinator service answers with a leader. Workers are added with
// addWorker. On error everything started is stopped.
func startFleet(ctx context.Context, cfg fleetConfig) (f *fleet, err error) {
	f = &fleet{cfg: cfg, http: &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}, held: map[string]int{}}
	defer func() {
		if err != nil {
			_ = f.stop()
			f = nil
		}
	}()
	f.srv, err = bus.StartServer(bus.ServerConfig{Name: "fleetbench", StoreDir: filepath.Join(cfg.dir, "nats"),
		Host: "127.0.0.1", Port: -1, MaxStore: 4 << 30})
	if err != nil {
		return f, fmt.Errorf("nats: %w", err)
	}
	if f.nc, err = f.srv.Connect(); err != nil {
		return f, fmt.Errorf("nats connect: %w", err)
	}
	if f.js, err = jetstream.New(f.nc); err != nil {
		return f, err
	}
	if err := bus.WaitJetStreamReady(ctx, f.js); err != nil {
		return f, fmt.Errorf("jetstream: %w", err)
	}
	if cfg.signals {
		if _, err := bus.EnsureSignalStream(ctx, f.js, settings.Defaults().Signals.StreamConfig()); err != nil {
			return f, fmt.Errorf("signal stream: %w", err)
		}
	}
	f.cl = client.New(f.nc, 30*time.Second)
	// Heartbeats list the tasks a worker holds (fetched: being acked,
	// prefetched, running, or publishing their result). The subscription ends with the
	// connection.
	if _, err := f.nc.Subscribe(bus.HeartbeatSubjectPrefix+"*", f.recordHeartbeat); err != nil {
		return f, err
	}

	if err := f.startFake(); err != nil {
		return f, err
	}
	agent := filepath.Join(cfg.dir, "agent.json")
	if err := os.WriteFile(agent, []byte(openAIAgent(f.fakeURL, cfg.declaredRPM())), 0o644); err != nil {
		return f, err
	}

	workers := make([]string, cfg.maxWorkers)
	for i := range workers {
		workers[i] = workerID(i)
	}
	ids := make([]string, cfg.coordinators)
	// Raft and metrics addresses in one pick: never one port twice.
	free, err := loopback.FreeAddrs(2 * cfg.coordinators)
	if err != nil {
		return f, err
	}
	addrs, metricsAddrs := free[:cfg.coordinators], free[cfg.coordinators:]
	var peers []string
	for i := range ids {
		ids[i] = fmt.Sprintf("c%d", i+1)
		peers = append(peers, ids[i]+"="+addrs[i])
	}
	for i, id := range ids {
		metrics := metricsAddrs[i]
		args := []string{"coordinator", "--id", id, "--data-dir", filepath.Join(cfg.dir, id), "--raft-addr", addrs[i],
			"--nats", f.srv.ClientURL(), "--bootstrap", "--workers", strings.Join(workers, ","),
			"--metrics-addr", metrics,
			"--log-level", "info"} // the leader logs each job's completion timings (ID.log, -keep)
		if cfg.coordinators > 1 {
			args = append(args, "--peers", strings.Join(peers, ","))
		}
		p, err := startProc(cfg.dir, "coordinator", id, cfg.profileEnv("COORDINATOR", id), cfg.adk, args...)
		if err != nil {
			return f, err
		}
		p.metrics = metrics
		f.coords = append(f.coords, p)
	}
	if _, err := f.leader(ctx); err != nil {
		return f, err
	}
	return f, nil
}

// profileEnv is the environment that makes the adk process id (kind
// "COORDINATOR" or "WORKER") write its CPU profile (ID.pprof) and its
// peak-heap profile (ID.heap.pprof) into profileDir (none without
// -profile).
func (cfg fleetConfig) profileEnv(kind, id string) []string {
	if cfg.profileDir == "" {
		return nil
	}
	return []string{
		"ADK_" + kind + "_CPUPROFILE=" + filepath.Join(cfg.profileDir, id+".pprof"),
		"ADK_" + kind + "_HEAPPROFILE=" + filepath.Join(cfg.profileDir, id+".heap.pprof"),
	}
}

// declaredRPM is the agent's rate_limit.requests_per_minute (0: none).
func (cfg fleetConfig) declaredRPM() int {
	if cfg.rpm > 0 && cfg.declared >= 0 {
		return cfg.declared
	}
	return cfg.rpm
}

func workerID(i int) string { return fmt.Sprintf("w%d", i+1) }

// startFake starts openaifake and reads its address from its first line.
func (f *fleet) startFake() error {
	cmd := exec.Command(f.cfg.fake, "-addr", "127.0.0.1:0", "-delay", f.cfg.delay.String(), "-rpm", strconv.Itoa(f.cfg.rpm))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	logPath := filepath.Join(f.cfg.dir, "openaifake.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	cmd.Stderr = lf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start openaifake: %w", err)
	}
	p := &proc{role: "fake", id: "openaifake", cmd: cmd, log: logPath, done: make(chan struct{})}
	line, rerr := bufio.NewReader(stdout).ReadString('\n')
	// Wait closes the pipe; the fake writes nothing after its address.
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	f.fake = p
	if rerr != nil {
		return fmt.Errorf("openaifake: no address: %w", rerr)
	}
	f.fakeURL = strings.TrimSpace(line)
	return nil
}

// leader polls capabilities until a coordinator names a leader, and
// returns its process.
// signalSeq is ADK_SIGNALS' last sequence number (0 without the stream):
// the difference over a job is the signal batches the workers stored.
func (f *fleet) signalSeq(ctx context.Context) uint64 {
	if !f.cfg.signals {
		return 0
	}
	st, err := f.js.Stream(ctx, bus.SignalStreamName)
	if err != nil {
		return 0
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.LastSeq
}

func (f *fleet) leader(ctx context.Context) (*proc, error) {
	var last error
	for {
		for _, p := range f.coords {
			if p.exited() {
				return nil, fmt.Errorf("coordinator %s exited: %v\n%s", p.id, p.err, p.logTail(20))
			}
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		caps, err := f.cl.Capabilities(cctx)
		cancel()
		if err == nil && caps.Leader != "" {
			for _, p := range f.coords {
				if p.id == caps.Leader {
					return p, nil
				}
			}
			return nil, fmt.Errorf("leader %q is none of the coordinators", caps.Leader)
		}
		if err != nil {
			last = err
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return nil, fmt.Errorf("no leader: %v (%w)", last, err)
		}
	}
}

// addWorker starts the next worker and waits for its first heartbeat, so
// the coordinators know it before a job is submitted.
func (f *fleet) addWorker(ctx context.Context) error {
	id := workerID(len(f.workers))
	hb, err := f.nc.SubscribeSync(bus.HeartbeatSubjectPrefix + id)
	if err != nil {
		return err
	}
	defer func() { _ = hb.Unsubscribe() }()
	name := "bench"
	if len(f.workers) >= f.cfg.maxWorkers-f.cfg.idle {
		name = "idle" // same endpoint and limit, no job asks for it
	}
	args := append([]string{"worker", "--id", id, "--nats", f.srv.ClientURL(),
		"--capacity", strconv.Itoa(f.cfg.capacity), "--agent", name + "=" + filepath.Join(f.cfg.dir, "agent.json")}, f.cfg.workerArgs...)
	p, err := startProc(f.cfg.dir, "worker", id, f.cfg.profileEnv("WORKER", id), f.cfg.adk, args...)
	if err != nil {
		return err
	}
	f.workers = append(f.workers, p)
	for {
		if p.exited() {
			return fmt.Errorf("worker %s exited: %v\n%s", id, p.err, p.logTail(20))
		}
		_, err := hb.NextMsg(100 * time.Millisecond)
		if err == nil {
			return nil
		}
		if !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("worker %s heartbeat: %w", id, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("worker %s sent no heartbeat: %w", id, ctx.Err())
		}
	}
}

func (f *fleet) recordHeartbeat(m *nats.Msg) {
	var hb api.Heartbeat
	if wire.Decode(m.Data, api.SmallLimits, api.KindHeartbeat, &hb) != nil {
		return
	}
	f.hbMu.Lock()
	f.held[hb.Worker] = len(hb.Running)
	f.hbStats.count++
	f.hbStats.bytes += int64(len(m.Data))
	f.hbStats.recent += int64(len(hb.Recent))
	f.hbMu.Unlock()
}

// hbStats sums the heartbeats the driver heard: how many, their bytes,
// and the finished tasks they listed (api.Heartbeat.Recent), which every
// coordinator decodes too.
type hbStats struct{ count, bytes, recent int64 }

func (f *fleet) heartbeatStats() hbStats {
	f.hbMu.Lock()
	defer f.hbMu.Unlock()
	return f.hbStats
}

// heldTasks is the sum of the tasks the workers held at their last
// heartbeats.
func (f *fleet) heldTasks() int {
	f.hbMu.Lock()
	defer f.hbMu.Unlock()
	n := 0
	for _, h := range f.held {
		n += h
	}
	return n
}

// procs lists every child process.
func (f *fleet) procs() []*proc {
	var ps []*proc
	if f.fake != nil {
		ps = append(ps, f.fake)
	}
	ps = append(ps, f.coords...)
	return append(ps, f.workers...)
}

// stop stops workers, then coordinators, then the fake, then NATS, and
// returns the first error.
func (f *fleet) stop() error {
	var errs []error
	for _, group := range [][]*proc{f.workers, f.coords} {
		for _, p := range group {
			if err := p.stop(20 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if f.fake != nil {
		if err := f.fake.stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	f.http.CloseIdleConnections()
	if f.nc != nil {
		f.nc.Close()
	}
	if f.srv != nil {
		f.srv.Shutdown()
	}
	return errors.Join(errs...)
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func openAIAgent(addr string, rpm int) string {
	limit := ""
	if rpm > 0 {
		limit = fmt.Sprintf(`,"rate_limit":{"requests_per_minute":%d}`, rpm)
	}
	return `{"schema_version":1,"name":"bench","instruction":"Answer briefly.",
 "model":{"provider":"openai","model":"fake","base_url":"http://` + addr + `/v1","max_attempts":1,"timeout_ms":30000` + limit + `}}`
}
