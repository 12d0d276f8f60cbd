package httpx

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/model"
)

// TestLean_PostBorrow: a borrowed answer is the answer Post returns,
// whether its body was left in the connection's buffer (plain, within
// it), copied (over it) or read by net/http (chunked); done hands the
// connection back to the pool, or closes it when the answer asked; a
// failed call has no done; a Client off the lean path lends nothing.
func TestLean_PostBorrow(t *testing.T) {
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case bytes.HasPrefix(b, []byte("fail")):
			w.WriteHeader(http.StatusBadRequest)
			return
		case bytes.HasPrefix(b, []byte("close")):
			w.Header().Set("Connection", "close")
		case bytes.HasPrefix(b, []byte("chunked")):
			w.(http.Flusher).Flush()
			_, _ = w.Write(b)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	})
	c := leanClient(t, newPool(4, 8, time.Minute))
	ep := c.NewEndpoint(s.URL+"/v1/x", http.Header{"Authorization": {leanKey}})
	if ep.lean == nil {
		t.Fatal("the endpoint is not on the lean path")
	}
	borrow := func(c *Client, body string) {
		t.Helper()
		data, done, err := c.PostBorrow(context.Background(), ep, []byte(body))
		if err != nil || done == nil {
			t.Fatalf("PostBorrow of %.12q: done %v, %v", body, done != nil, err)
		}
		if string(data) != body {
			t.Fatalf("PostBorrow of %.12q: %d bytes %.12q", body, len(data), data)
		}
		done()
	}
	for i, body := range []string{`{"a":1}`, "", strings.Repeat("a", 4000), strings.Repeat("b", 10000), "chunked" + strings.Repeat("c", 100), `{"b":2}`} {
		borrow(c, body)
		if n := c.pool.idleCount(); n != 1 {
			t.Fatalf("answer %d: %d idle connections after done, want 1", i, n)
		}
	}
	if s.opened.Load() != 1 {
		t.Fatalf("%d connections for six answers, want 1", s.opened.Load())
	}
	borrow(c, "close"+strings.Repeat("d", 50))
	if n := c.pool.idleCount(); n != 0 {
		t.Fatalf("an answer that closes its connection left %d idle", n)
	}
	borrow(c, `{"c":3}`)
	if s.opened.Load() != 2 {
		t.Fatalf("%d connections, want 2: the closed one reused?", s.opened.Load())
	}
	data, done, err := c.PostBorrow(context.Background(), ep, []byte("fail"))
	var me *model.Error
	if err == nil || done != nil || data != nil {
		t.Fatalf("a failed call: %q, done %v, %v", data, done != nil, err)
	} else if me, _ = err.(*model.Error); me == nil || me.Status != http.StatusBadRequest {
		t.Fatalf("a failed call's error: %v", err)
	}
	// The leanServer takes no Accept-Encoding, which net/http's transport
	// adds unless told not to.
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	t.Cleanup(hc.CloseIdleConnections)
	plain := &Client{Provider: "test", HTTP: hc, MaxAttempts: 1, Timeout: 10 * time.Second}
	borrow(plain, `{"d":4}`)
}

// TestLean_PostBorrowCopiesNoBody: a borrowed plain answer's body is not
// copied (bytes allocated per call, the least of nine rounds of each:
// the server's allocations are in both; 4,100 bytes apart here).
func TestLean_PostBorrowCopiesNoBody(t *testing.T) {
	body := []byte(strings.Repeat("x", 3900))
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	})
	c := leanClient(t, newPool(4, 8, time.Minute))
	ep := c.NewEndpoint(s.URL+"/v1/x", http.Header{"Authorization": {leanKey}})
	ctx := context.Background()
	perCall := func(call func() error) uint64 {
		least := ^uint64(0)
		for range 9 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range 20 {
				if err := call(); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			least = min(least, (after.TotalAlloc-before.TotalAlloc)/20)
		}
		return least
	}
	copied := perCall(func() error {
		_, err := c.Post(ctx, ep, body)
		return err
	})
	lent := perCall(func() error {
		data, done, err := c.PostBorrow(ctx, ep, body)
		if err == nil {
			if len(data) != len(body) {
				t.Errorf("%d bytes borrowed, want %d", len(data), len(body))
			}
			done()
		}
		return err
	})
	t.Logf("bytes per call: Post %d, PostBorrow %d (race %v)", copied, lent, raceEnabled)
	if raceEnabled {
		// The server's pools drop buffers at random under -race: a round's
		// bytes vary by more than the body (3,000 to 4,900 bytes apart).
		return
	}
	if lent+3500 > copied {
		t.Fatalf("PostBorrow allocates %d bytes a call against Post's %d: the 3,900-byte body was copied", lent, copied)
	}
}
