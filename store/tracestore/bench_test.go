package tracestore

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchSpan is a realistic end span: ~400 bytes of JSON.
func benchSpan(i, runs int) []byte {
	b, _ := json.Marshal(map[string]any{
		"schema_version": 2, "signal": "span", "phase": "end", "name": "gen_ai.chat", "kind": "client",
		"trace_id": fmt.Sprintf("%032x", i/8+1), "span_id": fmt.Sprintf("%016x", i+1), "trace_flags": 1,
		"start_time_unix_nano": int64(i) * 1000, "end_time_unix_nano": int64(i)*1000 + 500, "duration_nano": 500, "status": "ok",
		"attributes": map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
			"gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 40,
			"run_id": "run-" + strconv.Itoa(i%runs)},
	})
	return b
}

// fillStore applies n spans in batches of 256, as a store node would.
func fillStore(tb testing.TB, s *Store, n, runs int) {
	tb.Helper()
	const batch = 256
	recs := make([]Record, 0, batch)
	seq := s.AppliedSeq()
	for i := 0; i < n; i++ {
		recs = append(recs, Record{Kind: KindObservability, Data: benchSpan(i, runs)})
		if len(recs) == batch || i == n-1 {
			seq++
			if _, err := s.Apply(Batch{Seq: seq, TimeMS: int64(seq), Principal: "alice", Records: recs}); err != nil {
				tb.Fatal(err)
			}
			recs = recs[:0]
		}
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// rssMiB reads a resident-set field of /proc/self/status: VmRSS (all),
// RssAnon (heap and other private memory) or RssFile (mapped files:
// Badger's mmapped tables and value log, reclaimable page cache).
func rssMiB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// dirBytes is the disk space a directory uses (allocated blocks: Badger's
// files are sparse).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// BenchmarkPageQuery measures a 100-event page of one run (100 runs
// interleaved, so a page spans ~40 index groups at every size) at 10k and, with
// ADK_BENCH_LARGE=1, 1M stored events. The store is filled once per size
// (in the parent benchmark, which Go runs once), then queried.
func BenchmarkPageQuery(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv("ADK_BENCH_LARGE") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		dir := b.TempDir()
		s, err := Open(Config{Dir: dir, Options: Options{MaxEvents: MaxEventsLimit, MaxEventsPerPrincipal: MaxEventsLimit,
			MaxBytes: MaxBytesLimit, MaxBytesPerPrincipal: MaxBytesLimit, Retention: MaxRetention}})
		if err != nil {
			b.Fatal(err)
		}
		const runs = 100
		start := time.Now()
		fillStore(b, s, n, runs)
		fill := time.Since(start)
		var lsm []string
		for _, l := range s.db.Levels() {
			if l.NumTables > 0 {
				lsm = append(lsm, fmt.Sprintf("L%d:%d", l.Level, l.NumTables))
			}
		}
		b.Logf("events=%d: LSM tables after fill %v", n, lsm)
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			if path := os.Getenv("ADK_BENCH_CPUPROFILE"); path != "" { // the queries only, not the fill
				if f, err := os.Create(fmt.Sprintf("%s.%d", path, n)); err == nil {
					_ = pprof.StartCPUProfile(f)
					defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				p, err := s.Query("alice", Selector{"run_id": "run-" + strconv.Itoa(i%runs)}, QueryOptions{Limit: 100})
				lat = append(lat, time.Since(t0))
				if err != nil || len(p.Events) == 0 {
					b.Fatalf("%v %d", err, len(p.Events))
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "p50-µs")
			b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(rssMiB("VmRSS"), "rss-MiB")
			b.ReportMetric(rssMiB("RssAnon"), "rss-anon-MiB")
			b.ReportMetric(rssMiB("RssFile"), "rss-file-MiB")
			if path := os.Getenv("ADK_BENCH_HEAPPROFILE"); path != "" {
				if f, err := os.Create(fmt.Sprintf("%s.%d", path, n)); err == nil {
					_ = pprof.WriteHeapProfile(f)
					_ = f.Close()
				}
			}
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
			b.ReportMetric(float64(n)/fill.Seconds(), "fill-events/s")
		})
		_ = s.Close()
		b.Logf("events=%d: disk %.0f B/event after close", n, float64(dirBytes(dir))/float64(n))
	}
}

// BenchmarkPrepare measures the pure half of apply for one 256-span batch
// (bounded decode, projection, record encoding, selector hashes): the
// store node's decode CPU per message, without Badger.
func BenchmarkPrepare(b *testing.B) {
	s, err := Open(Config{InMemory: true, Small: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := make([]Record, 256)
	for i := range recs {
		recs[i] = Record{Kind: KindObservability, Data: benchSpan(i, 4)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := s.Prepare(Batch{Seq: uint64(i + 1), TimeMS: 1, Principal: "alice", Records: recs})
		if p.recs[0].err != nil {
			b.Fatal(p.recs[0].err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs))/1000, "µs/span")
}
