package coordinator

import (
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/fadcedab/adk/coordinator/api"
)

// BenchmarkColdCasePage: what the developer API's case page of the last
// (done) case asks of a coordinator that has nothing of the job in
// memory (a restarted node), for a completed records job of
// ADK_BENCH_CASES cases (default 10,000; one sample a case) whose result
// tail the store holds: the stream's header line, its summary line, the
// case's line and the case's sample line (result_samples), each page
// from a new service. Besides the time it reports the process's CPU and
// minor page faults per page.
func BenchmarkColdCasePage(b *testing.B) {
	n := 10_000
	if v := os.Getenv("ADK_BENCH_CASES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	f, s := newFSM(b)
	j := cacheJob(b, f, n, 1, nil)
	completeRecordsJob(b, f, s, j)
	node := &Node{store: s, fsm: f}
	if err := (&service{n: node, digests: map[string]string{}, tails: newTailCache(TailsAtCompletion)}).buildTail("eval-a"); err != nil {
		b.Fatal(err)
	}
	lines := 1 + int64(n) + int64(n) + 1
	// The last case whose sample is its record's (cacheJob loses every
	// fifth task: its sample line is an error sample built from the set).
	ci := n - 1
	for ci%5 == 4 || ci == 1 {
		ci--
	}
	read := func(b *testing.B, req *api.Request, op func(*api.Request) *api.Reply) {
		req.Scope, req.JobID = "app", "eval-a"
		if rep := op(req); rep.Err != nil || len(rep.Result) == 0 {
			b.Fatalf("%+v: %v", req, rep.Err)
		}
	}
	// Set up once (the job takes seconds); the reads are the sub-benchmark.
	b.Run("last", func(b *testing.B) {
		b.ReportAllocs()
		var before, after syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		b.ResetTimer()
		for range b.N {
			svc := &service{n: node, digests: map[string]string{}, tails: newTailCache(TailsAtCompletion)}
			read(b, &api.Request{Offset: 0, Limit: 1, Format: api.ResultJSONL}, svc.result)
			read(b, &api.Request{Offset: lines - 1, Limit: 1, Format: api.ResultJSONL}, svc.result)
			read(b, &api.Request{Offset: lines - 2 - int64(n-1-ci), Limit: 1, Format: api.ResultJSONL}, svc.result)
			read(b, &api.Request{Tasks: []int{ci}}, svc.resultSamples)
		}
		b.StopTimer()
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
		b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/page")
		b.ReportMetric(float64(after.Minflt-before.Minflt)/float64(b.N), "minflt/page")
	})
}
