//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// floorEnv switches evalbench, re-executed as a row's client, into the
// floor client; its value names the client (floorClients).
const floorEnv = "EVALBENCH_FLOOR"

// The floor clients (-floor-clients): net/http's Transport, which adk's
// providers use (a read and a write goroutine per connection, the caller
// handed each answer over channels), and fasthttp's HostClient, which
// writes each request and reads its answer on the caller's goroutine.
const (
	floorNetHTTP  = "net/http"
	floorFastHTTP = "fasthttp"
)

// floorClients lists the floor clients -floor-clients accepts.
var floorClients = []string{floorNetHTTP, floorFastHTTP}

// The floor client is the least a client of the fake can do for an openai
// row: the row's cases × samples POSTs at its concurrency through one
// client (at most a connection per slot, kept across waves), each answer
// read and JSON-decoded, and every answer written to stdout at the end. It
// runs as its own process in the same rounds as adk, so its row shows what
// this machine allows a row (process start, 256 dials on 2 cores shared
// with the fake, the waves, the exit): the share of the Little's-law bound
// adk can be held to here, and how much of adk's distance to the bound is
// its own. With net/http it is the floor of adk's own HTTP stack; with
// fasthttp, of a client without per-connection goroutines.
//
// It takes adk's arguments (--config, --eval-set, --samples,
// --concurrency) and reads the fake's base_url from the agent config and
// the number of cases from the set.
func floorClient(client string, args []string, out io.Writer) error {
	flagOf := func(name string) string {
		for i := 0; i+1 < len(args); i++ {
			if args[i] == name {
				return args[i+1]
			}
		}
		return ""
	}
	var cfg struct {
		Model struct {
			Model   string `json:"model"`
			BaseURL string `json:"base_url"`
		} `json:"model"`
		Instruction string `json:"instruction"`
	}
	var set struct {
		Cases []struct {
			Input string `json:"input"`
		} `json:"cases"`
	}
	for _, f := range []struct {
		path string
		v    any
	}{{flagOf("--config"), &cfg}, {flagOf("--eval-set"), &set}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, f.v); err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
	}
	samples, err := strconv.Atoi(flagOf("--samples"))
	if err != nil {
		return fmt.Errorf("--samples: %w", err)
	}
	conc, err := strconv.Atoi(flagOf("--concurrency"))
	if err != nil {
		return fmt.Errorf("--concurrency: %w", err)
	}
	n := len(set.Cases) * samples
	bodies := make([][]byte, len(set.Cases))
	for i, c := range set.Cases {
		bodies[i], _ = json.Marshal(map[string]any{"model": cfg.Model.Model, "messages": []map[string]string{
			{"role": "system", "content": cfg.Instruction}, {"role": "user", "content": c.Input}}})
	}
	call, closeClient, err := newFloorCaller(client, cfg.Model.BaseURL+"/chat/completions", conc)
	if err != nil {
		return err
	}
	defer closeClient()
	answers := make([]json.RawMessage, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := call(bodies[i%len(bodies)], &answers[i]); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	doc, err := json.Marshal(answers)
	if err != nil {
		return err
	}
	_, err = out.Write(doc)
	return err
}

// newFloorCaller returns client's call of url, which posts a body and
// keeps the decoded answer, and a func that closes the client's idle
// connections.
func newFloorCaller(client, url string, conc int) (func(body []byte, answer *json.RawMessage) error, func(), error) {
	switch client {
	case floorNetHTTP:
		// At most one connection per slot: a call that finds none idle
		// waits for one instead of dialing a spare (which a fast client
		// would do while the last answer's connection is on its way back
		// to the pool).
		transport := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}
		hc := &http.Client{Transport: transport}
		return func(body []byte, answer *json.RawMessage) error { return netHTTPCall(hc, url, body, answer) },
			transport.CloseIdleConnections, nil
	case floorFastHTTP:
		u, err := neturl.Parse(url)
		if err != nil || u.Scheme != "http" {
			return nil, nil, fmt.Errorf("base_url %q: the fasthttp floor calls http:// only", url)
		}
		// MaxConns is the slots; a call finding every connection busy
		// waits for one (MaxConnWaitTimeout) instead of failing. A plain
		// net.Dialer, not fasthttp's default one, whose address cache
		// starts a goroutine for the life of the process. The idle
		// cleaner stops a second after the last connection closed.
		var dialer net.Dialer
		hc := &fasthttp.HostClient{
			Addr: u.Host, MaxConns: conc, MaxConnWaitTimeout: time.Minute, MaxIdleConnDuration: time.Second,
			NoDefaultUserAgentHeader: true,
			Dial:                     func(addr string) (net.Conn, error) { return dialer.Dial("tcp", addr) },
		}
		return func(body []byte, answer *json.RawMessage) error { return fastHTTPCall(hc, url, body, answer) },
			hc.CloseIdleConnections, nil
	}
	return nil, nil, fmt.Errorf("floor client %q is not one of %s", client, strings.Join(floorClients, ", "))
}

// floorAnswer is the part of an answer the floor decodes.
type floorAnswer struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

func netHTTPCall(client *http.Client, url string, body []byte, answer *json.RawMessage) error {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var v floorAnswer
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*answer = b
	return nil
}

func fastHTTPCall(client *fasthttp.HostClient, url string, body []byte, answer *json.RawMessage) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.SetMethod(http.MethodPost)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
	if err := client.Do(req, resp); err != nil {
		return err
	}
	if resp.StatusCode() != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode())
	}
	b := append([]byte(nil), resp.Body()...) // resp's buffer goes back to its pool
	var v floorAnswer
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*answer = b
	return nil
}
