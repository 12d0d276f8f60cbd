//go:build linux

// Command evalbench is the driver behind `make bench-eval`: it measures
// `adk eval run` through the built binary, as issue 5 asks.
//
//  1. Engine overhead: a zero-latency scripted agent (one tool call and a
//     final answer per turn), 100 cases × 100 samples = 10,000 samples.
//     Goal: under 2 s wall time in total.
//  2. Throughput against a local OpenAI-compatible server (openaifake)
//     answering after 200 ms: 1,000 and 5,000 single-turn samples at
//     concurrency 64 and 256. Goals: within 10% of the Little's-law bound
//     (concurrency / 0.2 s), under 1 ms CPU per sample, peak RSS under
//     150 MiB at 5,000 samples.
//  3. Tracing (issue 13): the 5,000-sample run at concurrency 256 and the
//     scripted JSON run again with ADK_TRACING=off, in the same run (A/B):
//     tracing on with no exporter must keep ≥95% of the untraced
//     throughput; the CPU/sample column is the traced sample's CPU.
//  4. The response cache (issue 16): 1,000 calls against the 200 ms fake
//     with --cache, then the same run again, which must make no call and
//     finish under 1 s.
//  5. A big set (issue 19): 100,000 single-turn cases against the fake
//     answering at once, --format jsonl (samples streamed out, only case
//     aggregates kept); the peak RSS is the figure. -big=false skips it.
//     Then the same set in every other format (openai-100k-FORMAT): each
//     result is over one 16 MiB document, so the run streams and renders
//     its report from the stream (html: one bounded page); and adk eval
//     report of the kept stream in every format (report-100k-FORMAT).
//     annotations is left out: by contract it holds at most 10,000 cases.
//     The peak RSS of each is the figure: it must not grow with the set.
//     A build that cannot report past one document shows FAILED.
//  6. adk eval compare of a 100,000-case jsonl result with itself, its
//     case ids 64 bytes long (compare-100k-json, compare-100k-markdown):
//     the json comparison is over one 16 MiB document, the markdown under
//     it. The peak RSS and CPU are the figures; a build that cannot write
//     a comparison past one document shows FAILED. Its input is made
//     once by -adk (a zero-latency scripted run, not measured).
//
// CPU time, peak RSS and page faults (minor faults: each first touch of a
// fresh page, ~10-15 µs in a VM) are the adk child's own (rusage). Inputs are
// generated into a temporary directory that is removed afterwards.
//
//	go run ./bench/evalbench -adk bin/adk -openaifake bin/openaifake
//
// A/B against another build in one run (the machine is shared, so figures
// from different runs do not compare):
//
//	go run ./bench/evalbench -adk bin/adk -baseline /tmp/adk-main -runs 3 -only 'openai-(1000|5000)-c256$'
//
// The start-up and tail columns split each run against the fake into the
// time before its first model call and the time after its last answer.
// Between them, "ramp" is from the first call to the conc-th (the first
// wave in flight) and "calls+" is the time from the first call to the last
// answer beyond the ideal ceil(samples/conc) × delay, so that
// wall = start-up + ideal + calls+ + tail. "turn" is the client's mean
// turnaround: from an answer to the next call on the same connection
// (the fake's gap_ns / gap_n), which calls+ grows with in every wave.
// "fake/call" is the fake's own CPU over the run (the sum of its threads'
// /proc schedstat run times) per sample: the fake stands for a provider
// on other machines, so its CPU on the bench's cores is a measurement
// artifact every openai row pays.
//
// The bound is conc / delay samples per second (1,280/s at c256 and 200
// ms), so a row's wall at 100% is samples / 1,280 s. Whole waves make the
// ideal longer: 1,000 samples take at least 4 waves (800 ms, 97.7% of the
// bound) and 5,000 at least 20 (4,000 ms, 97.7%). 90% of the bound at
// 1,000 samples is a wall of 868 ms, which leaves 68 ms beyond the waves
// for start-up, ramp, turnarounds and tail together; 95% at 5,000 is
// 4,112 ms, 112 ms beyond them.
//
// With -floor (the default) each openai-N-cC row also runs a floor row
// (F): evalbench re-executed as a bare net/http client of the fake
// (floor.go), in the same rounds, so that the table shows the share of
// the bound this machine allows any client next to adk's. -floor-clients
// names the floor rows' clients: net/http (adk's HTTP stack, the
// default), fasthttp (a client that reads and writes on the caller's
// goroutine, without net/http's two goroutines per connection), or both,
// each its own F row in every round:
//
//	go run ./bench/evalbench -adk bin/adk -baseline /tmp/adk-main -floor-clients net/http,fasthttp -runs 3 -big=false -only 'openai-(1000|5000)-c256$'
//
// With -baseline-openaifake OLD every openai-N-cC row (its floor row too)
// runs against two fakes in each round, OLD (rows tagged fakeA) and
// -openaifake (fakeB), with the same adk binaries: an A/B of the fake
// itself, whose CPU on these cores every row pays (the fake/call column):
//
//	go run ./bench/evalbench -adk bin/adk -openaifake bin/openaifake -baseline-openaifake /tmp/openaifake-old -runs 3 -big=false -only 'openai-(1000|5000)-c256$'
//
// With -fake-cpus and -client-cpus (Linux CPU lists: 1, 0-1, 0,2) the
// fake runs only on the first CPUs and every measured client, adk and the
// floor rows alike, only on the second (placement.go): the fake, which
// stands for a provider on other machines, then no longer competes for
// the client's core. Lists may overlap (-fake-cpus 1 -client-cpus 0-1:
// the fake on one CPU, the client on both); a CPU this process may not
// run on is refused, naming the flag. A Go child sizes GOMAXPROCS from its
// mask (GOMAXPROCS 1 on one CPU). The table's header says where each side
// ran, from a probe child placed there:
//
//	go run ./bench/evalbench -adk bin/adk -openaifake bin/openaifake -fake-cpus 1 -client-cpus 0 -floor-clients net/http,fasthttp -runs 3 -big=false -only 'openai-(1000|5000)-c256$'
//
// Placement does not keep other work off those CPUs. On a shared, loaded
// machine, running evalbench under SCHED_FIFO (as root: chrt -f 1
// evalbench ...; its children inherit it) keeps other processes from
// delaying the bench's threads, which is what a quiet machine gives:
// bench/RESULTS.md, 2026-12-06 session 17 (h23f), measured at load 18-23
// that way. Where the fake and a client share a CPU, FIFO also stops one
// preempting the other.
//
// With -profile DIR every run also writes a CPU and a heap profile of the
// adk child (through ADK_EVAL_CPUPROFILE and ADK_EVAL_MEMPROFILE) to DIR,
// named after the row: go tool pprof -top -cum DIR/scripted-json.cpu.pprof.
// Profiling costs a few percent; take the table's figures from a run
// without it.
//
// It builds on Linux only: it places processes with sched_setaffinity,
// reads /proc and stops its fake with Pdeathsig.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if os.Getenv(probeEnv) != "" {
		// Re-executed to show what a placed Go child sees (placement.go).
		if err := placementProbe(); err != nil {
			fmt.Fprintf(os.Stderr, "evalbench placement probe: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if os.Getenv(floorEnv) != "" {
		// Re-executed as a floor row's client (floor.go).
		if err := floorClient(os.Getenv(floorEnv), os.Args[1:], os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "evalbench floor client: %v\n", err)
			os.Exit(1)
		}
		return
	}
	adk := flag.String("adk", "bin/adk", "the adk binary")
	fake := flag.String("openaifake", "bin/openaifake", "the openaifake binary")
	delay := flag.Duration("delay", 200*time.Millisecond, "model latency of the fake server")
	scriptedConc := flag.Int("scripted-concurrency", 4, "--concurrency of the zero-latency run")
	skipOpenAI := flag.Bool("scripted-only", false, "run only the zero-latency benchmark")
	big := flag.Bool("big", true, "run the 100,000-case jsonl benchmark")
	baseline := flag.String("baseline", "", "a second adk binary (e.g. today's main): every row runs with it (A) and then with -adk (B), for an A/B in one run")
	runs := flag.Int("runs", 1, "how many times each row runs (A and B alternate within each round)")
	baselineFake := flag.String("baseline-openaifake", "", "a second openaifake binary (e.g. an older build): every openai-N-cC row then runs against it (fake A) and against -openaifake (fake B) in each round, with the same adk binaries and floor: an A/B of the fake")
	floor := flag.Bool("floor", true, "with each openai-N-cC row, run a bare client of the fake (F, floor.go) in the same rounds: what this machine allows the row")
	floorList := flag.String("floor-clients", floorNetHTTP, "the floor rows' clients, comma-separated: "+strings.Join(floorClients, ", ")+" (each its own F row in every round)")
	fakeCPUList := flag.String("fake-cpus", "", "run the fake only on these CPUs (Linux list format: 1, 0-1, 0,2); empty: unpinned")
	clientCPUList := flag.String("client-cpus", "", "run every measured client (adk and the floor rows) only on these CPUs; may overlap -fake-cpus; empty: unpinned")
	only := flag.String("only", "", "run only the rows whose label matches this regexp (labels: scripted-json, openai-1000-c256, openai-100k-jsonl, ...)")
	flag.StringVar(&profileDir, "profile", "", "write CPU and heap profiles of every adk run to this directory")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("evalbench: ")
	if profileDir != "" {
		must(os.MkdirAll(profileDir, 0o755))
	}
	for _, p := range []*string{adk, fake, baseline, baselineFake, &profileDir} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		must(err)
		*p = abs
	}
	onlyRE, err := regexp.Compile(*only)
	must(err)
	var floors []string
	for _, c := range strings.Split(*floorList, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if !slices.Contains(floorClients, c) {
			log.Fatalf("-floor-clients: %q is not one of %s", c, strings.Join(floorClients, ", "))
		}
		floors = append(floors, c)
	}

	available, err := availableCPUs()
	must(err)
	fakeCPUs, err = placementFlag("-fake-cpus", *fakeCPUList, available)
	must(err)
	clientCPUs, err = placementFlag("-client-cpus", *clientCPUList, available)
	must(err)

	loadBefore := loadAverage()
	dir, err := os.MkdirTemp("", "adk-evalbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	type bin struct{ tag, path string }
	bins := []bin{{"", *adk}}
	if *baseline != "" {
		bins = []bin{{"A ", *baseline}, {"B ", *adk}}
	}
	self, err := os.Executable()
	must(err)
	header, err := placementHeader(self, fakeCPUs, clientCPUs, available)
	must(err)
	var rows []row
	// withFloor makes the next measure also run the floor client (F) in
	// each round.
	withFloor := false
	// withFakes makes the next measure run each round against every fake
	// of the list (-baseline-openaifake), switching its --config.
	var withFakes []fakeProc
	// measure runs one row with every binary, -runs times, alternating.
	measure := func(name, label string, samples, conc int, delay time.Duration, env []string, args ...string) {
		floorRows, fakes := floors, withFakes
		if !withFloor {
			floorRows = nil
		}
		withFloor, withFakes = false, nil
		if !onlyRE.MatchString(label) {
			return
		}
		if len(fakes) == 0 {
			fakes = []fakeProc{{}} // whatever fake is up, if any
		}
		defer func(addr string, pid int) { fakeAddr, fakePID = addr, pid }(fakeAddr, fakePID)
		for range *runs {
			for _, fk := range fakes {
				args, label, name, fakeTag := args, label, name, ""
				if fk.addr != "" {
					fakeAddr, fakePID = fk.addr, fk.pid
					args = withConfig(args, fk.config)
					label += "-" + fk.tag
					name, fakeTag = fk.tag+" "+name, fk.tag+" "
				}
				for _, client := range floorRows {
					childEnv = []string{floorEnv + "=" + client}
					floorLabel := label + "-floor"
					if client != floorNetHTTP {
						floorLabel += "-" + client
					}
					r := runADK(self, dir, floorLabel, samples, conc, delay, args...)
					childEnv = nil
					r.name = fmt.Sprintf("%sF %s floor, %v", fakeTag, client, delay)
					rows = append(rows, r)
				}
				for _, b := range bins {
					childEnv = env
					tag := strings.TrimSpace(b.tag)
					if tag != "" {
						tag = "-" + tag
					}
					r := runADK(b.path, dir, label+tag, samples, conc, delay, args...)
					childEnv = nil
					r.name = b.tag + name
					rows = append(rows, r)
				}
			}
		}
	}
	// 1. Engine overhead with a zero-latency scripted agent.
	must(os.WriteFile(filepath.Join(dir, "scripted.json"), []byte(scriptedAgent), 0o644))
	must(os.WriteFile(filepath.Join(dir, "set100.json"), evalSet(100, "What is the weather in Pune?", "It is sunny in Pune, 31°C.", true), 0o644))
	// Events are off: 10,000 samples with their events exceed the 16 MiB
	// report ceiling (eval_report_budget_exceeded), by design.
	for _, format := range []string{"markdown", "json"} {
		scripted := []string{"eval", "run", "--config", "scripted.json", "--eval-set", "set100.json",
			"--samples", "100", "--concurrency", strconv.Itoa(*scriptedConc), "--capture-events", "false", "--format", format}
		measure("scripted 0 ms, no events, "+format, "scripted-"+format, 10_000, *scriptedConc, 0, nil, scripted...)
		if format == "json" {
			measure("scripted 0 ms, json, ADK_TRACING=off", "scripted-json-untraced", 10_000, *scriptedConc, 0, []string{"ADK_TRACING=off"}, scripted...)
		}
	}

	if !*skipOpenAI {
		addr, pid, stop := startFake(*fake, *delay)
		fakeAddr, fakePID = addr, pid
		must(os.WriteFile(filepath.Join(dir, "openai.json"), []byte(openAIAgent(addr)), 0o644))
		// With -baseline-openaifake the openai-N-cC rows alternate
		// between it (fake A) and -openaifake (fake B).
		var fakes []fakeProc
		if *baselineFake != "" {
			addrA, pidA, stopA := startFake(*baselineFake, *delay)
			defer stopA()
			must(os.WriteFile(filepath.Join(dir, "openai-fakeA.json"), []byte(openAIAgent(addrA)), 0o644))
			fakes = []fakeProc{{"fakeA", addrA, "openai-fakeA.json", pidA}, {"fakeB", addr, "openai.json", pid}}
		}
		must(os.WriteFile(filepath.Join(dir, "set10.json"), evalSet(10, "hello", "ok", false), 0o644))
		must(os.WriteFile(filepath.Join(dir, "set50.json"), evalSet(50, "hello", "ok", false), 0o644))
		for _, n := range []int{1000, 5000} {
			for _, conc := range []int{64, 256} {
				set := "set10.json"
				if n == 5000 {
					set = "set50.json"
				}
				args := []string{"eval", "run", "--config", "openai.json", "--eval-set", set,
					"--samples", "100", "--concurrency", strconv.Itoa(conc), "--timeout", "600000", "--format", "json"}
				label := fmt.Sprintf("openai-%d-c%d", n, conc)
				withFloor, withFakes = *floor, fakes
				measure(fmt.Sprintf("openai fake, %v", *delay), label, n, conc, *delay, nil, args...)
				if n == 5000 && conc == 256 {
					withFakes = fakes
					measure(fmt.Sprintf("openai fake, %v, ADK_TRACING=off", *delay), label+"-untraced", n, conc, *delay, []string{"ADK_TRACING=off"}, args...)
				}
			}
		}
		// 4. The response cache: a cold run fills it, the re-run is served
		// from it (the fake is still up: a miss would show as 200 ms).
		for _, b := range bins {
			if !onlyRE.MatchString("openai-cache") {
				break
			}
			cache := filepath.Join(dir, "cache-"+strings.TrimSpace(b.tag))
			for _, label := range []string{"cold", "cached"} {
				r := runADK(b.path, dir, "openai-cache-"+label, 1000, 256, *delay, "eval", "run", "--config", "openai.json", "--eval-set", "set10.json",
					"--samples", "100", "--concurrency", "256", "--timeout", "600000", "--format", "json", "--cache", cache)
				r.name = fmt.Sprintf("%sopenai fake, %v, --cache %s", b.tag, *delay, label)
				if label == "cached" {
					r.delay = 0 // no bound: nothing waits for the model
				}
				rows = append(rows, r)
			}
		}
		stop()
		fakeAddr, fakePID = "", 0
		if *big && onlyRE.MatchString("openai-100k-jsonl") {
			// 5. 100,000 cases, streamed.
			addr, _, stop := startFake(*fake, 0)
			must(os.WriteFile(filepath.Join(dir, "openai0.json"), []byte(openAIAgent(addr)), 0o644))
			must(os.WriteFile(filepath.Join(dir, "set100k.json"), evalSet(100_000, "hello", "ok", false), 0o644))
			measure("openai fake, 0 ms, 100k cases, jsonl", "openai-100k-jsonl", 100_000, 64, 0, nil, "eval", "run", "--config", "openai0.json", "--eval-set", "set100k.json",
				"--concurrency", "64", "--timeout", "3600000", "--capture-events", "false", "--format", "jsonl")
			// The other formats, over one document (issue 19): each run
			// keeps its stream beside --output (FILE.jsonl).
			tolerateFailure = true
			for _, format := range bigFormats {
				measure("openai fake, 0 ms, 100k cases, "+format, "openai-100k-"+format, 100_000, 64, 0, nil, "eval", "run", "--config", "openai0.json", "--eval-set", "set100k.json",
					"--concurrency", "64", "--timeout", "3600000", "--capture-events", "false", "--format", format, "--output", "big."+format)
			}
			stop()
			// adk eval report of a 100,000-case stream in every format.
			stream := filepath.Join(dir, "big.markdown.jsonl")
			if _, err := os.Stat(stream); err == nil {
				for _, format := range bigFormats {
					measure("adk eval report, 100k-case jsonl, "+format, "report-100k-"+format, 100_000, 1, 0, nil, "eval", "report", stream, "--format", format)
				}
			}
			tolerateFailure = false
		}
	}
	if *big && onlyRE.MatchString("compare-100k") {
		// 6. adk eval compare of two 100,000-case jsonl results (the
		// same file on both sides), whose case ids are long enough that
		// the json comparison passes one 16 MiB document (markdown stays
		// under it, so its A/B compares the same work). Its input is made
		// once, by -adk, with a zero-latency scripted agent.
		must(os.WriteFile(filepath.Join(dir, "scripted-ok.json"), []byte(scriptedOKAgent), 0o644))
		must(os.WriteFile(filepath.Join(dir, "set100k-long.json"), evalSetIDs(100_000, compareIDPad, "hi", "ok"), 0o644))
		gen := exec.Command(*adk, "eval", "run", "--config", "scripted-ok.json", "--eval-set", "set100k-long.json",
			"--capture-events", "false", "--format", "jsonl", "--output", "compare100k.jsonl")
		gen.Dir = dir
		var genErr bytes.Buffer
		gen.Stdout, gen.Stderr = io.Discard, &genErr // stdout is the stream again
		if err := gen.Run(); err != nil {
			log.Fatalf("the compare rows' input: %v: %s", err, firstLine(genErr.String()))
		}
		tolerateFailure = true
		for _, format := range []string{"json", "markdown"} {
			measure("adk eval compare, 100k-case jsonl × 2, "+format, "compare-100k-"+format, 100_000, 1, 0, nil,
				"eval", "compare", "compare100k.jsonl", "compare100k.jsonl", "--format", format)
		}
		tolerateFailure = false
	}
	printTable(os.Stdout, header, rows)
	// The machine may be shared: say how busy it was, since wall times
	// (and the share of the bound) move with it.
	fmt.Printf("\nload average (1, 5, 15 min): %s before, %s after\n", loadBefore, loadAverage())
}

// row is one measured run.
type row struct {
	name          string
	samples, conc int
	delay         time.Duration
	wall, cpu     time.Duration
	maxRSS        int64 // bytes
	faults        int64 // minor page faults of the adk child (rusage)
	reportBytes   int
	digest        string // of the report (stdout)
	note          string
	// startup is from the process start to the fake's first request, tail
	// from its last answer to the process exit (rendering included); zero
	// when no fake was up. ramp is from the first request to the conc-th,
	// over from the first request to the last answer beyond the ideal,
	// turn the mean time from an answer to the next request on its
	// connection.
	startup, tail, ramp, over, turn time.Duration
	// fakeCPU is the fake's CPU time during the run (0: no fake up).
	fakeCPU time.Duration
}

// fakeProc is one running fake of an A/B of fakes: its tag in row names,
// address, agent config (naming its address) and process id.
type fakeProc struct {
	tag, addr, config string
	pid               int
}

// withConfig returns a copy of args whose --config value is config.
func withConfig(args []string, config string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "--config" {
			out[i+1] = config
		}
	}
	return out
}

// fakeAddr is the address of the fake with a delay while it is up: runADK
// resets and reads its /stats to split each run into start-up, calls and
// tail.
var fakeAddr string

// fakePID is the fake's process id while fakeAddr is set: runADK reads
// its CPU time around each run.
var fakePID int

// fakeStats reads the fake's first request, nth request (zero when fewer
// came) and last answer times, and the clients' mean turnaround (zero
// when no connection carried two calls).
func fakeStats() (first, nth, last time.Time, turn time.Duration, ok bool) {
	if fakeAddr == "" {
		return first, nth, last, 0, false
	}
	resp, err := http.Get("http://" + fakeAddr + "/stats")
	if err != nil {
		return first, nth, last, 0, false
	}
	defer resp.Body.Close()
	var st struct {
		FirstNS int64 `json:"first_ns"`
		NthNS   int64 `json:"nth_ns"`
		LastNS  int64 `json:"last_ns"`
		GapNS   int64 `json:"gap_ns"`
		GapN    int64 `json:"gap_n"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil || st.FirstNS == 0 || st.LastNS == 0 {
		return first, nth, last, 0, false
	}
	if st.NthNS != 0 {
		nth = time.Unix(0, st.NthNS)
	}
	if st.GapN > 0 {
		turn = time.Duration(st.GapNS / st.GapN)
	}
	return time.Unix(0, st.FirstNS), nth, time.Unix(0, st.LastNS), turn, true
}

// resetFakeStats starts the fake's counts afresh; nth is the request whose
// arrival it notes (the run's concurrency).
func resetFakeStats(nth int) {
	if fakeAddr == "" {
		return
	}
	resp, err := http.Post("http://"+fakeAddr+"/stats/reset?nth="+strconv.Itoa(nth), "", nil)
	must(err)
	resp.Body.Close()
}

// bigFormats are the formats of the 100,000-case rows past jsonl; the
// first one's kept stream (big.markdown.jsonl) is what the report rows
// render.
var bigFormats = []string{"markdown", "json", "junit", "sarif", "html"}

// tolerateFailure makes a failed run a row (FAILED: its error) instead of
// the end of the benchmark: a baseline build may not report past one
// document.
var tolerateFailure bool

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// fakeCPUs and clientCPUs are -fake-cpus and -client-cpus: where
// startFake and runADK place their children (nil: unpinned).
var fakeCPUs, clientCPUs []int

// profileDir is -profile: where runADK asks the child to write profiles.
var profileDir string

// childEnv is added to the next adk child's environment (the A/B switch).
var childEnv []string

func runADK(bin, dir, label string, samples, conc int, delay time.Duration, args ...string) row {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), childEnv...)
	if profileDir != "" {
		cmd.Env = append(cmd.Env,
			"ADK_EVAL_CPUPROFILE="+filepath.Join(profileDir, label+".cpu.pprof"),
			"ADK_EVAL_MEMPROFILE="+filepath.Join(profileDir, label+".heap.pprof"))
	}
	var out countWriter
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	resetFakeStats(conc)
	fakeCPU0, fakeCPUErr := procCPU(fakePID)
	start := time.Now()
	if err := startPlaced(cmd, clientCPUs); err != nil {
		log.Fatalf("start %s: %v", label, err)
	}
	err := cmd.Wait()
	end := time.Now()
	fakeCPU1, fakeCPUErr1 := procCPU(fakePID)
	wall := end.Sub(start)
	var ee *exec.ExitError
	note := "ok"
	switch {
	case err == nil:
	case errors.As(err, &ee) && strings.Contains(errb.String(), "report_render_failed"):
		// Every sample ran; only the final re-validation refused the
		// document. Keep the timing and say so.
		note = "RENDER REFUSED: " + strings.TrimSpace(strings.TrimPrefix(errb.String(), "adk: "))
	case tolerateFailure:
		note = "FAILED: " + firstLine(strings.TrimPrefix(errb.String(), "adk: "))
	case errors.As(err, &ee) && ee.ExitCode() == 2:
		log.Fatalf("adk %s: the evaluation failed (exit 2); the benchmark expects every sample to pass", strings.Join(args, " "))
	default:
		log.Fatalf("adk %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r := row{samples: samples, conc: conc, delay: delay, wall: wall, reportBytes: out.n, digest: out.digest(), note: note,
		cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	if ru != nil {
		r.maxRSS = ru.Maxrss * 1024 // kilobytes on Linux
		r.faults = ru.Minflt
	}
	if fakePID != 0 && fakeCPUErr == nil && fakeCPUErr1 == nil {
		r.fakeCPU = fakeCPU1 - fakeCPU0
	}
	if first, nth, last, turn, ok := fakeStats(); ok {
		r.startup, r.tail, r.turn = first.Sub(start), end.Sub(last), turn
		if !nth.IsZero() {
			r.ramp = nth.Sub(first)
		}
		if delay > 0 && conc > 0 {
			ideal := time.Duration((samples+conc-1)/conc) * delay
			r.over = last.Sub(first) - ideal
		}
	}
	return r
}

func printTable(w io.Writer, header string, rows []row) {
	fmt.Fprintln(w, "adk eval run, through the built binary (wall time includes process start, loading and rendering)")
	fmt.Fprintln(w, header)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| %-42s | %7s | %4s | %8s | %10s | %9s | %10s | %8s | %8s | %8s | %8s | %7s | %8s | %10s | %9s | %10s | %7s | %s\n",
		"workload", "samples", "conc", "wall", "samples/s", "µs/sample", "bound/s", "of bound", "start-up", "ramp", "calls+", "turn", "tail", "CPU/sample", "fake/call", "peak RSS", "faults", "report")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s\n", dashes(44), dashes(9), dashes(6), dashes(10), dashes(12), dashes(11), dashes(12), dashes(10), dashes(10), dashes(10), dashes(10), dashes(9), dashes(10), dashes(12), dashes(11), dashes(12), dashes(9), dashes(8))
	for _, r := range rows {
		rate := float64(r.samples) / r.wall.Seconds()
		bound, ofBound := "-", "-"
		if r.delay > 0 {
			b := float64(r.conc) / r.delay.Seconds()
			bound = fmt.Sprintf("%.0f", b)
			ofBound = fmt.Sprintf("%.1f%%", 100*rate/b)
		}
		report := fmt.Sprintf("%d bytes, sha256 %s", r.reportBytes, r.digest)
		if r.note != "ok" {
			report = r.note
		}
		startup, ramp, over, turn, tail := "-", "-", "-", "-", "-"
		if r.startup != 0 || r.tail != 0 {
			startup, tail = fmt.Sprintf("%dms", r.startup.Milliseconds()), fmt.Sprintf("%dms", r.tail.Milliseconds())
			if r.ramp != 0 {
				ramp = fmt.Sprintf("%dms", r.ramp.Milliseconds())
			}
			if r.delay > 0 {
				over = fmt.Sprintf("%dms", r.over.Milliseconds())
			}
			if r.turn > 0 {
				turn = fmt.Sprintf("%.1fms", float64(r.turn.Microseconds())/1000)
			}
		}
		fake := "-"
		if r.fakeCPU > 0 {
			fake = fmt.Sprintf("%.1fµs", float64(r.fakeCPU.Nanoseconds())/1000/float64(r.samples))
		}
		fmt.Fprintf(w, "| %-42s | %7d | %4d | %7.3fs | %10.0f | %9.1f | %10s | %8s | %8s | %8s | %8s | %7s | %8s | %8.1fµs | %9s | %6.1f MiB | %7d | %s\n",
			r.name, r.samples, r.conc, r.wall.Seconds(), rate, float64(r.wall.Microseconds())/float64(r.samples),
			bound, ofBound, startup, ramp, over, turn, tail, float64(r.cpu.Microseconds())/float64(r.samples), fake, float64(r.maxRSS)/(1<<20), r.faults, report)
	}
}

func dashes(n int) string { return strings.Repeat("-", n) }

// startFake starts openaifake and returns its address, its process id
// and a stop func.
func startFake(bin string, delay time.Duration) (string, int, func()) {
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-delay", delay.String())
	// A failed row ends evalbench with log.Fatal, which runs no stop func:
	// the kernel stops the fake with us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	must(err)
	cmd.Stderr = io.Discard
	must(startPlaced(cmd, fakeCPUs))
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		log.Fatalf("openaifake: %v", err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid, func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
}

// evalSet writes cases × one turn; with tool, each case expects one
// get_weather call.
func evalSet(cases int, input, expected string, tool bool) []byte {
	var b strings.Builder
	b.WriteString(`{"id":"bench","version":"1","cases":[`)
	for i := range cases {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":"case-%03d",`, i)
		if tool {
			b.WriteString(`"expected_trajectory":[{"tool":"get_weather","args":{"city":"Pune"}}],`)
		}
		fmt.Fprintf(&b, `"input":%q,"expected":%q}`, input, expected)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// compareIDPad pads the compare rows' case ids to 64 bytes
// ("case-NNNNNN-" and 52 more): the json comparison of 100,000 of them
// is ~19 MB, over one 16 MiB document; its markdown ~10 MB, under it.
const compareIDPad = 52

// evalSetIDs writes cases × one turn whose ids are "case-NNNNNN-" and pad
// bytes.
func evalSetIDs(cases, pad int, input, expected string) []byte {
	var b strings.Builder
	b.WriteString(`{"id":"bench","version":"1","cases":[`)
	padding := strings.Repeat("x", pad)
	for i := range cases {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":"case-%06d-%s","input":%q,"expected":%q}`, i, padding, input, expected)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// scriptedOKAgent answers "ok" to anything, at once.
const scriptedOKAgent = `{"schema_version":1,"name":"bench","instruction":"Answer briefly.",
 "model":{"provider":"scripted","latency_ms":0,"default":{"steps":[{"text":"ok"}]}}}`

const scriptedAgent = `{"schema_version":1,"name":"travel","instruction":"Answer in one sentence.",
 "model":{"provider":"scripted","latency_ms":0,"usage":{"input_tokens":120,"output_tokens":24},
  "rules":[{"match":{"contains":"weather in Pune"},"steps":[
    {"tool_calls":[{"name":"get_weather","args":{"city":"Pune"}}]},{"text":"It is sunny in Pune, 31°C."}]}]},
 "tools":[{"name":"get_weather","description":"Current weather for a city.",
   "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},
   "mock":{"responses":[{"args":{"city":"Pune"},"result":{"condition":"sunny","temp_c":31}}]}}]}`

func openAIAgent(addr string) string {
	return `{"schema_version":1,"name":"bench","instruction":"Answer briefly.",
 "model":{"provider":"openai","model":"fake","base_url":"http://` + addr + `/v1","max_attempts":1,"timeout_ms":30000}}`
}

// countWriter counts the report and digests it (the table shows the
// digest's start, so an A/B shows both builds wrote the same bytes).
type countWriter struct {
	n int
	h hash.Hash
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.h == nil {
		c.h = sha256.New()
	}
	c.h.Write(p)
	c.n += len(p)
	return len(p), nil
}

// digest is the first 12 hex digits of the report's SHA-256.
func (c *countWriter) digest() string {
	if c.h == nil {
		c.h = sha256.New()
	}
	return hex.EncodeToString(c.h.Sum(nil))[:12]
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// loadAverage is /proc/loadavg's first three fields ("?" where there is
// none).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
