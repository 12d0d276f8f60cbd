// Command openaifake is a local OpenAI-compatible chat completions server
// for benchmarks: every POST to /v1/chat/completions (or
// /chat/completions) is answered after -delay with the assistant text
// -answer. It prints its address ("127.0.0.1:PORT") as the first line on
// stdout once it is listening, and stops on SIGINT/SIGTERM.
//
// GET /stats answers {"served": N, "in_flight": K, "conns": C}: completions
// answered so far, requests being held right now (so a driver can tell idle
// callers from a slow server: throughput = in_flight / delay) and TCP
// connections accepted so far (callers that reuse connections open about as
// many as they have calls in flight, not one per call), plus "first_ns" and
// "last_ns": when the first completion request arrived and the last answer
// was written (Unix nanoseconds, 0 for none) since the last POST /stats/reset,
// so a driver can split a run into start-up, calls and tail. POST
// /stats/reset?nth=N also makes /stats give "nth_ns": when the N-th request
// since the reset arrived (with N the caller's concurrency, the end of its
// first wave of calls).
//
// Per-round split (since the last reset): "late_ns"/"late_n" sum, over
// answered calls, the time a call spent here beyond -delay (from its
// request read to its answer handed to fasthttp for its one write: a
// late wake-up on a loaded machine); "gap_ns"/"gap_n" sum, over requests
// arriving on a connection that carried an answer before, the time from
// that answer to this request's arrival: the caller's turnaround (reading
// the answer, finishing the sample, starting the next one, plus the fake's
// write of the answer and read of the request, a few µs), when its
// callers keep their connections. Since the answer carries its
// Content-Length (2026-12-06), a caller has the whole answer from one
// read; before, the answer was chunked and its last chunk came in a second
// write after the one that ended "answered", so turnarounds measured
// against older builds of the fake include that wait.
//
// With -rpm R it is a rate-limited provider: a token bucket of R requests
// per minute holding -burst-seconds of them (a provider's published limit
// with the small burst real ones allow); a request finding it empty is
// answered 429 with Retry-After: 1 at once. /stats then also gives
// "throttled" (429s answered); first_ns and last_ns give the achieved rate.
//
// The fake stands for a provider on other machines, yet on the bench it
// shares the callers' cores: its own CPU per call is a measurement
// artifact, so it is kept small. It runs on fasthttp (server.go; a
// hand-written HTTP/1.1 server until 2026-12-06 session 13): one goroutine
// per connection that sleeps -delay itself (no timer or goroutine per
// call), each answer written whole with its Content-Length in one write.
// Requests are bounded (an 8 KiB head, a 32 MiB body; 431 and 413 beyond)
// but not timed: a connection lives until its caller closes it or the
// fake stops, which answers the calls in flight first (up to 5 s). A
// caller that hangs up during the delay is noticed when its answer is
// written. With -cpuprofile FILE it writes a CPU profile of itself until
// it stops.
//
//	go run ./bench/openaifake -addr 127.0.0.1:0 -delay 200ms
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	delay := flag.Duration("delay", 200*time.Millisecond, "time before each answer")
	answer := flag.String("answer", "ok", "assistant text of every answer")
	rpm := flag.Int("rpm", 0, "answer 429 above this many requests per minute (0: no limit)")
	burstSeconds := flag.Float64("burst-seconds", 2, "with -rpm: the burst allowed, in seconds of the limit")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the fake to this file until it stops")
	flag.Parse()
	log.SetFlags(0)
	switch {
	case *delay < 0:
		log.Fatalf("openaifake: -delay %v is negative", *delay)
	case *rpm < 0:
		log.Fatalf("openaifake: -rpm %d is negative", *rpm)
	case *rpm > 0 && !(*burstSeconds > 0):
		log.Fatalf("openaifake: -burst-seconds %v is not positive", *burstSeconds)
	}
	srv, err := newServer(*delay, *answer, *rpm, *burstSeconds)
	if err != nil {
		log.Fatal(err)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				log.Printf("openaifake: -cpuprofile: %v", err)
			}
		}()
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr().String())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Fatal(err)
	}
	srv.shutdown(5 * time.Second)
	fmt.Fprintf(os.Stderr, "openaifake: served %d completions\n", srv.served.Load())
}

// completionBody is every completion's answer: a chat completion whose
// assistant message is answer.
func completionBody(answer string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"id":    "chatcmpl-fake",
		"model": "fake",
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": answer},
			"finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
	})
}
