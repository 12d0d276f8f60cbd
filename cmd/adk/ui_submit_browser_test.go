package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/fadcedab/adk/store/evalrecord"
)

// submitFault is what submitInterceptor does with one job submission.
type submitFault struct {
	kind string // "" lets it through; hold, lose_answer, answer_503, send_key
	key  string // send_key: the Idempotency-Key sent instead of the page's
}

// submitInterceptor pauses the page's job submissions (POST
// /dev/v1/evaluation/jobs) with the DevTools Fetch domain, records each
// one's Idempotency-Key and does with it what the test planned: let it
// through; hold it until released; let the server handle it and then
// reset the connection (the answer is lost) or replace the answer with
// a 503; or send it with another key. The browser and the server stay
// real: only the wire between them misbehaves.
type submitInterceptor struct {
	b       *browser
	events  chan *fetch.EventRequestPaused
	held    chan struct{} // a held submission arrived
	release chan struct{} // closed: let the held submission through
	stop    chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	keys  []string // the Idempotency-Key of every submission sent, in order
	plan  []submitFault
	fates map[fetch.RequestID]string // submissions paused again at their answer
	errs  []string
}

func interceptSubmits(t *testing.T, b *browser) *submitInterceptor {
	t.Helper()
	ic := &submitInterceptor{b: b, events: make(chan *fetch.EventRequestPaused, 64), held: make(chan struct{}, 1),
		release: make(chan struct{}), stop: make(chan struct{}), fates: map[fetch.RequestID]string{}}
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			select { // room for 64: the page sends one submission at a time
			case ic.events <- e:
			case <-ic.stop: // the test is over; the browser closes
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	// The list's GET has a query and the event streams a longer path: only
	// the submit route matches.
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "*/dev/v1/evaluation/jobs", RequestStage: fetch.RequestStageRequest}}}); err != nil {
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

// then plans what happens to the next submissions, in order; the ones
// after them go through.
func (ic *submitInterceptor) then(faults ...submitFault) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	ic.plan = append(ic.plan, faults...)
}

// sent returns the keys of the submissions sent so far and the errors of
// the interception itself.
func (ic *submitInterceptor) sent() ([]string, []string) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return append([]string(nil), ic.keys...), append([]string(nil), ic.errs...)
}

func (ic *submitInterceptor) call(what string, err error) {
	if err != nil {
		ic.mu.Lock()
		ic.errs = append(ic.errs, what+": "+err.Error())
		ic.mu.Unlock()
	}
}

func (ic *submitInterceptor) handle(e *fetch.EventRequestPaused) {
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
	if e.Request.Method != http.MethodPost {
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
	var f submitFault
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
		// Wait aside, so a second submission the page sent meanwhile is
		// still recorded.
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
			ic.call("continue the held submission", err)
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
	ic.call("continue the submission", err)
}

// waitHeld waits until the planned held submission has reached the
// interceptor.
func (ic *submitInterceptor) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-ic.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the page sent no submission")
	}
}

// TestClusterUI_SubmitIsIdempotent drives the jobs page's submit form in
// headless Chromium against `adk serve --http-addr`, with the network
// between them failing on purpose: more clicks and an Enter while a
// submission is in flight send nothing (the button is disabled); a lost
// answer and a 503 are retried automatically and then by the Retry
// button, all with the submission's one Idempotency-Key, and make one
// job; a changed form draws a new key and makes a second job; and a key
// the server says was used for other content (422) is said plainly and a
// new submission draws a new key.
func TestClusterUI_SubmitIsIdempotent(t *testing.T) {
	b := newBrowser(t)
	s := startUIStack(t)
	ic := interceptSubmits(t, b)
	b.run("log in", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), uiToken), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`main[data-ready="jobs"] table`)))

	const submit = "main details form button[type=submit]"
	set := func(version string) string {
		return strings.Replace(uiGoodSet, `"version":"1"`, `"version":"`+version+`"`, 1)
	}
	// fillForm opens a fresh jobs page (a new address: the router runs
	// again) and fills its submit form.
	forms := 0
	fillForm := func(content string) {
		b.t.Helper()
		forms++
		page := fmt.Sprintf("jobs?form=%d", forms)
		b.run("fill the submit form", chromedp.Navigate(s.base+"/#/"+page), chromedp.WaitVisible(chromedp.CSS(`main[data-ready="`+page+`"] table`)),
			chromedp.Click(chromedp.CSS("main details summary")), chromedp.SendKeys(chromedp.CSS("#agent"), "travel"),
			chromedp.SetValue(chromedp.CSS("#set"), content), chromedp.SetValue(chromedp.CSS("#metrics"), uiMetrics))
	}
	// shownJob waits for the page of the job the submission made.
	shownJob := func() string {
		b.t.Helper()
		b.run("the job's page", chromedp.WaitVisible(chromedp.CSS(`main[data-ready^="jobs/"] dl.kv`)))
		loc := get(b, "location", chromedp.Location())
		return loc[strings.LastIndex(loc, "/")+1:]
	}
	jobs := func() []string {
		b.t.Helper()
		var page struct {
			Items []struct {
				JobID string `json:"job_id"`
			} `json:"items"`
		}
		if code := s.apiCall(b.t, http.MethodGet, "/dev/v1/evaluation/jobs?limit=100", nil, &page); code != http.StatusOK {
			b.t.Fatalf("list jobs: %d", code)
		}
		var ids []string
		for _, j := range page.Items {
			ids = append(ids, j.JobID)
		}
		return ids
	}
	hexKey := regexp.MustCompile(`^[0-9a-f]{32}$`)
	// newKeys returns the keys sent since the last call.
	seen := 0
	newKeys := func() []string {
		b.t.Helper()
		keys, errs := ic.sent()
		if len(errs) > 0 {
			b.t.Fatalf("interception: %q", errs)
		}
		out := keys[seen:]
		seen = len(keys)
		return out
	}

	var keyA, jobA string
	t.Run("clicks and Enter while a submission is in flight send nothing", func(t *testing.T) {
		b.t = t
		ic.then(submitFault{kind: "hold"})
		fillForm(set("a"))
		b.run("submit", chromedp.Click(chromedp.CSS(submit)))
		ic.waitHeld(t)
		if !get(b, "the form while in flight", chromedp.Evaluate[bool](`(() => {
			const f = document.querySelector('main details form');
			return f.querySelector('button[type=submit]').disabled && f.getAttribute('aria-busy') === 'true';
		})()`)) {
			t.Error("while the submission is in flight the button is not disabled and the form not busy")
		}
		// A double click's second click, another click, and Enter in the
		// agent field (an implicit submission).
		b.run("click again and press Enter", chromedp.Click(chromedp.CSS(submit)), chromedp.Click(chromedp.CSS(submit)),
			chromedp.Click(chromedp.CSS("#agent")), chromedp.KeyEvent(kb.Enter))
		close(ic.release)
		jobA = shownJob()
		keys := newKeys()
		if len(keys) != 1 || !hexKey.MatchString(keys[0]) || !evalrecord.ValidRequestID(keys[0]) {
			t.Fatalf("submissions sent %q, want one with a 32-hex-digit key", keys)
		}
		keyA = keys[0]
		if ids := jobs(); len(ids) != 1 || ids[0] != jobA {
			t.Fatalf("jobs %q, want only %s", ids, jobA)
		}
	})

	t.Run("a lost answer and a 503 are retried with the same key: one job", func(t *testing.T) {
		b.t = t
		// The server makes the job each time; the page never hears it
		// until the fourth attempt, the user's Retry.
		ic.then(submitFault{kind: "lose_answer"}, submitFault{kind: "answer_503"}, submitFault{kind: "lose_answer"})
		fillForm(set("b"))
		b.run("submit until the automatic retries give up", chromedp.Click(chromedp.CSS(submit)), chromedp.WaitVisible(chromedp.CSS("#submit-retry")))
		b.shows("retry", "network error", "may or may not have been created", "same Idempotency-Key")
		if get(b, "the button after the retries", chromedp.Evaluate[bool](`document.querySelector('main details form button[type=submit]').disabled`)) {
			t.Error("the submit button stays disabled after the submission failed")
		}
		b.checkA11y("submit retry")
		b.run("retry", chromedp.Click(chromedp.CSS("#submit-retry")))
		jobB := shownJob()
		keys := newKeys()
		if len(keys) != 4 || keys[0] == keyA || !evalrecord.ValidRequestID(keys[0]) || keys[1] != keys[0] || keys[2] != keys[0] || keys[3] != keys[0] {
			t.Fatalf("submissions sent %q, want four with one key, not the first form's %s", keys, keyA)
		}
		if ids := jobs(); len(ids) != 2 || jobB == jobA || (ids[0] != jobB && ids[1] != jobB) {
			t.Fatalf("jobs %q, want %s and the changed form's %s", ids, jobA, jobB)
		}
	})

	t.Run("a reused key is said plainly and a new submission draws a new key", func(t *testing.T) {
		b.t = t
		// The first form's key on other content: the server answers 422.
		ic.then(submitFault{kind: "send_key", key: keyA})
		fillForm(set("c"))
		b.run("submit", chromedp.Click(chromedp.CSS(submit)), chromedp.WaitVisible(chromedp.CSS("#submit-new")))
		if got := b.text("#submit-status .error"); !strings.Contains(got, "idempotency_key_reused: no job was created") ||
			!strings.Contains(got, "already used in the last hour for a submission with other content") {
			t.Errorf("the 422 reads %q", got)
		}
		if ids := jobs(); len(ids) != 2 {
			t.Fatalf("jobs %q after a refused submission", ids)
		}
		b.checkA11y("reused key")
		b.run("submit as a new job", chromedp.Click(chromedp.CSS("#submit-new")))
		jobC := shownJob()
		keys := newKeys()
		if len(keys) != 2 || keys[1] == keys[0] || keys[1] == keyA || !evalrecord.ValidRequestID(keys[1]) {
			t.Fatalf("submissions sent %q, want the refused one and one with a new key", keys)
		}
		if ids := jobs(); len(ids) != 3 || jobC == jobA {
			t.Fatalf("jobs %q, want three", ids)
		}
	})

	b.t = t
	if keys := newKeys(); len(keys) != 0 {
		t.Errorf("late submissions %q", keys)
	}
	b.checkClean()
}
