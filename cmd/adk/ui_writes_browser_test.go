package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// writeFault is what writeInterceptor does with one write.
type writeFault struct {
	kind string // "" lets it through; hold, lose_answer, answer_503, send_key
	key  string // send_key: the Idempotency-Key sent instead of the page's
}

// writeInterceptor pauses the page's writes of one kind (a method on
// the URLs of a pattern: the job submissions, POST
// /dev/v1/evaluation/jobs, or the cancels, DELETE
// /dev/v1/evaluation/jobs/{job_id}) with the DevTools Fetch domain,
// records each one's Idempotency-Key and does with it what the test
// planned: let it through; hold it until released; let the server handle
// it and then reset the connection (the answer is lost) or replace the
// answer with a 503; or send it with another key. Other requests on the
// pattern go through untouched. The browser and the server stay real:
// only the wire between them misbehaves.
type writeInterceptor struct {
	b       *browser
	method  string
	events  chan *fetch.EventRequestPaused
	held    chan struct{} // a held write arrived
	release chan struct{} // closed: let the held write through
	stop    chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	keys  []string // the Idempotency-Key of every write sent, in order
	plan  []writeFault
	fates map[fetch.RequestID]string // writes paused again at their answer
	errs  []string
}

// interceptWrites intercepts the page's method requests on the URLs
// urlPattern matches (a DevTools Fetch pattern: * any characters, ? one).
func interceptWrites(t *testing.T, b *browser, method, urlPattern string) *writeInterceptor {
	t.Helper()
	ic := &writeInterceptor{b: b, method: method, events: make(chan *fetch.EventRequestPaused, 64), held: make(chan struct{}, 1),
		release: make(chan struct{}), stop: make(chan struct{}), fates: map[fetch.RequestID]string{}}
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			select { // room for 64: the page sends one write at a time
			case ic.events <- e:
			case <-ic.stop: // the test is over; the browser closes
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: urlPattern, RequestStage: fetch.RequestStageRequest}}}); err != nil {
		t.Fatal(err)
	}
	ic.wg.Add(1)
	go func() {
		defer ic.wg.Done()
		for {
			select {
			case e := <-ic.events:
				ic.handle(e)
			case <-ic.stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(ic.stop)
		ic.wg.Wait()
	})
	return ic
}

// then plans what happens to the next writes, in order; the ones after
// them go through.
func (ic *writeInterceptor) then(faults ...writeFault) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	ic.plan = append(ic.plan, faults...)
}

// sent returns the keys of the writes sent so far and the errors of the
// interception itself.
func (ic *writeInterceptor) sent() ([]string, []string) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return append([]string(nil), ic.keys...), append([]string(nil), ic.errs...)
}

func (ic *writeInterceptor) call(what string, err error) {
	if err != nil {
		ic.mu.Lock()
		ic.errs = append(ic.errs, what+": "+err.Error())
		ic.mu.Unlock()
	}
}

func (ic *writeInterceptor) handle(e *fetch.EventRequestPaused) {
	ctx := ic.b.ctx
	if e.ResponseStatusCode != 0 || e.ResponseErrorReason != "" {
		// Paused again at its answer: the server has handled it.
		ic.mu.Lock()
		fate := ic.fates[e.RequestID]
		delete(ic.fates, e.RequestID)
		ic.mu.Unlock()
		switch fate {
		case "lose_answer":
			_, err := chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: network.ErrorReasonConnectionReset})
			ic.call("lose the answer", err)
		case "answer_503":
			_, err := chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: e.RequestID, ResponseCode: http.StatusServiceUnavailable,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}},
				Body:            []byte(`{"error":{"code":"evaluation_service_unavailable","message":"the test replaced this answer"}}`)})
			ic.call("answer 503", err)
		default:
			_, err := chromedp.Call(ctx, fetch.ContinueResponse, fetch.ContinueResponseParams{RequestID: e.RequestID})
			ic.call("continue the answer", err)
		}
		return
	}
	if e.Request.Method != ic.method {
		_, err := chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
		ic.call("continue "+e.Request.Method, err)
		return
	}
	key := ""
	for name, v := range e.Request.Headers {
		if strings.EqualFold(name, "Idempotency-Key") {
			key, _ = v.(string)
		}
	}
	ic.mu.Lock()
	ic.keys = append(ic.keys, key)
	var f writeFault
	if len(ic.plan) > 0 {
		f, ic.plan = ic.plan[0], ic.plan[1:]
	}
	if f.kind == "lose_answer" || f.kind == "answer_503" {
		ic.fates[e.RequestID] = f.kind
	}
	ic.mu.Unlock()
	params := fetch.ContinueRequestParams{RequestID: e.RequestID}
	switch f.kind {
	case "hold":
		// Wait aside, so a second write the page sent meanwhile is still
		// recorded.
		ic.held <- struct{}{}
		ic.wg.Add(1)
		go func() {
			defer ic.wg.Done()
			select {
			case <-ic.release:
			case <-ic.stop:
				return
			}
			_, err := chromedp.Call(ctx, fetch.ContinueRequest, params)
			ic.call("continue the held write", err)
		}()
		return
	case "lose_answer", "answer_503":
		t := true
		params.InterceptResponse = &t
	case "send_key":
		for name, v := range e.Request.Headers {
			s, _ := v.(string)
			if strings.EqualFold(name, "Idempotency-Key") {
				s = f.key
			}
			params.Headers = append(params.Headers, &fetch.HeaderEntry{Name: name, Value: s})
		}
	}
	_, err := chromedp.Call(ctx, fetch.ContinueRequest, params)
	ic.call("continue the write", err)
}

// waitHeld waits until the planned held write has reached the
// interceptor.
func (ic *writeInterceptor) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-ic.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the page sent no " + ic.method)
	}
}
