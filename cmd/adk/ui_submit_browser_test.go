package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/fadcedab/adk/store/evalrecord"
)

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
	// The list's GET has a query and the event streams a longer path: only
	// the submit route matches.
	ic := interceptWrites(t, b, http.MethodPost, "*/dev/v1/evaluation/jobs")
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
		ic.then(writeFault{kind: "hold"})
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
		ic.then(writeFault{kind: "lose_answer"}, writeFault{kind: "answer_503"}, writeFault{kind: "lose_answer"})
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
		ic.then(writeFault{kind: "send_key", key: keyA})
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
