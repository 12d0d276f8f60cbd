//go:build linux

package testcluster_test

// The seeded fault suite over real processes (issue 17): an external
// nats-server with JetStream built from the module cache, three `adk
// coordinator`, three allowlisted `adk worker` and one that is not, two
// `adk store` nodes, all from the built binaries, and a fake OpenAI
// provider (a real HTTP server) counting calls per input. A schedule drawn
// from the seed kills -9 and restarts the leader, a follower, a worker
// (same id), the NATS server and a store node, stops a worker with
// SIGSTOP for longer than its lease, and makes the provider slow or
// failing, while two jobs of two principals run and this process
// publishes signals of a third principal through the workers' publisher.
// Every odd seed's agent declares a fleet-wide rate limit (rate_limit:
// requests_per_minute and concurrent_requests), and the provider records
// when each call arrived and how long it was answered. The checker
// (chaosHistory.violations, chaos_test.go) then reads the run.
//
// CI runs one seed; `make chaos-procs CHAOS_RUNS=100` runs more,
// CHAOS_SEED replays, failing runs' histories (with each process's log
// tail) go to CHAOS_HISTORY_DIR.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/loopback"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/store/tracestore"
)

// chaosPrincipals are the job owners (scope = trace principal) and the
// principal of the accounting publisher.
var chaosPrincipals = []string{"alice", "bob"}

const acctPrincipal = "acct"

// ownerPrincipal owns the job of an `adk eval submit` process that the
// schedule kills -9 (owner death).
const ownerPrincipal = "carol"

// chaosProc is one child process, restartable with the same arguments.
type chaosProc struct {
	name, bin string
	args      []string
	log       string // log file (appended across restarts)
	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{}
	stopped   bool // SIGSTOPped
}

func (p *chaosProc) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the child holds its own descriptor
	fmt.Fprintf(f, "=== start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	// A test binary killed mid-batch takes its fleet with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done, p.stopped = cmd, done, false
	p.mu.Unlock()
}

func (p *chaosProc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig and, for SIGKILL, waits for the process to end.
func (p *chaosProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	switch sig {
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT, syscall.SIGKILL:
		p.stopped = false
	}
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not die on SIGKILL", p.name)
		}
	}
}

// term resumes a stopped process and ends it with SIGTERM (SIGKILL after
// grace); it reports whether it ended within grace.
func (p *chaosProc) term(grace time.Duration) bool {
	p.mu.Lock()
	cmd, done, stopped := p.cmd, p.done, p.stopped
	p.stopped = false
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	if stopped {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return true
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
		return false
	}
}

// termAll terms ps at once and returns the names of those that did not
// end within grace.
func termAll(ps []*chaosProc, grace time.Duration) []string {
	var mu sync.Mutex
	var slow []string
	var wg sync.WaitGroup
	for _, p := range ps {
		if p == nil {
			continue
		}
		wg.Go(func() {
			if !p.term(grace) {
				mu.Lock()
				slow = append(slow, p.name)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return slow
}

// tail is the last n lines of the process's log.
func (p *chaosProc) tail(n int) []string {
	data, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// chaosProvider is the fake OpenAI provider: it counts the calls per
// input (one case's input: the (case, sample) with one sample per case),
// and answers slowly or with 500 for the inputs the seed picked.
type chaosProvider struct {
	srv *httptest.Server

	mu           sync.Mutex
	delay        time.Duration // every answer
	slow         time.Duration // extra delay for a slow input
	slowP, failP uint32        // per mille of inputs that are slow / fail
	calls        map[string]int
	last         map[string]time.Time // each input's latest call
	// Every call's arrival, and the span of each answered (not abandoned
	// by its client), since began: the rate limit's account.
	began    time.Time
	arrivals []time.Duration
	spans    [][2]time.Duration
}

func newChaosProvider(rng *rand.Rand) *chaosProvider {
	p := &chaosProvider{calls: map[string]int{}, last: map[string]time.Time{}, began: time.Now(),
		delay: time.Duration(150+rng.IntN(350)) * time.Millisecond,
		slow:  time.Duration(1000+rng.IntN(2000)) * time.Millisecond,
		slowP: uint32(rng.IntN(100)), failP: uint32(rng.IntN(80))}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

func (p *chaosProvider) pick(input string, salt string, perMille uint32) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(salt + input))
	return h.Sum32()%1000 < perMille
}

func (p *chaosProvider) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Since(p.began)
	p.mu.Lock()
	p.arrivals = append(p.arrivals, arrived)
	p.mu.Unlock()
	answered := false
	// The span ends before the answer leaves (the server flushes it after
	// the handler returns): within the client's slot.
	defer func() {
		if answered {
			p.mu.Lock()
			p.spans = append(p.spans, [2]time.Duration{arrived, time.Since(p.began)})
			p.mu.Unlock()
		}
	}()
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	input := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			input = fmt.Sprint(m.Content)
		}
	}
	p.mu.Lock()
	p.calls[input]++
	p.last[input] = time.Now()
	d, slow, slowP, failP := p.delay, p.slow, p.slowP, p.failP
	p.mu.Unlock()
	if p.pick(input, "slow", slowP) {
		d += slow
	}
	select {
	case <-time.After(d):
	case <-r.Context().Done():
		return
	}
	answered = true
	w.Header().Set("Content-Type", "application/json")
	if p.pick(input, "fail", failP) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"chaos: provider failure","type":"server_error"}}`))
		return
	}
	_, _ = w.Write([]byte(`{"id":"c","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
}

// lastCall is the latest call of any input starting with prefix.
func (p *chaosProvider) lastCall(prefix string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var t time.Time
	for in, at := range p.last {
		if strings.HasPrefix(in, prefix) && at.After(t) {
			t = at
		}
	}
	return t
}

// limitCalls fills lim with the calls so far.
func (p *chaosProvider) limitCalls(lim *limitAccount) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lim.Arrivals = slices.Clone(p.arrivals)
	lim.Spans = slices.Clone(p.spans)
}

func (p *chaosProvider) executions() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.calls))
	for k, v := range p.calls {
		out[k] = v
	}
	return out
}

// procFleet is one run's processes.
type procFleet struct {
	t        *testing.T
	dir      string
	natsURL  string
	nats     *chaosProc
	coords   []*chaosProc // c1..c3
	workers  []*chaosProc // w1..w3
	rogue    *chaosProc
	stores   []*chaosProc // s1, s2
	metrics  map[*chaosProc]string
	adk      string
	nc       *nats.Conn
	cl       *client.Client
	provider *chaosProvider
}

func (f *procFleet) all() []*chaosProc {
	ps := append([]*chaosProc{}, f.workers...)
	ps = append(ps, f.rogue)
	ps = append(ps, f.stores...)
	ps = append(ps, f.coords...)
	return append(ps, f.nats)
}

// freePort returns one loopback address that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	addrs, err := loopback.FreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0]
}

// chaosBinaries builds adk and nats-server once per test process.
func chaosBinaries(t *testing.T) (adk, natsServer string) {
	t.Helper()
	tags := []string{}
	if chaosBreakBuild() {
		tags = append(tags, "-tags", "chaosbreak")
	}
	return testutil.Binary(t, "../cmd/adk", tags...), testutil.Binary(t, "github.com/nats-io/nats-server/v2")
}

// chaosBreakBuild is set by the checker's own test: the binaries are built
// with the chaosbreak tag, whose hooks (ADK_CHAOS_BREAK) break the system
// on purpose.
func chaosBreakBuild() bool { return os.Getenv("ADK_CHAOS_BREAK") != "" }

// chaosLimit is the fleet-wide rate limit seed's run declares, nil for
// none: every odd seed (CI's included) declares one, drawn from its own
// stream so the fault schedule of a seed is the same either way.
func chaosLimit(seed uint64) *limitAccount {
	if seed%2 == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ca1ab1e))
	return &limitAccount{RPM: 240 + 60*rng.IntN(5), Concurrent: 2 + rng.IntN(3), Workers: 3}
}

// startProcFleet starts one run's processes; lim, when set, is the rate
// limit the workers' agent declares.
func startProcFleet(t *testing.T, dir string, provider *chaosProvider, extraEnv []string, lim *limitAccount) *procFleet {
	t.Helper()
	adk, natsBin := chaosBinaries(t)
	f := &procFleet{t: t, dir: dir, provider: provider, metrics: map[*chaosProc]string{}, adk: adk}
	t.Cleanup(func() {
		all := f.all()
		termAll(all[:len(all)-1], 10*time.Second) // NATS last: the others flush through it
		termAll(all[len(all)-1:], 10*time.Second)
	})
	natsAddr := freePort(t)
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("server_name: chaos\nlisten: %q\njetstream {\n  store_dir: %q\n  max_file_store: 16G\n  max_memory_store: 64M\n}\n",
		natsAddr, filepath.Join(dir, "jetstream"))), 0o600); err != nil {
		t.Fatal(err)
	}
	f.natsURL = "nats://" + natsAddr
	f.nats = &chaosProc{name: "nats-server", bin: natsBin, args: []string{"-c", conf}, log: filepath.Join(dir, "nats.log")}
	f.nats.start(t)
	var err error
	testutil.WaitFor(t, 20*time.Second, "nats-server to listen", func() bool {
		c, derr := net.Dial("tcp", natsAddr)
		if derr == nil {
			c.Close()
		}
		return derr == nil
	})
	if f.nc, err = bus.Connect(f.natsURL, bus.WithName("chaos-driver")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.nc.Close)
	js, err := jetstream.New(f.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := bus.WaitJetStreamReady(ctx, js); err != nil {
		t.Fatal(err)
	}
	// The coordinator leader creates ADK_SIGNALS too; made here first so
	// a store node started before the first election finds it.
	if _, err := bus.EnsureSignalStream(ctx, js, bus.SignalStreamConfig{}); err != nil {
		t.Fatal(err)
	}
	f.cl = client.New(f.nc, 5*time.Second)

	agent := filepath.Join(dir, "agent.json")
	limit := ""
	if lim != nil {
		limit = fmt.Sprintf(`,"rate_limit":{"requests_per_minute":%d,"concurrent_requests":%d}`, lim.RPM, lim.Concurrent)
	}
	if err := os.WriteFile(agent, []byte(`{"schema_version":1,"name":"chaos","instruction":"Answer briefly.",
 "model":{"provider":"openai","model":"fake","base_url":"`+provider.srv.URL+`/v1","max_attempts":1,"timeout_ms":20000`+limit+`}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var tokens strings.Builder
	for _, p := range append(append([]string{}, chaosPrincipals...), ownerPrincipal, acctPrincipal) {
		sum := sha256.Sum256([]byte(chaosToken(p)))
		fmt.Fprintf(&tokens, "%s %s\n", hex.EncodeToString(sum[:]), p)
	}
	tokensFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokensFile, []byte(tokens.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	newProc := func(name string, metrics bool, args ...string) *chaosProc {
		p := &chaosProc{name: name, bin: adk, args: args, log: filepath.Join(dir, name+".log")}
		if metrics {
			addr := freePort(t)
			p.args = append(p.args, "--metrics-addr", addr)
			f.metrics[p] = addr
		}
		if len(extraEnv) > 0 {
			p.bin = "/usr/bin/env"
			p.args = append(append(append([]string{}, extraEnv...), adk), p.args...)
		}
		return p
	}
	var peers []string
	addrs, err := loopback.FreeAddrs(3) // one pick: never one port twice
	if err != nil {
		t.Fatal(err)
	}
	for i := range addrs {
		peers = append(peers, fmt.Sprintf("c%d=%s", i+1, addrs[i]))
	}
	for i := range 3 {
		id := fmt.Sprintf("c%d", i+1)
		p := newProc(id, false, "coordinator", "--id", id, "--data-dir", filepath.Join(dir, id), "--raft-addr", addrs[i],
			"--nats", f.natsURL, "--bootstrap", "--peers", strings.Join(peers, ","), "--workers", "w1,w2,w3", "--max-running-jobs", "8", "--log-level", "warn")
		p.start(t)
		f.coords = append(f.coords, p)
	}
	for i := range 2 {
		name := fmt.Sprintf("s%d", i+1)
		p := newProc(name, true, "store", "--name", name, "--data-dir", filepath.Join(dir, name), "--nats", f.natsURL,
			"--tokens", tokensFile, "--log-level", "warn")
		p.start(t)
		f.stores = append(f.stores, p)
	}
	testutil.WaitFor(t, 60*time.Second, "a coordinator leader", func() bool { return f.leader() >= 0 })

	hb, err := f.nc.SubscribeSync(bus.AllHeartbeatsSubject)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hb.Unsubscribe() }()
	for i := range 3 {
		id := fmt.Sprintf("w%d", i+1)
		p := newProc(id, true, "worker", "--id", id, "--nats", f.natsURL, "--capacity", "2", "--agent", "chaos="+agent, "--log-level", "warn")
		p.start(t)
		f.workers = append(f.workers, p)
	}
	f.rogue = newProc("rogue", true, "worker", "--id", "rogue", "--nats", f.natsURL, "--capacity", "2", "--agent", "chaos="+agent, "--log-level", "warn")
	f.rogue.start(t)
	// The allowlisted workers' first heartbeats: the leader knows them
	// before the jobs are submitted.
	seen := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("workers' heartbeats: saw %v", seen)
		}
		m, err := hb.NextMsg(200 * time.Millisecond)
		if err == nil && m.Subject != bus.HeartbeatSubjectPrefix+"rogue" {
			seen[strings.TrimPrefix(m.Subject, bus.HeartbeatSubjectPrefix)] = true
		}
	}
	return f
}

func chaosToken(principal string) string { return "chaos-token-" + principal + "-0123456789abcdef" }

// leader is the index of the coordinator the service names leader, or -1.
func (f *procFleet) leader() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	caps, err := f.cl.Capabilities(ctx)
	if err != nil || caps.Leader == "" {
		return -1
	}
	i, err := strconv.Atoi(strings.TrimPrefix(caps.Leader, "c"))
	if err != nil || i < 1 || i > len(f.coords) {
		return -1
	}
	return i - 1
}

// waitJob polls the jobs of scope until one exists and returns its id
// ("" after timeout).
func (f *procFleet) waitJob(scope string, timeout time.Duration) string {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); pauseFor(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		page, err := f.cl.ListJobs(ctx, scope, 10, "")
		cancel()
		if err == nil && len(page.Items) > 0 {
			return page.Items[0].JobID
		}
	}
	return ""
}

// metric reads one unlabelled series from a process's /metrics.
func (f *procFleet) metric(p *chaosProc, name string) (float64, error) {
	addr := f.metrics[p]
	hc := http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: no series %s", p.name, name)
}

// pauseFor waits d on the schedule's own clock (not synchronisation).
func pauseFor(d time.Duration) { time.Sleep(d) }

// chaosProcFault applies one fault drawn from rng and returns its record.
func (f *procFleet) fault(rng *rand.Rand) string {
	t := f.t
	down := time.Duration(200+rng.IntN(1300)) * time.Millisecond
	switch k := rng.IntN(6); k {
	case 0, 1: // the leader or a follower, killed -9 and restarted
		l := f.leader()
		i, kind := l, "leader"
		if k == 1 || l < 0 {
			i, kind = (max(l, 0)+1+rng.IntN(2))%3, "follower"
		}
		f.coords[i].signal(t, syscall.SIGKILL)
		pauseFor(down)
		f.coords[i].start(t)
		return fmt.Sprintf("kill %s c%d", kind, i+1)
	case 2: // a worker, killed -9 and restarted under its id
		w := rng.IntN(3)
		f.workers[w].signal(t, syscall.SIGKILL)
		pauseFor(down)
		f.workers[w].start(t)
		return fmt.Sprintf("kill worker w%d", w+1)
	case 3: // a worker stopped past its lease (WorkerTTL 5 s), then resumed
		w := rng.IntN(3)
		f.workers[w].signal(t, syscall.SIGSTOP)
		pauseFor(time.Duration(5500+rng.IntN(2000)) * time.Millisecond)
		f.workers[w].signal(t, syscall.SIGCONT)
		return fmt.Sprintf("stop worker w%d", w+1)
	case 4: // the NATS server, killed -9 and restarted
		f.nats.signal(t, syscall.SIGKILL)
		pauseFor(down)
		f.nats.start(t)
		return "kill nats n1"
	default: // a store node, killed -9 and restarted
		s := rng.IntN(2)
		f.stores[s].signal(t, syscall.SIGKILL)
		pauseFor(down)
		f.stores[s].start(t)
		return fmt.Sprintf("kill store s%d", s+1)
	}
}

// chaosEvalSet is a set of n single-turn cases with inputs unique to the
// run, so the provider's per-input count is per (case, sample).
func chaosEvalSet(id string, n int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"schema_version":2,"id":%q,"version":"1","cases":[`, id)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"c%03d","turns":[{"id":"t","input":"%s case %d","expected_response":"ok"}]}`, i, id, i)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func TestClusterChaosProcs(t *testing.T) {
	runs, seed, dir := chaosParams(t, 17)
	var total chaosTotals
	for r := range runs {
		s := seed + uint64(r)
		h := procChaosRun(t, s, dir, nil)
		total.add(h)
		// One line per run, so a batch stopped early still tells.
		var one chaosTotals
		one.add(h)
		t.Logf("chaos-procs run: seed %d: %s", s, one.String(1, s))
		if v := h.violations(); len(v) > 0 {
			total.failed++
			p := writeHistory(dir, "chaos-procs", h)
			t.Errorf("seed %d (replay: CHAOS_SEED=%d make chaos-procs): %v; history %s", s, s, v, p)
		}
	}
	t.Logf("chaos-procs: %s", total.String(runs, seed))
}

// procChaosRun runs one seeded schedule over a fresh fleet. hook, when
// set, runs after the jobs are submitted instead of the faults (the
// checker's own test breaks the run there).
func procChaosRun(t *testing.T, seed uint64, historyDir string, hook func(t *testing.T, f *procFleet, h *chaosHistory)) *chaosHistory {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	h := &chaosHistory{Seed: seed, Bound: 100 * time.Second, Tags: map[string]int{}, Jobs: map[string]string{}}
	t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
		// The run's data and logs: kept under the history directory when
		// the run breaks an invariant (or CHAOS_KEEP=1), removed otherwise.
		dir := filepath.Join(historyDir, fmt.Sprintf("chaos-procs-%d", seed))
		_ = os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if len(h.violations()) == 0 && os.Getenv("CHAOS_KEEP") == "" {
				_ = os.RemoveAll(dir)
			} else {
				t.Logf("seed %d: data and process logs kept in %s", seed, dir)
			}
		}()
		began := time.Now()
		phase := func(what string) { t.Logf("seed %d: %s at %.1fs", seed, what, time.Since(began).Seconds()) }
		provider := newChaosProvider(rng)
		defer provider.srv.Close()
		var env []string
		if b := os.Getenv("ADK_CHAOS_BREAK"); b != "" {
			env = []string{"ADK_CHAOS_BREAK=" + b}
		}
		h.Limit = chaosLimit(seed)
		f := startProcFleet(t, dir, provider, env, h.Limit)
		phase("fleet up")
		h.Provider = fmt.Sprintf("delay %v, %d‰ slow by %v, %d‰ failing", provider.delay, provider.slowP, provider.slow, provider.failP)
		if h.Limit != nil {
			h.Provider += fmt.Sprintf(", rate limit %d rpm, %d at once", h.Limit.RPM, h.Limit.Concurrent)
		}

		// The accounting publisher: this process's signals under acct,
		// through the same publisher the workers use, all run long.
		pub, err := bus.NewPublisher(f.nc, bus.PublisherConfig{Principal: acctPrincipal, BatchSize: 32, MaxInflightBatches: 4,
			MaxQueueEvents: 100_000, MaxAttempts: 30, RetryBaseDelay: 50 * time.Millisecond, RetryMaxDelay: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		stopPub, pubDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(pubDone)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stopPub:
					return
				case <-tick.C:
				}
				for j := range 4 {
					_ = pub.Enqueue(spanN(int(seed%1000)*1_000_000+i*4+j, 7, 50)) // refusals are counted
				}
			}
		}()
		defer func() {
			select {
			case <-stopPub:
			default:
				close(stopPub)
			}
			<-pubDone
		}()

		cases := 30 + rng.IntN(20)
		opts := evalengine.DefaultOptions()
		opts.Samples = 1
		opts.TimeoutMS = 90_000
		optsDoc, err := evalengine.EncodeOptions(opts)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for _, p := range chaosPrincipals {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			j, err := f.cl.Submit(ctx, p, api.SubmitRequest{Set: chaosEvalSet(fmt.Sprintf("chaos-%d-%s", seed, p), cases), Agent: "chaos", Options: optsDoc})
			cancel()
			if err != nil {
				t.Fatalf("submit %s: %v", p, err)
			}
			h.Jobs[p] = j.JobID
		}
		// Owner death: an `adk eval submit` process owns a third job and is
		// killed -9 while it runs; its job must stop calling the provider.
		var owner *chaosProc
		ownerSet := fmt.Sprintf("chaos-%d-%s", seed, ownerPrincipal)
		if hook == nil {
			setFile := filepath.Join(dir, "owned.json")
			if err := os.WriteFile(setFile, chaosEvalSet(ownerSet, cases), 0o600); err != nil {
				t.Fatal(err)
			}
			owner = &chaosProc{name: "owner", bin: f.adk, log: filepath.Join(dir, "owner.log"),
				args: []string{"eval", "submit", "--nats", f.natsURL, "--scope", ownerPrincipal, "--agent", "chaos", "--eval-set", setFile}}
			owner.start(t)
			if id := f.waitJob(ownerPrincipal, 30*time.Second); id != "" {
				h.Jobs[ownerPrincipal] = id
				// Killed while its tasks call the provider.
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); pauseFor(100 * time.Millisecond) {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					j, err := f.cl.Status(ctx, ownerPrincipal, id)
					cancel()
					if err == nil && (j.Progress.Dispatched > 0 || j.Phase.Terminal()) {
						break
					}
				}
				pauseFor(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
				owner.signal(t, syscall.SIGKILL)
				h.OwnerKilledAt = time.Since(start)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				if j, err := f.cl.Status(ctx, ownerPrincipal, id); err == nil {
					t.Logf("seed %d: owner killed at %.1fs: its job %s, %d/%d tasks dispatched, %d done", seed, h.OwnerKilledAt.Seconds(), j.Phase, j.Progress.Dispatched, cases, j.Progress.Done)
				}
				cancel()
			} else {
				owner.signal(t, syscall.SIGKILL)
				t.Logf("seed %d: the owner process submitted no job: %v", seed, owner.tail(5))
			}
		}
		ownerKill := start.Add(h.OwnerKilledAt)
		n := 2 + rng.IntN(3)
		if hook != nil {
			hook(t, f, h)
			n = 0
		}
		for range n {
			pauseFor(time.Duration(200+rng.IntN(1500)) * time.Millisecond)
			at := time.Now()
			fault := f.fault(rng)
			t.Logf("seed %d: %s at %.1fs", seed, fault, time.Since(start).Seconds())
			h.Faults = append(h.Faults, fault)
			// A leader failover or NATS outage in the owner's last
			// seconds delays the cancel; the owner gate must still stop
			// new calls in time (held to the bound, reported apart).
			if h.OwnerKilledAt > 0 && (strings.HasPrefix(fault, "kill leader") || strings.HasPrefix(fault, "kill nats")) &&
				!at.Before(ownerKill.Add(-ownerStopBound)) && at.Before(ownerKill.Add(2*ownerStopBound)) {
				h.OwnerDisturbed = true
			}
		}

		// Every job terminal within the bound.
		terminal := map[string]bool{}
		for len(terminal) < len(h.Jobs) && time.Since(start) < h.Bound {
			for p, id := range h.Jobs {
				if terminal[p] {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				j, err := f.cl.Status(ctx, p, id)
				cancel()
				if err == nil && j.Phase.Terminal() {
					terminal[p] = true
					h.Phases = append(h.Phases, string(j.Phase))
					if j.Reason != "" {
						h.Reasons = append(h.Reasons, j.Reason)
					}
					if string(j.Phase) != "completed" {
						h.Reason = j.Reason
						h.Phase = string(j.Phase)
					}
				}
			}
			pauseFor(100 * time.Millisecond)
		}
		h.Elapsed = time.Since(start)
		phase("jobs terminal")
		if h.Phase == "" {
			h.Phase = "completed"
		}
		if len(terminal) < len(h.Jobs) {
			h.Phase = "running"
		}
		for p, id := range h.Jobs {
			if !terminal[p] {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			res, err := f.cl.Result(ctx, p, id)
			cancel()
			if err != nil {
				continue // not completed
			}
			var r evalengine.Result
			if err := json.Unmarshal(res, &r); err != nil {
				t.Fatal(err)
			}
			h.Expected += cases
			for _, cs := range r.Cases {
				for _, s := range cs.Samples {
					h.Samples++
					if s.Status == evalengine.SampleStatusError {
						if s.Error == "" {
							h.Untyped++
						}
						h.Tags[s.Error]++
					}
				}
			}
		}
		if last := provider.lastCall(ownerSet + " "); h.OwnerKilledAt > 0 && !last.IsZero() {
			h.OwnerStop, h.OwnerStopSet = last.Sub(ownerKill), true
		}
		h.Executions = provider.executions()
		if h.Limit != nil {
			provider.limitCalls(h.Limit)
		}
		if v, err := f.metric(f.rogue, "adk_worker_executed_tasks_total"); err == nil {
			h.Rogue = int(v)
		}

		// Signal accounting: drain the publisher, stop the workers (their
		// traces drain at SIGTERM), then both store nodes apply the whole
		// stream.
		close(stopPub)
		<-pubDone
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		derr := pub.Drain(ctx)
		cancel()
		ps := pub.Stats()
		h.Signals = signalAccount{Accepted: ps.Accepted + ps.Rejected + ps.DroppedNewest + ps.TooLarge, Exported: ps.Exported,
			Dropped: ps.ExportFailed + ps.PermanentFailures + ps.Rejected + ps.DroppedNewest + ps.DroppedOldest + ps.TooLarge + ps.ClosedDropped + ps.RetryDropped,
			Queued:  uint64(ps.QueueEvents)}
		if derr != nil {
			t.Logf("seed %d: accounting publisher drain: %v (%+v)", seed, derr, ps)
		}
		phase("publisher drained")
		termAll(append(append([]*chaosProc{}, f.workers...), f.rogue), 20*time.Second)
		phase("workers stopped")
		for _, s := range f.stores {
			if !s.running() {
				s.start(t) // a fault left it down: it must catch up
			}
		}
		// Every store node catches up (lag 0: nothing pending, nothing
		// unacked) within a bound; one that does not is stuck.
		for deadline := time.Now().Add(30 * time.Second); ; pauseFor(200 * time.Millisecond) {
			var lags []string
			for _, s := range f.stores {
				if lag, err := f.metric(s, "adk_store_lag_messages"); err != nil || lag != 0 {
					lags = append(lags, fmt.Sprintf("%s lag %v (%v)", s.name, lag, err))
				}
			}
			if len(lags) == 0 {
				break
			}
			if time.Now().After(deadline) {
				h.StoreStuck = strings.Join(lags, ", ")
				break
			}
		}
		phase("stores caught up")
		h.Leaks, h.OwnEvents = principalLeaks(t, f.nc, h.Jobs)

		if slow := termAll(f.stores, 20*time.Second); len(slow) > 0 {
			t.Errorf("store nodes %v did not stop on SIGTERM", slow)
		}
		h.Signals.Stored, h.Signals.Evicted, h.StoreDiff = compareStores(t, filepath.Join(dir, "s1"), filepath.Join(dir, "s2"))
		phase("stores compared")
		if len(h.violations()) > 0 {
			h.Logs = map[string][]string{}
			for _, p := range f.all() {
				h.Logs[p.name] = p.tail(40)
			}
		}
	})
	return h
}

// principalLeaks asks the store nodes, with each principal's token, for
// every other principal's job: any event answered is a leak. ownEvents
// counts what each principal reads of its own job (the check is only
// meaningful when that is not zero).
func principalLeaks(t *testing.T, nc *nats.Conn, jobs map[string]string) (leaks []string, ownEvents int) {
	t.Helper()
	for reader := range jobs {
		for owner, job := range jobs {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			reply, err := tracenode.Query(ctx, nc, tracenode.QueryRequest{Token: chaosToken(reader), Selector: map[string]string{"job_id": job}, Limit: 100})
			cancel()
			if err != nil {
				t.Fatalf("query %s as %s: %v", job, reader, err)
			}
			if reply.Error != nil {
				t.Fatalf("query %s as %s: %s %s", job, reader, reply.Error.Code, reply.Error.Detail)
			}
			n := 0
			if reply.Page != nil {
				n = len(reply.Page.Events)
			}
			if reader == owner {
				ownEvents += n
			} else if n > 0 {
				leaks = append(leaks, fmt.Sprintf("%s read %d events of %s's job", reader, n, owner))
			}
		}
	}
	return leaks, ownEvents
}

// compareStores opens two stopped store nodes' directories and compares
// their state (status counters and every principal's pages); it returns
// the accounting principal's stored events and the evictions.
func compareStores(t *testing.T, a, b string) (stored, evicted uint64, diff string) {
	t.Helper()
	open := func(dir string) *tracestore.Store {
		st, err := tracestore.Open(tracestore.Config{Dir: dir, Small: true})
		if err != nil {
			t.Fatalf("open %s: %v", dir, err)
		}
		return st
	}
	sa, sb := open(a), open(b)
	defer sa.Close()
	defer sb.Close()
	ta, tb := sa.Status(), sb.Status()
	switch {
	case ta.AppliedSequence != tb.AppliedSequence:
		diff = fmt.Sprintf("applied sequence %d vs %d", ta.AppliedSequence, tb.AppliedSequence)
	case ta.Counters != tb.Counters || ta.Events != tb.Events:
		diff = fmt.Sprintf("status %+v (%d events) vs %+v (%d events)", ta.Counters, ta.Events, tb.Counters, tb.Events)
	default:
		for _, p := range append(append([]string{}, chaosPrincipals...), ownerPrincipal, acctPrincipal) {
			if string(allPages(t, sa, p, nil)) != string(allPages(t, sb, p, nil)) {
				diff = "pages of " + p + " differ"
				break
			}
		}
	}
	return uint64(sa.PrincipalStatus(acctPrincipal).Events), ta.Counters.CapacityEvictions + ta.Counters.RetentionEvictions, diff
}

// chaosParams reads CHAOS_RUNS, CHAOS_SEED and CHAOS_HISTORY_DIR: without
// CHAOS_RUNS one run of the fixed seed ciSeed (CI), with it new seeds.
func chaosParams(t *testing.T, ciSeed uint64) (runs int, seed uint64, dir string) {
	runs = 1
	seed = ciSeed
	if s := os.Getenv("CHAOS_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_RUNS=%q: want a positive integer", s)
		}
		runs = n
		seed = uint64(time.Now().UnixNano())
	}
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want an unsigned integer", s)
		}
		seed = n
	}
	if dir = os.Getenv("CHAOS_HISTORY_DIR"); dir == "" {
		dir = t.TempDir()
	}
	return runs, seed, dir
}

func writeHistory(dir, prefix string, h *chaosHistory) string {
	b, _ := json.MarshalIndent(h, "", " ")
	p := filepath.Join(dir, fmt.Sprintf("%s-%d.json", prefix, h.Seed))
	if err := os.MkdirAll(dir, 0o700); err == nil {
		_ = os.WriteFile(p, b, 0o600)
	}
	return p
}

// TestClusterChaosProcsCatchesBrokenRuns holds the checker to a real run
// broken four ways, so a green run means something: workers built with
// the chaosbreak tag and ADK_CHAOS_BREAK=dedupe run a redelivered task
// message again (this process re-publishes each task message once), and
// with ADK_CHAOS_BREAK=ratelimit call the provider without waiting for
// the fleet's rate limit (the run's seed declares one), the signals
// published while both store nodes are down are purged from ADK_SIGNALS
// before they apply them, and the coordinators are stopped for the rest
// of the run. The checker must report a duplicate execution, calls over
// the rate limit, a lost signal and a hung job.
func TestClusterChaosProcsCatchesBrokenRuns(t *testing.T) {
	t.Setenv("ADK_CHAOS_BREAK", "dedupe,ratelimit")
	if chaosLimit(1) == nil {
		t.Fatal("seed 1 declares no rate limit")
	}
	_, _, dir := chaosParams(t, 0)
	h := procChaosRun(t, 1, dir, func(t *testing.T, f *procFleet, h *chaosHistory) {
		h.Bound = 12 * time.Second
		f.provider.mu.Lock()
		f.provider.delay, f.provider.failP, f.provider.slowP = 700*time.Millisecond, 0, 0
		f.provider.mu.Unlock()
		// Duplicates: every task message once more, as a NATS server
		// that forgot an ack would deliver it.
		js, err := jetstream.New(f.nc)
		if err != nil {
			t.Fatal(err)
		}
		replays := make(chan *nats.Msg, 1024)
		sub, err := f.nc.ChanSubscribe(bus.AllTasksSubject, replays)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		// Lost signals: both store nodes down while the publisher
		// exports, then what they missed purged from the stream.
		for _, s := range f.stores {
			s.signal(t, syscall.SIGKILL)
		}
		deadline := time.Now().Add(3 * time.Second)
		replayed := 0
		for time.Now().Before(deadline) || replayed == 0 {
			select {
			case m := <-replays:
				if m.Header.Get("Chaos-Replay") != "" {
					continue
				}
				r := nats.NewMsg(m.Subject)
				r.Data, r.Header = m.Data, nats.Header{"Chaos-Replay": []string{"1"}}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := js.PublishMsg(ctx, r)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				replayed++
			case <-time.After(100 * time.Millisecond):
				if time.Now().After(deadline.Add(20 * time.Second)) {
					t.Fatal("no task message to replay")
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, bus.SignalStreamName)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Purge(ctx); err != nil {
			t.Fatal(err)
		}
		for _, s := range f.stores {
			s.start(t)
		}
		// A hung job: no coordinator runs again before the bound.
		for _, c := range f.coords {
			c.signal(t, syscall.SIGSTOP)
		}
		h.Faults = append(h.Faults, fmt.Sprintf("replay tasks %d", replayed), "purge signals", "stop coordinators")
	})
	v := strings.Join(h.violations(), "\n")
	for _, want := range []string{"duplicate:", "rate limit:", "lost signal:", "hung:"} {
		if !strings.Contains(v, want) {
			t.Errorf("the checker missed the injected %q; it reported:\n%s", strings.TrimSuffix(want, ":"), v)
		}
	}
}
