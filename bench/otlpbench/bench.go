package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TelemetrygenModule is the pinned load generator, installed into the
// directory of -telemetrygen when that binary is missing.
const TelemetrygenModule = "github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@v0.161.0"

// benchPrincipal is the principal the benchmark's bearer token maps to.
const benchPrincipal = "bench"

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (100 on every Linux this runs on).
const clockTicks = 100

// Load generators.
const (
	LoadTelemetrygen = "telemetrygen"
	LoadReplay       = "replay"
)

// Config is one benchmark run.
type Config struct {
	ADK          string // the adk binary
	Telemetrygen string // the telemetrygen binary
	// Load is LoadTelemetrygen (default) or LoadReplay (runReplay: the
	// benchmark posts telemetrygen-shaped requests itself, Procs × Workers
	// connections).
	Load       string
	Procs      int     // telemetrygen processes run at once
	Workers    int     // --workers of each
	Rate       float64 // --rate of each worker (0: unthrottled)
	BatchSize  int     // --batch-size (spans per OTLP request)
	ChildSpans int     // --child-spans (spans per trace = 1 + this)
	Duration   time.Duration
	// Idle is how long the adk process's idle CPU is measured before the
	// load starts (0: not measured).
	Idle time.Duration
	// ProbeInterval spaces the visibility-lag probes (0: none).
	ProbeInterval time.Duration
	// CPUProfile, when set, is passed to adk serve as ADK_SERVE_CPUPROFILE.
	CPUProfile string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// ADKStderr, when set, also receives adk serve's stderr (with
	// GODEBUG=gctrace=1 in the environment: the heap over the run).
	ADKStderr io.Writer
}

func (c *Config) defaults() {
	if c.Load == "" {
		c.Load = LoadTelemetrygen
	}
	if c.Procs <= 0 {
		c.Procs = 1
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 512
	}
	if c.ChildSpans <= 0 {
		c.ChildSpans = 1
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Result is what one run measured.
type Result struct {
	Config Config

	// GeneratedSpans is what telemetrygen's workers created (its batch
	// span processor drops what its bounded queue cannot hold, so only
	// part reaches the receiver), or the spans the replay load sent.
	GeneratedSpans uint64
	Receiver       map[string]uint64 // adk_otlp_receiver_events_total by outcome
	Bus            map[string]uint64 // adk_observability_bus_events_total by counter
	ProbeSpans     int               // lag probes sent and accepted

	// Store is the trace store's status, read from its directory after the
	// adk process exited.
	Store tracestore.Status
	// StreamMsgs and StreamBytes are ADK_SIGNALS's state at the end.
	StreamMsgs, StreamBytes uint64

	GenWall    time.Duration // telemetrygen start → all processes exited
	IngestWall time.Duration // telemetrygen start → last message applied
	ADKCPU     time.Duration // adk serve's CPU over IngestWall
	IdleCPU    time.Duration // adk serve's CPU over Config.Idle, before the load
	TGCPU      time.Duration // the load generator's CPU (telemetrygen's, all processes; or this process's)

	LoadAvg [2]float64 // the machine's 1-minute load average at start and end

	TracesDisk, NATSDisk int64 // allocated bytes after a clean shutdown

	// Memory of the adk serve process (NATS, JetStream, Badger and the
	// receiver in one process): PeakRSS is the kernel's high-water mark
	// (VmHWM) read just before shutdown; PeakRssAnon and PeakRssFile are
	// the largest values sampled every 100 ms from start-up to then
	// (RssFile is mmapped files: Badger's tables and value log).
	PeakRSS, PeakRssAnon, PeakRssFile int64

	Lags         []time.Duration // per probe: sent → queryable
	ProbesFailed int             // probes refused or never seen

	// Where the lag accrues, sampled every 100 ms during the load: the
	// receiver's publisher queue (spans) and the stream messages the
	// store node has not applied.
	MaxQueuedSpans   uint64
	MaxStreamBacklog uint64

	// Queries is the query latency on the store after the load.
	Queries *QueryStats
}

// StoredSpans is the spans the store accepted.
func (r *Result) StoredSpans() uint64 { return r.Store.Counters.Accepted }

// Run starts adk serve in a temporary directory, drives it with
// telemetrygen, waits until the store node has applied everything, stops
// it and measures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	res := &Result{Config: cfg}
	dir, err := os.MkdirTemp("", "adk-otlpbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	token := randomHex(32)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(tracenode.HashToken(token)+" "+benchPrincipal+"\n"), 0o600); err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	adk, err := startADK(cfg, dataDir, tokens)
	if err != nil {
		return nil, err
	}
	defer adk.kill()
	rss := &rssSampler{pid: adk.cmd.Process.Pid}
	rctx, stopRSS := context.WithCancel(ctx)
	rssDone := make(chan struct{})
	go func() { defer close(rssDone); rss.run(rctx) }()
	defer func() { stopRSS(); <-rssDone }()
	nc, err := nats.Connect(adk.natsURL, nats.Name("otlpbench"))
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", adk.natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if err := waitQueryable(ctx, nc, token); err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Procs*cfg.Workers + 2}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	metricsURL := "http://" + adk.otlpAddr + "/metrics"

	if cfg.Idle > 0 {
		c0, err := procCPU(adk.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		time.Sleep(cfg.Idle) // a measurement window, not synchronisation
		c1, err := procCPU(adk.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		res.IdleCPU = c1 - c0
	}

	fmt.Fprintf(cfg.Log, "otlpbench: %s load, %d × %d workers, --rate %g, --batch-size %d, for %v against %s\n",
		cfg.Load, cfg.Procs, cfg.Workers, cfg.Rate, cfg.BatchSize, cfg.Duration, adk.otlpAddr)
	res.LoadAvg[0] = loadAvg()
	cpu0, err := procCPU(adk.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	pctx, stopProbes := context.WithCancel(ctx)
	var probes *prober
	var pwg sync.WaitGroup
	if cfg.ProbeInterval > 0 {
		probes = &prober{hc: hc, nc: nc, url: "http://" + adk.otlpAddr + "/v1/traces", token: token, every: cfg.ProbeInterval}
		pwg.Add(1)
		go func() { defer pwg.Done(); probes.run(pctx) }()
	}
	backlog := &backlogSampler{hc: hc, metricsURL: metricsURL, js: js, consumer: tracenode.ConsumerName("local")}
	pwg.Add(1)
	go func() { defer pwg.Done(); backlog.run(pctx) }()
	var gen uint64
	var tgCPU time.Duration
	var genErr error
	if cfg.Load == LoadReplay {
		gen, tgCPU, genErr = runReplay(ctx, cfg, hc, "http://"+adk.otlpAddr+"/v1/traces", token)
	} else {
		gen, tgCPU, genErr = runTelemetrygen(ctx, cfg, adk.otlpAddr, token)
	}
	res.GenWall = time.Since(start)
	stopProbes()
	pwg.Wait()
	res.MaxQueuedSpans, res.MaxStreamBacklog = backlog.maxQueued, backlog.maxPending
	if genErr != nil {
		return nil, genErr
	}
	res.GeneratedSpans, res.TGCPU = gen, tgCPU
	if probes != nil {
		res.Lags, res.ProbesFailed, res.ProbeSpans = probes.lags, probes.failed, probes.sent
	}

	// Everything accepted is published and applied: the OTLP pool's queue
	// is empty, then the store node has applied the stream's last message.
	fmt.Fprintf(cfg.Log, "otlpbench: load done after %v; waiting for the store node to apply the stream\n", res.GenWall.Round(time.Millisecond))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := poll(wctx, 5*time.Millisecond, func() (bool, error) {
		m, err := scrapeMetrics(wctx, hc, metricsURL)
		return err == nil && queuedSpans(m) == 0, err
	}); err != nil {
		return nil, fmt.Errorf("wait for the publisher queue to drain: %w", err)
	}
	stream, err := js.Stream(wctx, bus.SignalStreamName)
	if err != nil {
		return nil, err
	}
	info, err := stream.Info(wctx)
	if err != nil {
		return nil, err
	}
	last := info.State.LastSeq
	if err := poll(wctx, 2*time.Millisecond, func() (bool, error) {
		r, err := tracenode.Query(wctx, nc, tracenode.QueryRequest{Token: token, Limit: 1})
		if err != nil {
			return false, err
		}
		return r.AppliedSequence >= last, nil
	}); err != nil {
		return nil, fmt.Errorf("wait for the store node to apply sequence %d: %w", last, err)
	}
	res.IngestWall = time.Since(start)
	cpu1, err := procCPU(adk.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	res.ADKCPU = cpu1 - cpu0
	res.LoadAvg[1] = loadAvg()
	res.StreamMsgs, res.StreamBytes = info.State.Msgs, info.State.Bytes
	m, err := scrapeMetrics(wctx, hc, metricsURL)
	if err != nil {
		return nil, err
	}
	res.Receiver = labelled(m, "adk_otlp_receiver_events_total", "outcome")
	res.Bus = labelled(m, "adk_observability_bus_events_total", "counter")
	if res.Queries, err = measureQueries(wctx, nc, token, res.ProbeSpans); err != nil {
		return nil, fmt.Errorf("query latency: %w", err)
	}

	stopRSS()
	<-rssDone
	res.PeakRssAnon, res.PeakRssFile = rss.maxAnon, rss.maxFile
	if st, err := procStatus(adk.cmd.Process.Pid); err == nil {
		res.PeakRSS = st["VmHWM"]
	}
	nc.Close()
	if err := adk.stop(time.Minute); err != nil {
		return nil, err
	}
	res.TracesDisk = diskUsage(filepath.Join(dataDir, "traces"))
	res.NATSDisk = diskUsage(filepath.Join(dataDir, "nats"))
	st, err := tracestore.Open(tracestore.Config{Dir: filepath.Join(dataDir, "traces"), Options: tracestore.Options{
		MaxEvents: tracestore.MaxEventsLimit, MaxBytes: tracestore.MaxBytesLimit,
		MaxEventsPerPrincipal: tracestore.MaxEventsLimit, MaxBytesPerPrincipal: tracestore.MaxBytesLimit,
	}})
	if err != nil {
		return nil, fmt.Errorf("open the trace store after the run: %w", err)
	}
	res.Store = st.Status()
	if err := st.Close(); err != nil {
		return nil, err
	}
	return res, nil
}

// backlogSampler records the largest publisher queue and store node
// backlog while the load runs. The store node of adk serve is named
// "local".
type backlogSampler struct {
	hc         *http.Client
	metricsURL string
	js         jetstream.JetStream
	consumer   string

	maxQueued, maxPending uint64 // owned by run; read after it returned
}

func (b *backlogSampler) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if m, err := scrapeMetrics(ctx, b.hc, b.metricsURL); err == nil {
			b.maxQueued = max(b.maxQueued, queuedSpans(m))
		}
		if c, err := b.js.Consumer(ctx, bus.SignalStreamName, b.consumer); err == nil {
			if info, err := c.Info(ctx); err == nil {
				b.maxPending = max(b.maxPending, info.NumPending+uint64(info.NumAckPending))
			}
		}
	}
}

// rssSampler records the largest RssAnon and RssFile of a process, every
// 100 ms until its context ends.
type rssSampler struct {
	pid int

	maxAnon, maxFile int64 // owned by run; read after it returned
}

func (r *rssSampler) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if st, err := procStatus(r.pid); err == nil {
			r.maxAnon = max(r.maxAnon, st["RssAnon"])
			r.maxFile = max(r.maxFile, st["RssFile"])
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// procStatus returns the kB fields of /proc/PID/status (VmHWM, VmRSS,
// RssAnon, RssFile, ...) in bytes.
func procStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("process memory (needs Linux /proc): %w", err)
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			out[k] = n << 10
		}
	}
	return out, nil
}

// adkProcess is a running `adk serve`.
type adkProcess struct {
	cmd               *exec.Cmd
	otlpAddr, natsURL string
	stderr            *tailBuffer
	exited            chan struct{} // closed when Wait returned
	waitErr           error
}

var (
	otlpLine = regexp.MustCompile(`^adk serve: otlp http://(\S+)/v1/traces`)
	natsLine = regexp.MustCompile(`^adk serve: nats (\S+),`)
)

func startADK(cfg Config, dataDir, tokens string) (*adkProcess, error) {
	cmd := exec.Command(cfg.ADK, "serve", "--data-dir", dataDir, "--port", "-1", "--tokens", tokens, "--otlp-addr", "127.0.0.1:0")
	cmd.Env = os.Environ()
	if cfg.CPUProfile != "" {
		cmd.Env = append(cmd.Env, "ADK_SERVE_CPUPROFILE="+cfg.CPUProfile)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &adkProcess{cmd: cmd, stderr: &tailBuffer{max: 64 << 10}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if cfg.ADKStderr != nil {
		cmd.Stderr = io.MultiWriter(p.stderr, cfg.ADKStderr)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.ADK, err)
	}
	lines := make(chan string, 16)
	go func() { // ends when the process closes stdout
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads after start-up
			}
		}
	}()
	go func() { // ends when the process exits
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	deadline := time.After(2 * time.Minute)
	for p.otlpAddr == "" || p.natsURL == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				<-p.exited
				return nil, fmt.Errorf("adk serve exited during start-up: %v\n%s", p.waitErr, p.stderr)
			}
			if m := otlpLine.FindStringSubmatch(l); m != nil {
				p.otlpAddr = m[1]
			}
			if m := natsLine.FindStringSubmatch(l); m != nil {
				p.natsURL = m[1]
			}
		case <-deadline:
			p.kill()
			return nil, fmt.Errorf("adk serve did not print its addresses within 2m\n%s", p.stderr)
		}
	}
	return p, nil
}

// stop asks adk serve to shut down (SIGINT) and waits for it.
func (p *adkProcess) stop(grace time.Duration) error {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.kill()
		return fmt.Errorf("adk serve did not stop within %v", grace)
	}
	if p.waitErr != nil {
		return fmt.Errorf("adk serve: %v\n%s", p.waitErr, p.stderr)
	}
	return nil
}

func (p *adkProcess) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// waitQueryable waits until the store node answers queries.
func waitQueryable(ctx context.Context, nc *nats.Conn, token string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return poll(ctx, 20*time.Millisecond, func() (bool, error) {
		qctx, qcancel := context.WithTimeout(ctx, time.Second)
		defer qcancel()
		_, err := tracenode.Query(qctx, nc, tracenode.QueryRequest{Token: token, Limit: 1})
		return err == nil, nil
	})
}

var tracesGenerated = regexp.MustCompile(`"traces": ?(\d+)`)

// runTelemetrygen runs cfg.Procs telemetrygen processes to completion and
// returns the spans they generated and their CPU time.
func runTelemetrygen(ctx context.Context, cfg Config, addr, token string) (uint64, time.Duration, error) {
	args := []string{"traces", "--otlp-http", "--otlp-insecure", "--otlp-endpoint", addr,
		"--otlp-header", `Authorization="Bearer ` + token + `"`,
		"--rate", strconv.FormatFloat(cfg.Rate, 'f', -1, 64), "--workers", strconv.Itoa(cfg.Workers),
		"--duration", cfg.Duration.String(), "--batch-size", strconv.Itoa(cfg.BatchSize),
		"--child-spans", strconv.Itoa(cfg.ChildSpans), "--allow-export-failures"}
	cmds := make([]*exec.Cmd, cfg.Procs)
	outs := make([]*tailBuffer, cfg.Procs)
	for i := range cmds {
		outs[i] = &tailBuffer{max: 256 << 10}
		cmds[i] = exec.CommandContext(ctx, cfg.Telemetrygen, args...)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
	}
	for i, c := range cmds {
		if err := c.Start(); err != nil {
			for _, started := range cmds[:i] {
				_ = started.Process.Kill()
				_ = started.Wait()
			}
			return 0, 0, fmt.Errorf("start telemetrygen: %w", err)
		}
	}
	var errs []error
	var spans uint64
	var cpu time.Duration
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("telemetrygen %d: %w\n%s", i, err, outs[i]))
			continue
		}
		cpu += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
		for _, m := range tracesGenerated.FindAllStringSubmatch(outs[i].String(), -1) {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			spans += n * uint64(1+cfg.ChildSpans)
		}
	}
	return spans, cpu, errors.Join(errs...)
}

// procCPU is the process's user+system CPU time from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("process CPU (needs Linux /proc): %w", err)
	}
	// Fields after the command name, which is in parentheses and may
	// contain spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("process CPU: malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("process CPU: malformed /proc stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("process CPU: %w", err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// loadAvg is the 1-minute load average, or 0 where /proc has none.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// diskUsage is the allocated size of the files under dir (what du counts,
// not their apparent size: Badger and JetStream preallocate sparse files).
func diskUsage(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// scrapeMetrics reads the unlabelled and labelled samples of /metrics as
// "name" or "name{labels}" → value.
func scrapeMetrics(ctx context.Context, hc *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out, sc.Err()
}

// queuedSpans is what the OTLP publisher pool holds (queued, in flight,
// retrying), from the bus invariant accepted = exported + export_failed +
// permanent_failures + dropped_oldest + queued (the same figure as the
// adk_observability_bus_queue_events gauge, which older builds never set).
func queuedSpans(m map[string]float64) uint64 {
	c := labelled(m, "adk_observability_bus_events_total", "counter")
	done := c["exported"] + c["export_failed"] + c["permanent_failures"] + c["dropped_oldest"]
	if done >= c["accepted"] {
		return 0
	}
	return c["accepted"] - done
}

// labelled returns name{label="x"} samples as x → value.
func labelled(m map[string]float64, name, label string) map[string]uint64 {
	out := map[string]uint64{}
	prefix := name + "{" + label + `="`
	for k, v := range m {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[strings.TrimSuffix(rest, `"}`)] = uint64(v)
		}
	}
	return out
}

// poll calls cond every interval until it returns true, an error, or ctx
// ends.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil && ctx.Err() == nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent
// use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
