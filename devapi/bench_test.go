package devapi_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/internal/testutil"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/tracenode"
	"github.com/fadcedab/adk/testcluster"
	"github.com/nats-io/nats.go/jetstream"
)

// latencies collects one sub-benchmark's call times and reports their
// p50 and p99 in microseconds (the goal is a p50, not a mean).
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(l[len(l)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// timed runs call b.N times and reports its latency percentiles.
func timed(b *testing.B, call func() error) {
	l := make(latencies, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		l = append(l, time.Since(start))
	}
	b.StopTimer()
	l.report(b)
}

// httpGet is one authenticated GET whose body is read and dropped; the
// client keeps its connection alive like a dashboard polling would.
func httpGet(cl *http.Client, url, token string) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("authorization", "Bearer "+token)
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return nil
}

// BenchmarkGatewayJobStatus: a job's status through the gateway (HTTP on
// 127.0.0.1 → coordinator over NATS → JSON) against the same call made
// directly with the Go client over NATS, in one run on one cluster (3
// NATS nodes, 1 coordinator). Goal: gateway p50 under 2 ms.
func BenchmarkGatewayJobStatus(b *testing.B) {
	e := startEnv(b, testcluster.EvalOptions{})
	j, err := e.cl.Submit(context.Background(), "team-a", api.SubmitRequest{Set: testcluster.EvalSet("bench", 4), Agent: "scripted"})
	if err != nil {
		b.Fatal(err)
	}
	e.c.WaitJob(e.cl, "team-a", j.JobID, 30*time.Second, "completed")
	hc := &http.Client{}
	url := e.base + "/dev/v1/evaluation/jobs/" + j.JobID
	b.Run("gateway", func(b *testing.B) { timed(b, func() error { return httpGet(hc, url, tokAlice) }) })
	b.Run("nats", func(b *testing.B) {
		timed(b, func() error {
			_, err := e.cl.Status(context.Background(), "team-a", j.JobID)
			return err
		})
	})
}

// BenchmarkGatewayCasesPage: a page of 100 case rows of a stored result
// of ADK_BENCH_CASES cases (default 10,000; testcluster.EvalSet, half of
// them failing) through the gateway: the first page failures first, and
// a page in case order from the middle. Besides the latency it reports
// the CPU and minor page faults of the whole process per page (the
// gateway and the coordinator serving its stream are both in it).
func BenchmarkGatewayCasesPage(b *testing.B) {
	n := 10_000
	if v := os.Getenv("ADK_BENCH_CASES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	e := startEnv(b, testcluster.EvalOptions{NATSNodes: 1, Workers: []string{"w0", "w1"}, Capacity: 64})
	slow := client.New(e.nc, 2*time.Minute)
	j, err := slow.Submit(context.Background(), "team-a", api.SubmitRequest{Set: testcluster.EvalSet("bench-cases", n), Agent: "scripted"})
	if err != nil {
		b.Fatal(err)
	}
	e.c.WaitJob(e.cl, "team-a", j.JobID, 10*time.Minute, "completed")
	hc := &http.Client{}
	for _, q := range []struct{ name, query string }{
		{"failures_first-0", "order=failures_first&offset=0&limit=100"},
		{"case-middle", "order=case&offset=" + strconv.Itoa(n/2) + "&limit=100"},
		// The last page failures first: passed cases, after every
		// failed one.
		{"failures_first-last", "order=failures_first&offset=" + strconv.Itoa(n-100) + "&limit=100"},
	} {
		url := e.base + "/dev/v1/evaluation/jobs/" + j.JobID + "/cases?" + q.query
		b.Run(q.name, func(b *testing.B) {
			var before, after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			timed(b, func() error { return httpGet(hc, url, tokAlice) })
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/page")
			b.ReportMetric(float64(after.Minflt-before.Minflt)/float64(b.N), "minflt/page")
		})
	}
}

// BenchmarkGatewayCasePage: one case of a stored result of
// ADK_BENCH_CASES cases (default 10,000; testcluster.EvalSet, one sample
// a case) with its samples through the gateway: the last case, whose
// sample comes last in the stream, and the first. Each is read once
// before timing (a node's first read of a job may verify its records and
// aggregate its cases). Then "cold": the coordinator is restarted before
// each timed read (untimed), so every read is a node's first read of the
// job with nothing in memory. Besides the latency it reports the CPU and
// minor page faults of the whole process per page and the stream bytes
// the gateway read per page; and the CPU of the whole process in the 3 s
// after the job completed (work a node does for the job in the
// background, before any read). ADK_BENCH_COLD bounds the cold reads
// (default 5: each restarts the coordinator); ADK_BENCH_TAILS is the
// coordinator's result tails setting (coordinator.ResultTails; empty:
// the default, at completion).
func BenchmarkGatewayCasePage(b *testing.B) {
	n := 10_000
	if v := os.Getenv("ADK_BENCH_CASES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	e := startEnv(b, testcluster.EvalOptions{NATSNodes: 1, Workers: []string{"w0", "w1"}, Capacity: 64,
		ResultTails: coordinator.ResultTails(os.Getenv("ADK_BENCH_TAILS"))})
	slow := client.New(e.nc, 2*time.Minute)
	j, err := slow.Submit(context.Background(), "team-a", api.SubmitRequest{Set: testcluster.EvalSet("bench-case", n), Agent: "scripted"})
	if err != nil {
		b.Fatal(err)
	}
	e.c.WaitJob(e.cl, "team-a", j.JobID, 10*time.Minute, "completed")
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	time.Sleep(3 * time.Second) // a measuring window, not a synchronisation
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	bg := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
	hc := &http.Client{}
	for _, q := range []struct {
		name string
		ci   int
	}{{"last", n - 1}, {"first", 0}} {
		url := e.base + "/dev/v1/evaluation/jobs/" + j.JobID + "/cases/" + strconv.Itoa(q.ci)
		if err := httpGet(hc, url, tokAlice); err != nil {
			b.Fatal(err)
		}
		b.Run(q.name, func(b *testing.B) {
			var before, after syscall.Rusage
			read := e.srv.StreamBytesRead()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			timed(b, func() error { return httpGet(hc, url, tokAlice) })
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/page")
			b.ReportMetric(float64(after.Minflt-before.Minflt)/float64(b.N), "minflt/page")
			b.ReportMetric(float64(e.srv.StreamBytesRead()-read)/float64(b.N), "stream-B/page")
			b.ReportMetric(float64(bg)/1e6, "bg-cpu-ms")
		})
	}
	url := e.base + "/dev/v1/evaluation/jobs/" + j.JobID + "/cases/" + strconv.Itoa(n-1)
	b.Run("cold-last", func(b *testing.B) {
		var cpu time.Duration
		var flt int64
		l := make(latencies, 0, b.N)
		read := int64(0)
		// Each read restarts the coordinator: ADK_BENCH_COLD reads at
		// most (default 5), whatever -benchtime asks.
		reads := 5
		if v := os.Getenv("ADK_BENCH_COLD"); v != "" {
			var err error
			if reads, err = strconv.Atoi(v); err != nil {
				b.Fatal(err)
			}
		}
		reads = max(1, min(b.N, reads))
		for range reads {
			e.c.StopCoordinator(0)
			e.c.StartCoordinator(0, false)
			e.c.WaitLeader(time.Minute)
			e.c.WaitJob(e.cl, "team-a", j.JobID, time.Minute, "completed") // applied here
			var before, after syscall.Rusage
			r0 := e.srv.StreamBytesRead()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			start := time.Now()
			if err := httpGet(hc, url, tokAlice); err != nil {
				b.Fatal(err)
			}
			l = append(l, time.Since(start))
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			read += e.srv.StreamBytesRead() - r0
			cpu += time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			flt += after.Minflt - before.Minflt
		}
		l.report(b)
		b.ReportMetric(float64(cpu.Microseconds())/float64(reads), "cpu-µs/page")
		b.ReportMetric(float64(flt)/float64(reads), "minflt/page")
		b.ReportMetric(float64(read)/float64(reads), "stream-B/page")
	})
}

// BenchmarkGatewayTracePage: a 100-event trace page through the gateway
// against the same query sent directly on adk.trace.v1.query. Goal:
// gateway p50 under 2 ms.
func BenchmarkGatewayTracePage(b *testing.B) {
	e := startEnv(b, testcluster.EvalOptions{})
	pub, err := bus.NewPublisher(e.nc, bus.PublisherConfig{Principal: "alice"})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	for i := range 100 {
		if err := pub.Enqueue(span("0af7651916cd43dd8448eb211c80319c", "run-b", i)); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := pub.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	js, _ := jetstream.New(e.nc)
	st, _ := js.Stream(ctx, bus.SignalStreamName)
	info, _ := st.Info(ctx)
	if err := e.node.Store().WaitApplied(ctx, info.State.LastSeq); err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{}
	url := e.base + "/dev/v1/traces?run_id=run-b&limit=100"
	if a := do(b, e.base, "GET", "/dev/v1/traces?run_id=run-b&limit=100", tokAlice, nil); len(decode[devapi.TracePage](b, a).Events) != 100 {
		b.Fatalf("page: %s", a.body)
	}
	b.Run("gateway", func(b *testing.B) { timed(b, func() error { return httpGet(hc, url, tokAlice) }) })
	b.Run("nats", func(b *testing.B) {
		zero := uint64(0)
		req := tracenode.QueryRequest{Token: tokAlice, Selector: map[string]string{"run_id": "run-b"}, AfterCursor: &zero, Limit: 100}
		timed(b, func() error {
			r, err := tracenode.Query(context.Background(), e.nc, req)
			if err == nil && len(r.Page.Events) != 100 {
				err = fmt.Errorf("%d events", len(r.Page.Events))
			}
			return err
		})
	})
}

// BenchmarkGatewaySSE500: 500 clients follow one running job's event
// stream through a real `adk api` process (the binary, against the
// cluster's NATS); reported: the gateway's resident set while the 500
// streams are open (peak VmHWM, Linux) and the events each client got.
// Goal: under 100 MiB.
func BenchmarkGatewaySSE500(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc for the gateway's RSS")
	}
	const clients = 500
	e := startEnv(b, testcluster.EvalOptions{Agent: &testcluster.ScriptedAgent{TurnDelay: 40 * time.Millisecond}, Capacity: 4})
	bin := testutil.Binary(b, "github.com/fadcedab/adk/cmd/adk")
	dir := b.TempDir()
	sum := sha256.Sum256([]byte(tokAlice))
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(hex.EncodeToString(sum[:])+" alice scopes=team-a\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	gw := exec.Command(bin, "api", "--nats", e.c.CoordURL(), "--tokens", tokens, "--http-addr", "127.0.0.1:0", "--no-ui")
	stdout, err := gw.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	gw.Stderr = os.Stderr
	if err := gw.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = gw.Process.Kill()
		_ = gw.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	base := ""
	for base == "" && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "adk api: "); ok {
			base = strings.TrimSuffix(strings.Fields(u)[0], "/dev/v1/")
		}
	}
	if base == "" {
		b.Fatal("adk api printed no address")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	idle := rssKiB(b, gw.Process.Pid, "VmRSS")
	b.ResetTimer()
	for range b.N {
		a := do(b, base, "POST", "/dev/v1/evaluation/jobs", tokAlice, submitBody(b, testcluster.EvalSet("sse", 300), ""))
		if a.status != 202 {
			b.Fatalf("submit: %d %s", a.status, a.body)
		}
		job := decode[evalrecord.Job](b, a)
		var wg sync.WaitGroup
		var events, ended, open atomic.Int64
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, end := followEvents(base+"/dev/v1/evaluation/jobs/"+job.JobID+"/events", &open)
				events.Add(int64(n))
				if end {
					ended.Add(1)
				}
			}()
		}
		// Sample the gateway's RSS while the streams are open.
		var peakOpen int64
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		tick := time.NewTicker(100 * time.Millisecond)
	wait:
		for {
			select {
			case <-done:
				break wait
			case <-tick.C:
				if open.Load() == clients {
					peakOpen = max(peakOpen, rssKiB(b, gw.Process.Pid, "VmRSS"))
				}
			}
		}
		tick.Stop()
		if ended.Load() != clients {
			b.Fatalf("%d of %d streams saw the end", ended.Load(), clients)
		}
		b.ReportMetric(float64(events.Load())/clients, "events/client")
		b.ReportMetric(float64(peakOpen)/1024, "rss-open-MiB")
	}
	b.StopTimer()
	b.ReportMetric(float64(idle)/1024, "rss-idle-MiB")
	b.ReportMetric(float64(rssKiB(b, gw.Process.Pid, "VmHWM"))/1024, "rss-peak-MiB")
}

// followEvents reads one event stream to its end: the events it got and
// whether it saw "end". open counts streams whose headers arrived.
func followEvents(url string, open *atomic.Int64) (int, bool) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("authorization", "Bearer "+tokAlice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	open.Add(1)
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "event: end":
			return n + 1, true
		case strings.HasPrefix(line, "event: "):
			n++
		}
	}
	return n, false
}

// rssKiB reads a /proc/PID/status field in KiB.
func rssKiB(b *testing.B, pid int, field string) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
