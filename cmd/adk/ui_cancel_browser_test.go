package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/fadcedab/adk/store/evalrecord"
)

// TestClusterUI_CancelIsIdempotent drives a running job's Cancel button
// in headless Chromium against `adk serve --http-addr`, with the network
// between them failing on purpose: a double click and more clicks while
// the cancel is in flight send one cancel (the button is disabled); a
// cancel whose answer is lost is retried automatically with the same
// Idempotency-Key, and the server, which did cancel the job the first
// time, answers the retry as it answered the first attempt; both pages
// then say plainly that the job was cancelled, with no error.
func TestClusterUI_CancelIsIdempotent(t *testing.T) {
	b := newBrowser(t)
	s := startUIStack(t)
	// Only DELETE on a job's own URL: not its status GET, not its events.
	ic := interceptWrites(t, b, http.MethodDelete, "*/dev/v1/evaluation/jobs/eval-"+strings.Repeat("?", 32))
	s.provider.hold() // every job stays running until it is cancelled
	b.run("log in", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), uiToken), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`main[data-ready="jobs"] table`)))

	// The button by its text, as a user finds it.
	const cancelBtn = chromedp.Search(`//main//button[normalize-space()="Cancel job"]`)
	// runningJob submits a job over the API and opens its page.
	runningJob := func() string {
		b.t.Helper()
		var job evalrecord.Job
		if code := s.apiCall(b.t, http.MethodPost, "/dev/v1/evaluation/jobs",
			map[string]any{"agent_name": "travel", "set": json.RawMessage(uiGoodSet)}, &job); code != http.StatusAccepted {
			b.t.Fatalf("submit: %d", code)
		}
		b.run("the job's page", chromedp.Navigate(s.base+"/#/jobs/"+job.JobID),
			chromedp.WaitVisible(chromedp.CSS(`main[data-ready="jobs/`+job.JobID+`"] dl.kv`)), chromedp.WaitVisible(cancelBtn))
		return job.JobID
	}
	// cancelled checks, over the API, that the job was cancelled by a user.
	cancelled := func(id string) {
		b.t.Helper()
		var job evalrecord.Job
		if code := s.apiCall(b.t, http.MethodGet, "/dev/v1/evaluation/jobs/"+id, nil, &job); code != http.StatusOK ||
			job.Phase != evalrecord.PhaseCancelled || job.Reason != evalrecord.ReasonUserCancelled {
			b.t.Fatalf("job %s: %d, phase %q, reason %q", id, code, job.Phase, job.Reason)
		}
	}
	hexKey := regexp.MustCompile(`^[0-9a-f]{32}$`)
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
	// saysCancelled waits for the page's plain outcome.
	saysCancelled := func() {
		b.t.Helper()
		b.run("the page says the job was cancelled", void(chromedp.Poll[bool](
			`(() => { const s = document.querySelector('#cancel-status'); return !!s && s.textContent === 'The job was cancelled.'; })()`)))
		if get(b, "an error on the page", chromedp.Evaluate[bool](`!!document.querySelector('main .error')`)) {
			b.t.Errorf("the page shows an error: %s", b.text("main .error"))
		}
	}

	t.Run("a double click while the cancel is in flight sends one", func(t *testing.T) {
		b.t = t
		ic.then(writeFault{kind: "hold"})
		id := runningJob()
		// A double click: two presses, the second counting 2.
		b.run("double click", chromedp.Click(cancelBtn), chromedp.DoubleClick(cancelBtn))
		ic.waitHeld(t)
		if !get(b, "the button while in flight", chromedp.Evaluate[bool](`(() => {
			const c = [...document.querySelectorAll('main button')].find((x) => x.textContent === 'Cancel job');
			return !!c && c.disabled;
		})()`)) {
			t.Error("while the cancel is in flight the button is not disabled")
		}
		b.run("click again", chromedp.Click(cancelBtn))
		close(ic.release)
		b.run("the page shows the job cancelled", phaseIs("cancelled"))
		if keys := newKeys(); len(keys) != 1 || !hexKey.MatchString(keys[0]) || !evalrecord.ValidRequestID(keys[0]) {
			t.Fatalf("cancels sent %q, want one with a 32-hex-digit key", keys)
		}
		saysCancelled()
		cancelled(id)
	})

	t.Run("a lost answer is retried with the same key: one cancel, no error", func(t *testing.T) {
		b.t = t
		// The server cancels the job; the page never hears it.
		ic.then(writeFault{kind: "lose_answer"})
		id := runningJob()
		b.run("cancel", chromedp.Click(cancelBtn))
		b.run("the page shows the job cancelled", phaseIs("cancelled"))
		saysCancelled()
		keys := newKeys()
		if len(keys) != 2 || !hexKey.MatchString(keys[0]) || keys[1] != keys[0] {
			t.Fatalf("cancels sent %q, want the lost one and its retry with one key", keys)
		}
		cancelled(id)
		b.checkA11y("job cancelled")
	})

	b.t = t
	if keys := newKeys(); len(keys) != 0 {
		t.Errorf("late cancels %q", keys)
	}
	b.checkClean()
}
