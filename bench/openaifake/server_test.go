package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// startServer runs a fake on 127.0.0.1:0 until the test ends.
func startServer(t *testing.T, delay time.Duration, rpm int) (*server, string) {
	t.Helper()
	s, err := newServer(delay, "ok", rpm, 2)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.serve(ln) }()
	t.Cleanup(func() {
		s.shutdown(5 * time.Second)
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

type stats struct {
	Served, Conns, Throttled int64
	FirstNS                  int64 `json:"first_ns"`
	LastNS                   int64 `json:"last_ns"`
	NthNS                    int64 `json:"nth_ns"`
	LateNS                   int64 `json:"late_ns"`
	LateN                    int64 `json:"late_n"`
	GapNS                    int64 `json:"gap_ns"`
	GapN                     int64 `json:"gap_n"`
	InFlightJSON             int64 `json:"in_flight"`
}

func getStats(t *testing.T, addr string) stats {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st stats
	dec := json.NewDecoder(resp.Body)
	if err := dec.Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestServer_AnswersCompletionsOverKeptConnections: net/http clients (as
// adk's and the floor's) get whole answers with a Content-Length over
// connections they keep, and the counters add up.
func TestServer_AnswersCompletionsOverKeptConnections(t *testing.T) {
	const delay, slots, calls = 5 * time.Millisecond, 2, 10
	_, addr := startServer(t, delay, 0)
	tr := &http.Transport{MaxConnsPerHost: slots, MaxIdleConnsPerHost: slots}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := http.Post("http://"+addr+"/stats/reset?nth=3", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("reset: %s", resp.Status)
	}
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for g := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < calls; i += slots {
				start := time.Now()
				resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json",
					strings.NewReader(`{"model":"fake","messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					errs <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				var v struct {
					Choices []struct {
						Message struct{ Role, Content string }
					}
				}
				switch {
				case err != nil:
					errs <- err
				case resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) != 0:
					errs <- &callErr{"status " + resp.Status + ", length " + resp.Header.Get("Content-Length") + ", encoding " + strings.Join(resp.TransferEncoding, ",")}
				case json.Unmarshal(body, &v) != nil || len(v.Choices) != 1 || v.Choices[0].Message.Content != "ok" || v.Choices[0].Message.Role != "assistant":
					errs <- &callErr{"answer " + string(body)}
				case resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Date") == "":
					errs <- &callErr{"headers " + strings.Join(headerNames(resp.Header), ",")}
				case time.Since(start) < delay:
					errs <- &callErr{"answered before the delay"}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := getStats(t, addr)
	// 10 calls over 2 kept connections: 8 came after an answer on theirs.
	// The stats requests use the default client: their own connection.
	if st.Served != calls || st.InFlightJSON != 0 || st.Conns > slots+2 || st.GapN != calls-slots || st.LateN != calls {
		t.Errorf("stats %+v: want %d served over at most %d connections, %d gaps, %d late", st, calls, slots+2, calls-slots, calls)
	}
	if st.FirstNS == 0 || st.NthNS < st.FirstNS || st.LastNS < st.NthNS || st.LateNS < 0 || st.GapNS <= 0 {
		t.Errorf("times %+v", st)
	}
	if d := time.Duration(st.LastNS - st.FirstNS); d < calls/slots*delay {
		t.Errorf("first call to last answer %v, want at least %v", d, calls/slots*delay)
	}
}

type callErr struct{ s string }

func (e *callErr) Error() string { return e.s }

func headerNames(h http.Header) []string {
	var out []string
	for k := range h {
		out = append(out, k)
	}
	return out
}

// TestServer_RateLimitAnswers429WithRetryAfter: with -rpm the bucket's
// burst is answered, the rest 429 with Retry-After: 1 at once, counted.
func TestServer_RateLimitAnswers429WithRetryAfter(t *testing.T) {
	// 6 a minute with 2 s of burst: a bucket of 1, refilled every 10 s.
	_, addr := startServer(t, time.Millisecond, 6)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var codes []int
	for range 4 {
		resp, err := client.Post("http://"+addr+"/chat/completions", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests {
			if ra := resp.Header.Get("Retry-After"); ra != "1" {
				t.Errorf("Retry-After %q", ra)
			}
			if !json.Valid(body) {
				t.Errorf("429 body %q", body)
			}
		}
	}
	want := []int{200, 429, 429, 429}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("codes %v, want %v", codes, want)
		}
	}
	if st := getStats(t, addr); st.Throttled != 3 || st.Served != 1 {
		t.Errorf("stats %+v: want 3 throttled, 1 served", st)
	}
}

// TestServer_SpeaksHTTP11 sends raw requests: pipelining, chunked bodies,
// Expect: 100-continue, Connection: close, HTTP/1.0, and heads it refuses.
func TestServer_SpeaksHTTP11(t *testing.T) {
	_, addr := startServer(t, 0, 0)
	post := func(extra, body string) string {
		return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n" + body
	}
	for _, tc := range []struct {
		name   string
		send   string
		status []int // answers expected, in order
		closes bool  // the fake closes the connection after them
	}{
		{"pipelined", post("Content-Length: 2\r\n", "{}") + post("Content-Length: 2\r\n", "{}"), []int{200, 200}, false},
		{"chunked body", post("Transfer-Encoding: chunked\r\n", "3;ext=1\r\n{\"a\r\n2\r\n\"}\r\n0\r\nX-Trailer: 1\r\n\r\n") + post("", ""), []int{200, 200}, false},
		{"expect 100-continue", post("Content-Length: 2\r\nExpect: 100-continue\r\n", "{}"), []int{100, 200}, false},
		{"connection close", post("Content-Length: 2\r\nConnection: keep-alive, close\r\n", "{}"), []int{200}, true},
		{"HTTP/1.0", "POST /chat/completions HTTP/1.0\r\nContent-Length: 0\r\n\r\n", []int{200}, true},
		{"GET on completions", "GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n", []int{405}, false},
		{"unknown path", "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", []int{404}, false},
		{"malformed request line", "POST\r\n\r\n", []int{400}, true},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", []int{400}, true},
		{"malformed header", post("Content-Length : 2\r\n", "{}"), []int{400}, true},
		{"conflicting lengths", post("Content-Length: 2\r\nContent-Length: 3\r\n", "{}"), []int{400}, true},
		{"length and chunked", post("Content-Length: 2\r\nTransfer-Encoding: chunked\r\n", "{}"), []int{400}, true},
		{"gzip transfer coding", post("Transfer-Encoding: gzip\r\n", ""), []int{400}, true},
		{"body too large", post("Content-Length: "+strconv.Itoa(maxBody+1)+"\r\n", ""), []int{413}, true},
		{"header line too long", post("X-Long: "+strings.Repeat("a", maxHead)+"\r\n", ""), []int{431}, true},
		{"headers over the read buffer", post(strings.Repeat("X-A: 1\r\n", maxHead/8+1), ""), []int{431}, true},
		{"bad reset count", "POST /stats/reset?nth=-1 HTTP/1.1\r\nHost: x\r\n\r\n", []int{400}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(c, tc.send); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(c)
			for i, want := range tc.status {
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					t.Fatalf("answer %d: %v", i, err)
				}
				body, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatalf("answer %d body: %v", i, err)
				}
				if resp.StatusCode != want {
					t.Fatalf("answer %d: %s %q, want %d", i, resp.Status, body, want)
				}
				if want == 200 && !bytes.Contains(body, []byte(`"content":"ok"`)) {
					t.Errorf("answer %d: %q", i, body)
				}
				if want == 405 && resp.Header.Get("Allow") != "POST" {
					t.Errorf("405 without Allow: POST")
				}
				if last := i == len(tc.status)-1; last && resp.Close != tc.closes {
					t.Errorf("Connection: close is %v, want %v", resp.Close, tc.closes)
				}
			}
			if tc.closes {
				// fasthttp closes a refused head's connection without
				// reading the rest: a reset is as good as EOF here.
				if n, err := r.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("after the last answer: %d bytes, %v; want EOF or a reset", n, err)
				}
				return
			}
			// The connection still serves.
			if _, err := io.WriteString(c, "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(r, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("stats after: %v %v", resp, err)
			}
		})
	}
}

// TestServer_ShutdownWritesAnswersInFlight: a call held when the fake is
// told to stop is still answered; afterwards no goroutine is left (goleak).
func TestServer_ShutdownWritesAnswersInFlight(t *testing.T) {
	s, err := newServer(200*time.Millisecond, "ok", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.serve(ln) }()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	answered := make(chan int, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Post("http://"+ln.Addr().String()+"/chat/completions", "application/json", strings.NewReader("{}"))
		if err != nil {
			answered <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	testutil.WaitFor(t, 10*time.Second, "the call in flight", func() bool { return s.inFlight.Load() == 1 })
	s.shutdown(5 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("the call in flight got %d", code)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the fake still accepts after shutdown")
	}
}

// TestBinary_PrintsAddressAndWritesCPUProfile runs the command: its first
// line is its address, SIGTERM stops it, -cpuprofile leaves a profile.
func TestBinary_PrintsAddressAndWritesCPUProfile(t *testing.T) {
	bin := testutil.Binary(t, ".")
	prof := filepath.Join(t.TempDir(), "fake.pprof")
	cmd := exec.Command(bin, "-delay", "1ms", "-cpuprofile", prof)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+strings.TrimSpace(line)+"/v1/chat/completions", "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("call: %v", err)
	}
	if !strings.Contains(stderr.String(), "served 1 completions") {
		t.Errorf("stderr %q", stderr.String())
	}
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Errorf("profile: %v", err)
	}
	for _, bad := range [][]string{{"-delay", "-1s"}, {"-rpm", "-5"}, {"-rpm", "60", "-burst-seconds", "0"}} {
		out, err := exec.Command(bin, bad...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), bad[len(bad)-2]) {
			t.Errorf("%v: %v, %q: want a refusal naming %s", bad, err, out, bad[len(bad)-2])
		}
	}
}
