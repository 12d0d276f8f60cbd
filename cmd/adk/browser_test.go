package main

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browser is one headless Chromium shared by a test's pages. It records
// every JavaScript dialog (an alert is an XSS that ran), uncaught
// exception and request to a host other than 127.0.0.1 (the UI and the
// report work offline).
type browser struct {
	t   *testing.T
	ctx context.Context

	mu         sync.Mutex
	dialogs    []string
	exceptions []string
	foreign    []string
}

// chromiumPath finds Debian's chromium (or another Chrome) on PATH.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts Chromium or skips the test saying why.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("browser test skipped: Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			// The dialog blocks the page; close it from outside the
			// listener, which must not run commands.
			b.dialogs = append(b.dialogs, e.Message)
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		case *runtime.EventExceptionThrown:
			msg := e.ExceptionDetails.Text
			if ex := e.ExceptionDetails.Exception; ex != nil {
				msg += " " + ex.Description
			}
			b.exceptions = append(b.exceptions, msg)
		case *network.EventRequestWillBeSent:
			u, err := url.Parse(e.Request.URL)
			if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Hostname() != "127.0.0.1" {
				b.foreign = append(b.foreign, e.Request.URL)
			}
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// run runs actions with a deadline; chromedp's waits poll the page until
// their condition holds, so the deadline is an upper bound, not a pace.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	b.t.Fatalf("%s: %v\npage text: %.3000s", what, err, body)
}

// get runs one action that returns a value, with run's deadline.
func get[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}

// text is the visible text of the first node matching the CSS selector.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return get(b, "read "+sel, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
}

// screenshot captures the page, checks it is not blank (many colours, and
// not one colour over nearly all of it) and that the page shows every
// want text, and keeps the PNG in $ADK_UI_SCREENSHOTS when set.
func (b *browser) screenshot(name string, want ...string) {
	b.t.Helper()
	buf := get(b, "screenshot "+name, chromedp.FullScreenshot(100))
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if n, top := colourSpread(img); n < 8 || top > 0.995 {
		b.t.Errorf("screenshot %s looks blank: %d colours, the commonest covers %.1f%%", name, n, top*100)
	}
	body := b.text("body")
	for _, w := range want {
		if !strings.Contains(body, w) {
			b.t.Errorf("screenshot %s: the page does not show %q", name, w)
		}
	}
	if dir := os.Getenv("ADK_UI_SCREENSHOTS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644)
	}
}

// colourSpread counts distinct colours (sampled) and the share of the
// commonest one.
func colourSpread(img image.Image) (int, float64) {
	counts := map[uint32]int{}
	total := 0
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			counts[cr>>8<<16|cg>>8<<8|cb>>8]++
			total++
		}
	}
	top := 0
	for _, n := range counts {
		top = max(top, n)
	}
	return len(counts), float64(top) / float64(max(total, 1))
}

// checkClean fails on any dialog, uncaught exception or foreign request.
func (b *browser) checkClean() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) > 0 {
		b.t.Errorf("a script ran: dialogs %q", b.dialogs)
	}
	if len(b.exceptions) > 0 {
		b.t.Errorf("uncaught exceptions: %q", b.exceptions)
	}
	if len(b.foreign) > 0 {
		b.t.Errorf("requests left the machine: %q", b.foreign)
	}
}

// hostileSet's case id, input, expected answer and expected tool name are
// markup that would run a script if written as HTML.
const hostileSet = `{"id":"weather","version":"1","cases":[
 {"id":"<img src=x onerror=alert(1)>","turns":[{"input":"Weather in Oslo? <script>alert(2)</script>",
   "expected":{"response":"<script>alert(3)</script>","trajectory":["<svg onload=alert(4)>"]}}]},
 {"id":"pune","expected_trajectory":["get_weather"],"input":"Weather in Pune?","expected":"Sunny"}]}`

// TestBrowser_HTMLReportRendersHostileTextInert opens `adk eval run
// --format html` of a hostile, failing eval in Chromium: the markup shows
// as text, nothing runs, nothing is fetched.
func TestBrowser_HTMLReportRendersHostileTextInert(t *testing.T) {
	b := newBrowser(t)
	dir := fixture(t)
	writeFile(t, dir, "hostile.json", hostileSet)
	report := filepath.Join(dir, "report.html")
	var out, errb bytes.Buffer
	if code := run([]string{"eval", "run", "--config", filepath.Join(dir, "bad.json"), "--eval-set", filepath.Join(dir, "hostile.json"),
		"--criteria", filepath.Join(dir, "criteria.json"), "--format", "html", "--output", report}, &out, &errb); code != exitFailed {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b.run("open the report", chromedp.Navigate("file://"+report), chromedp.WaitVisible(chromedp.CSS("#details-h")))
	b.screenshot("html-report", "<img src=x onerror=alert(1)>", "<script>alert(3)</script>", "<svg onload=alert(4)>",
		"Weather in Oslo? <script>alert(2)</script>", "first unmatched expected call")
	n := get(b, "count elements", chromedp.Evaluate[int](`document.querySelectorAll('script,img,svg,iframe').length`))
	if n != 0 {
		t.Errorf("the report holds %d script/img/svg/iframe elements", n)
	}
	b.checkClean()
}
