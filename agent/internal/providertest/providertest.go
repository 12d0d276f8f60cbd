package providertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fadcedab/adk/agent/internal/httpx"
	"github.com/fadcedab/adk/agent/model"
)

// Key is the API key the suite plants in KeyEnv; it must never appear in
// an error.
const (
	Key    = "planted-SECRET-KEY-4242"
	KeyEnv = "ADK_PROVIDERTEST_KEY"
)

// upstream marks the error bodies the fake sends; it must never appear in
// an error either (a provider error is structural, never the body).
const upstream = "upstream-body"

// Harness is what the suite needs to know of one provider's protocol.
type Harness struct {
	// Authorized reports whether r is a call of the provider's protocol
	// (method, path, query) carrying key where the protocol puts it. The
	// fake answers 404 to anything else, so a success proves both.
	Authorized func(r *http.Request, key string) bool
	// Answer is a 2xx body of the protocol whose answer text is text.
	Answer func(text string) string
	// Malformed is a 2xx body the provider must refuse as bad_response.
	Malformed string
	// New builds the provider against the fake at serverURL with the
	// shared settings cfg (the key in KeyEnv, short backoffs).
	New func(serverURL string, cfg model.HTTPConfig) (model.Provider, error)
}

// Paths are the call paths every provider passes the suite on: net/http's
// Transport, and httpx's lean path for http:// without a proxy. Each is
// chosen through httpx.LeanEnv, as an operator would.
var Paths = []struct{ Name, Lean string }{{"net/http", "off"}, {"lean", "on"}}

// Run runs the suite against h's provider on every call path.
func Run(t *testing.T, h Harness) {
	for _, path := range Paths {
		t.Run(path.Name, func(t *testing.T) {
			t.Setenv(httpx.LeanEnv, path.Lean)
			run(t, h, path.Lean == "on")
		})
	}
}

func run(t *testing.T, h Harness, lean bool) {
	t.Setenv(KeyEnv, Key)
	errBody := `{"error":{"message":"` + upstream + ` ` + Key + `"}}`
	request := &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Text: "hello"}}}}}

	t.Run("success sends the key and reads the answer", func(t *testing.T) {
		f := serve(t, h, lean, func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, h.Answer("conformant"))
		})
		resp, err := f.provider(t, nil).Generate(context.Background(), request)
		if err != nil || resp.Message.Text() != "conformant" || f.attempts.Load() != 1 {
			t.Fatalf("resp %+v err %v attempts %d", resp, err, f.attempts.Load())
		}
	})
	for _, tc := range []struct {
		status int
		class  model.ErrorClass
	}{{400, model.ClassClient}, {401, model.ClassAuth}, {403, model.ClassAuth}, {404, model.ClassClient}} {
		t.Run(fmt.Sprintf("%d is a typed error, not retried", tc.status), func(t *testing.T) {
			f := serve(t, h, lean, func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, errBody)
			})
			_, err := f.provider(t, nil).Generate(context.Background(), request)
			if me := modelErr(t, err); me.Class != tc.class || me.Status != tc.status || me.Retryable || f.attempts.Load() != 1 {
				t.Fatalf("err %+v attempts %d", me, f.attempts.Load())
			}
		})
	}
	t.Run("5xx is retried until an answer", func(t *testing.T) {
		f := serve(t, h, lean, func(w http.ResponseWriter, _ *http.Request, n int) {
			if n < 3 {
				w.WriteHeader(500)
				_, _ = io.WriteString(w, errBody)
				return
			}
			_, _ = io.WriteString(w, h.Answer("third time"))
		})
		resp, err := f.provider(t, nil).Generate(context.Background(), request)
		if err != nil || resp.Message.Text() != "third time" || f.attempts.Load() != 3 {
			t.Fatalf("resp %+v err %v attempts %d", resp, err, f.attempts.Load())
		}
	})
	t.Run("5xx exhausts max_attempts", func(t *testing.T) {
		f := serve(t, h, lean, func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.WriteHeader(503)
			_, _ = io.WriteString(w, errBody)
		})
		_, err := f.provider(t, func(c *model.HTTPConfig) { c.MaxAttempts = 4 }).Generate(context.Background(), request)
		if me := modelErr(t, err); me.Class != model.ClassServer || me.Status != 503 || !me.Retryable || f.attempts.Load() != 4 {
			t.Fatalf("err %+v attempts %d", me, f.attempts.Load())
		}
	})
	t.Run("429 waits Retry-After then retries", func(t *testing.T) {
		var first time.Time
		var gap time.Duration
		f := serve(t, h, lean, func(w http.ResponseWriter, _ *http.Request, n int) {
			if n == 1 {
				first = time.Now()
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(429)
				_, _ = io.WriteString(w, errBody)
				return
			}
			gap = time.Since(first)
			_, _ = io.WriteString(w, h.Answer("ok"))
		})
		resp, err := f.provider(t, nil).Generate(context.Background(), request)
		if err != nil || resp.Message.Text() != "ok" || f.attempts.Load() != 2 {
			t.Fatalf("resp %+v err %v attempts %d", resp, err, f.attempts.Load())
		}
		if gap < 900*time.Millisecond {
			t.Fatalf("Retry-After not honoured: retried after %v", gap)
		}
	})
	t.Run("429 exhausted is rate_limited", func(t *testing.T) {
		f := serve(t, h, lean, func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(429)
			_, _ = io.WriteString(w, errBody)
		})
		_, err := f.provider(t, func(c *model.HTTPConfig) { c.MaxAttempts = 2 }).Generate(context.Background(), request)
		if me := modelErr(t, err); me.Class != model.ClassRateLimited || me.Status != 429 || !me.Retryable || f.attempts.Load() != 2 {
			t.Fatalf("err %+v attempts %d", me, f.attempts.Load())
		}
	})
	t.Run("a slow attempt times out", func(t *testing.T) {
		release := make(chan struct{})
		f := serve(t, h, lean, func(_ http.ResponseWriter, r *http.Request, _ int) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		defer close(release)
		_, err := f.provider(t, func(c *model.HTTPConfig) { c.TimeoutMS = 100 }).Generate(context.Background(), request)
		if me := modelErr(t, err); me.Class != model.ClassTimeout || f.attempts.Load() != 1 {
			t.Fatalf("err %+v attempts %d", me, f.attempts.Load())
		}
	})
	t.Run("the caller's cancellation ends the call", func(t *testing.T) {
		release := make(chan struct{})
		started := make(chan struct{}, 1)
		f := serve(t, h, lean, func(_ http.ResponseWriter, r *http.Request, _ int) {
			started <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		defer close(release)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			<-started
			cancel()
		}()
		_, err := f.provider(t, nil).Generate(ctx, request)
		cancel()
		<-done
		if me := modelErr(t, err); me.Class != model.ClassCancelled {
			t.Fatalf("err %+v", me)
		}
	})
	t.Run("a deadline during backoff ends the call", func(t *testing.T) {
		f := serve(t, h, lean, func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(429)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := f.provider(t, func(c *model.HTTPConfig) { c.MaxBackoffMS = 60_000 }).Generate(ctx, request)
		if me := modelErr(t, err); me.Class != model.ClassTimeout || f.attempts.Load() != 1 {
			t.Fatalf("err %+v attempts %d", me, f.attempts.Load())
		}
	})
	t.Run("an oversized body is too_large", func(t *testing.T) {
		f := serve(t, h, lean, func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, h.Answer(strings.Repeat("x", 4096)))
		})
		_, err := f.provider(t, func(c *model.HTTPConfig) { c.MaxResponseBytes = 1024 }).Generate(context.Background(), request)
		if me := modelErr(t, err); me.Class != model.ClassTooLarge {
			t.Fatalf("err %+v", me)
		}
	})
	t.Run("a malformed body is bad_response", func(t *testing.T) {
		f := serve(t, h, lean, func(w http.ResponseWriter, _ *http.Request, _ int) {
			_, _ = io.WriteString(w, h.Malformed)
		})
		_, err := f.provider(t, nil).Generate(context.Background(), request)
		if me := modelErr(t, err); me.Class != model.ClassBadResponse {
			t.Fatalf("err %+v", me)
		}
	})
	t.Run("the shared settings are bounded", func(t *testing.T) {
		t.Setenv("ADK_PROVIDERTEST_EMPTY", "")
		for name, tune := range map[string]func(*model.HTTPConfig){
			"bad scheme":       func(c *model.HTTPConfig) { c.BaseURL = "ftp://127.0.0.1" },
			"creds in url":     func(c *model.HTTPConfig) { c.BaseURL = "http://user:" + Key + "@127.0.0.1" },
			"query in url":     func(c *model.HTTPConfig) { c.BaseURL = "http://127.0.0.1/v1?key=" + Key },
			"unset key env":    func(c *model.HTTPConfig) { c.APIKeyEnv = "ADK_PROVIDERTEST_EMPTY" },
			"attempts":         func(c *model.HTTPConfig) { c.MaxAttempts = httpx.MaxAttempts + 1 },
			"timeout":          func(c *model.HTTPConfig) { c.TimeoutMS = int(httpx.MaxTimeout/time.Millisecond) + 1 },
			"response bytes":   func(c *model.HTTPConfig) { c.MaxResponseBytes = httpx.MaxResponseBytes + 1 },
			"negative backoff": func(c *model.HTTPConfig) { c.BaseBackoffMS = -1 },
		} {
			cfg := model.HTTPConfig{BaseURL: "http://127.0.0.1:1", APIKeyEnv: KeyEnv}
			tune(&cfg)
			// serverURL "" lets the harness keep cfg.BaseURL as given.
			_, err := h.New("", cfg)
			if err == nil {
				t.Errorf("%s: accepted", name)
				continue
			}
			if strings.Contains(err.Error(), Key) || strings.Contains(fmt.Sprintf("%#v", err), Key) {
				t.Errorf("%s: error leaks the key: %v", name, err)
			}
		}
	})
}

type fake struct {
	h        Harness
	url      string
	attempts *atomic.Int32
}

// serve starts the fake: handle answers each authorized attempt (n counts
// from 1); anything else gets a 404.
func serve(t *testing.T, h Harness, lean bool, handle func(w http.ResponseWriter, r *http.Request, n int)) *fake {
	t.Helper()
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(attempts.Add(1))
		// net/http's Transport asks for gzip; the lean path does not.
		if viaTransport := r.Header.Get("Accept-Encoding") == "gzip"; viaTransport == lean {
			t.Errorf("attempt %d came through the other call path (lean %v)", n, lean)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		if !h.Authorized(r, Key) {
			w.WriteHeader(404)
			return
		}
		handle(w, r, n)
	}))
	t.Cleanup(func() {
		srv.Close()
		httpx.CloseIdleConnections()
	})
	return &fake{h: h, url: srv.URL, attempts: &attempts}
}

func (f *fake) provider(t *testing.T, tune func(*model.HTTPConfig)) model.Provider {
	t.Helper()
	cfg := model.HTTPConfig{APIKeyEnv: KeyEnv, BaseBackoffMS: 1, MaxBackoffMS: 2000}
	if tune != nil {
		tune(&cfg)
	}
	p, err := f.h.New(f.url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// modelErr checks err is a *model.Error that repeats neither the key nor
// the server's body, and returns it.
func modelErr(t *testing.T, err error) *model.Error {
	t.Helper()
	for _, s := range []string{fmt.Sprint(err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		if strings.Contains(s, Key) || strings.Contains(s, upstream) {
			t.Fatalf("error leaks the key or the body: %s", s)
		}
	}
	var me *model.Error
	if !errors.As(err, &me) {
		t.Fatalf("not a *model.Error: %v", err)
	}
	return me
}
