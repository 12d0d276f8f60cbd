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
// handler starting to its answer written: a late timer on a loaded
// machine, reading the body, writing the answer); "gap_ns"/"gap_n" sum,
// over requests arriving on a connection that carried an answer before,
// the time from that answer written to this request's arrival: the
// caller's turnaround (reading the answer, finishing the sample, starting
// the next one), when its callers keep their connections.
//
// With -rpm R it is a rate-limited provider: a token bucket of R requests
// per minute holding -burst-seconds of them (a provider's published limit
// with the small burst real ones allow); a request finding it empty is
// answered 429 with Retry-After: 1 at once. /stats then also gives
// "throttled" (429s answered); first_ns and last_ns give the achieved rate.
//
//	go run ./bench/openaifake -addr 127.0.0.1:0 -delay 200ms
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/time/rate"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	delay := flag.Duration("delay", 200*time.Millisecond, "time before each answer")
	answer := flag.String("answer", "ok", "assistant text of every answer")
	rpm := flag.Int("rpm", 0, "answer 429 above this many requests per minute (0: no limit)")
	burstSeconds := flag.Float64("burst-seconds", 2, "with -rpm: the burst allowed, in seconds of the limit")
	flag.Parse()
	var limit *rate.Limiter
	if *rpm > 0 {
		limit = rate.NewLimiter(rate.Limit(float64(*rpm)/60), max(1, int(math.Ceil(float64(*rpm)/60**burstSeconds))))
	}

	body, err := json.Marshal(map[string]any{
		"id":    "chatcmpl-fake",
		"model": "fake",
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": *answer},
			"finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
	})
	if err != nil {
		log.Fatal(err)
	}
	var served, inFlight, conns, throttled, firstNS, lastNS atomic.Int64
	var arrived, nth, nthNS atomic.Int64 // requests since the reset, and when the nth came
	var lateNS, lateN, gapNS, gapN, resetNS atomic.Int64
	handler := func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		now := time.Now().UnixNano()
		conn, _ := r.Context().Value(connKey{}).(*connState)
		if conn != nil {
			if last := conn.lastAnswer.Load(); last > 0 && last > resetNS.Load() {
				gapNS.Add(now - last)
				gapN.Add(1)
			}
		}
		firstNS.CompareAndSwap(0, now)
		if arrived.Add(1) == nth.Load() {
			nthNS.Store(now)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		if limit != nil && !limit.Allow() {
			throttled.Add(1)
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":{"message":"rate limit","type":"rate_limit_exceeded"}}`, http.StatusTooManyRequests)
			return
		}
		inFlight.Add(1)
		defer inFlight.Add(-1)
		t := time.NewTimer(*delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
		if f, ok := w.(http.Flusher); ok {
			f.Flush() // the answer is on the wire: what the caller waits for
		}
		answered := time.Now().UnixNano()
		lastNS.Store(answered)
		lateNS.Add(answered - now - delay.Nanoseconds())
		lateN.Add(1)
		if conn != nil {
			conn.lastAnswer.Store(answered)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", handler)
	mux.HandleFunc("/chat/completions", handler)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"served":%d,"in_flight":%d,"conns":%d,"throttled":%d,"first_ns":%d,"last_ns":%d,"nth_ns":%d,"late_ns":%d,"late_n":%d,"gap_ns":%d,"gap_n":%d}`,
			served.Load(), inFlight.Load(), conns.Load(), throttled.Load(), firstNS.Load(), lastNS.Load(), nthNS.Load(),
			lateNS.Load(), lateN.Load(), gapNS.Load(), gapN.Load())
	})
	mux.HandleFunc("POST /stats/reset", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("nth"), 10, 64)
		nth.Store(n)
		nthNS.Store(0)
		arrived.Store(0)
		firstNS.Store(0)
		lastNS.Store(0)
		resetNS.Store(time.Now().UnixNano())
		lateNS.Store(0)
		lateN.Store(0)
		gapNS.Store(0)
		gapN.Store(0)
		w.WriteHeader(http.StatusNoContent)
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, &connState{})
		},
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		}}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Fatal(err)
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	fmt.Fprintf(os.Stderr, "openaifake: served %d completions\n", served.Load())
}

// connKey keys a connection's connState in its requests' contexts.
type connKey struct{}

// connState is what the fake remembers of one connection: when it last
// wrote an answer on it (Unix nanoseconds, 0 for none).
type connState struct{ lastAnswer atomic.Int64 }
