package devapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/devapi/ui"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/testcluster"
)

// bigCompareSet is a set of n cases with ids of about 4,000 bytes, so
// that a comparison of n rows passes 1 MiB at n = 300. pad bytes of
// input per case make the stored result as large as wanted (the scripted
// agent echoes it). A case passes unless fails(i).
func bigCompareSet(version string, n, pad int, fails func(int) bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"schema_version":2,"id":"big-compare","version":%q,"cases":[`, version)
	idPad := strings.Repeat("i", 4000)
	in := strings.Repeat("x", pad)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		input := fmt.Sprintf("%s%d", in, i)
		want := "echo: " + input
		if fails(i) {
			want = "no"
		}
		fmt.Fprintf(&b, `{"id":"case-%04d-%s","turns":[{"id":"t","input":%q,"expected_response":%q}]}`, i, idPad, input, want)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// storedResult reads a completed job's result as its stream and builds
// the document in memory (the test may; the gateway must not); it also
// returns the stream.
func storedResult(t *testing.T, e *env, scope, jobID string) (*evalengine.Result, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := e.cl.ResultStream(context.Background(), scope, jobID, &buf, 0); err != nil {
		t.Fatal(err)
	}
	st, err := evalengine.ReadStream(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := evalengine.StreamToResult(st)
	if err != nil {
		t.Fatal(err)
	}
	return r, buf.Bytes()
}

// liveHeapPeak returns how far the live heap rose above its level
// before run while run ran: a goroutine collects garbage again and again
// (runtime.GC, then the heap in use is what is live) until run returns.
func liveHeapPeak(run func()) uint64 {
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := live()
	peak := before
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				peak = max(peak, live())
			}
		}
	}()
	run()
	close(stop)
	wg.Wait()
	return peak - before
}

// TestClusterDevAPI_CompareOfAnySize: compare by reference of stored
// results past both of the route's old bounds. Job "a" has 300 cases
// whose samples hold about 22 MB, past the 16 MiB of a result document
// (its document read was 400 eval_report_too_large); job "b" is a later
// version of the set, small, with regressions and missing cases. Their
// comparison has 300 rows of ~4.1 KiB, past the 1 MiB the route sent
// (400 output_limit_exceeded). Now the comparison streams, byte for byte
// evalengine.Compare of the same results rendered as json, named by job
// id or by baseline name, and the heap it takes does not grow with the
// samples' bytes; max_output_bytes still bounds it; the UI pages it.
// (Under 1 MiB the answer is one body with its content-length, as
// before: ReportParityLarge, CompareDocumentJobs.)
func TestClusterDevAPI_CompareOfAnySize(t *testing.T) {
	// Samples of 64 KB under the race detector: workers are lost only
	// after 10 s of silence, not the tests' usual second.
	e := startEnv(t, testcluster.EvalOptions{NATSNodes: 1, Workers: []string{"w0", "w1"}, Capacity: 16,
		Limits: coordinator.Limits{ValidationTimeout: time.Minute},
		Timing: coordinator.Timing{RaftHeartbeat: 300 * time.Millisecond, RaftLeaderLease: 150 * time.Millisecond,
			Tick: 20 * time.Millisecond, LeaseInterval: 200 * time.Millisecond, FenceLease: 15 * time.Second,
			WorkerTTL: 10 * time.Second, DispatchGrace: 20 * time.Second, TaskAckWait: 10 * time.Second, ResultAckWait: 10 * time.Second}})
	const n, missing = 300, 15
	// A's set is 12 MB: uploaded in parts and validated, slowly under
	// the race detector. The jobs' deadline (timeout_ms, 60 s by default)
	// is raised: under load job a took over a minute and timed out.
	slow := client.New(e.nc, 2*time.Minute)
	submitted := func(set []byte) string {
		t.Helper()
		j, err := slow.Submit(context.Background(), "team-a", api.SubmitRequest{Set: set, Agent: "scripted", Options: []byte(`{"timeout_ms":600000}`)})
		if err != nil {
			t.Fatal(err)
		}
		return j.JobID
	}
	a := submitted(bigCompareSet("1", n, 32<<10, func(i int) bool { return i%4 != 0 }))
	// b: a third of the cases that passed in a fail, the last 15 are gone.
	b := submitted(bigCompareSet("2", n-missing, 0, func(i int) bool { return i%2 == 1 || i%6 == 0 }))
	wantRegressions := missing
	for i := 0; i < n-missing; i += 12 {
		wantRegressions++
	}
	e.c.WaitJob(e.cl, "team-a", a, 5*time.Minute, "completed")
	e.c.WaitJob(e.cl, "team-a", b, 60*time.Second, "completed")
	ra, jsonlA := storedResult(t, e, "team-a", a)
	streamA := len(jsonlA)
	rb, _ := storedResult(t, e, "team-a", b)
	if ra.ErrorCaseCount+rb.ErrorCaseCount != 0 {
		t.Fatalf("%d and %d cases in error", ra.ErrorCaseCount, rb.ErrorCaseCount)
	}
	want := func(base, cur *evalengine.Result) []byte {
		t.Helper()
		cmp, err := evalengine.Compare(base, cur, evalengine.CompareOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := evalengine.WriteComparison(&buf, cmp, "json", evalengine.ExportOptions{}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	wantAB := want(ra, rb)
	if len(wantAB) <= devapi.MaxResponseBytes {
		t.Fatalf("the comparison has %d bytes, not over 1 MiB", len(wantAB))
	}
	if doc, err := e.cl.Result(context.Background(), "team-a", a); err == nil || api.AsError(err).Code != evalengine.CodeReportTooLarge {
		t.Fatalf("job a's document read: %d bytes, %v, want %s (its stream has %d bytes)", len(doc), err, evalengine.CodeReportTooLarge, streamA)
	}

	// The live heap of this process (the gateway, and the coordinator
	// serving the pages) while the gateway compares a with b. a's
	// document alone would be its 24 MB, decoded about as much again, and
	// its pages assembled once more: the stream is read a page at a time
	// instead.
	body := []byte(`{"baseline_job_id":"` + a + `","current_job_id":"` + b + `"}`)
	var got answer
	grew := liveHeapPeak(func() { got = do(t, e.base, "POST", "/dev/v1/evaluation/compare", tokAlice, body) })
	if got.status != 200 || got.header.Get("content-length") != "" {
		t.Fatalf("compare a with b: %d, content-length %q, %.300s", got.status, got.header.Get("content-length"), got.body)
	}
	if !bytes.Equal(got.body, wantAB) {
		t.Fatalf("compare a with b: %d bytes, want evalengine's %d", len(got.body), len(wantAB))
	}
	cmp, err := evalengine.ReadComparison(bytes.NewReader(got.body))
	if err != nil {
		t.Fatal(err)
	}
	regressions := 0
	for _, d := range cmp.CaseDiffs {
		if d.Regression {
			regressions++
		}
	}
	// Of a's passing cases (i%4 == 0), those with i%6 == 0 fail in b, and
	// a's last cases are missing from b.
	if cmp.Passed || len(cmp.CaseDiffs) != n || regressions != wantRegressions {
		t.Errorf("comparison: passed %v, %d rows, %d regressions", cmp.Passed, len(cmp.CaseDiffs), regressions)
	}
	t.Logf("compare a with b: %d bytes out; the live heap rose %.1f MiB at the peak; a's result %.1f MiB",
		len(got.body), float64(grew)/(1<<20), float64(streamA)/(1<<20))
	if streamA < 16<<20 || grew > 2*uint64(streamA) {
		t.Errorf("the live heap rose %d bytes comparing a result of %d bytes", grew, streamA)
	}

	// By baseline name. b's result (3 MB) is over a NATS reply: the put answers the row
	// without it and the get says so at once (both waited out the
	// client's timeout, 503, before).
	if put := do(t, e.base, "PUT", "/dev/v1/evaluation/baselines/b", tokAlice, []byte(`{"job_id":"`+b+`"}`)); put.status != 200 ||
		!strings.Contains(string(put.body), `"result":null`) {
		t.Fatalf("put baseline: %d %.300s", put.status, put.body)
	}
	start := time.Now()
	if get := do(t, e.base, "GET", "/dev/v1/evaluation/baselines/b", tokAlice, nil); get.status != 400 ||
		!strings.Contains(string(get.body), `"reason":"`+api.CodeRequestLimit+`"`) || time.Since(start) > 5*time.Second {
		t.Errorf("get baseline b: %d after %v: %.300s", get.status, time.Since(start), get.body)
	}
	row, err := e.cl.BaselineRow(context.Background(), "team-a", "b")
	if err != nil || row.JobID != b || row.Result != nil || row.ResultDigest == "" {
		t.Fatalf("baseline row: %+v %v", row, err)
	}
	got = do(t, e.base, "POST", "/dev/v1/evaluation/compare", tokAlice, []byte(`{"baseline_name":"b","current_job_id":"`+a+`"}`))
	if wantBA := want(rb, ra); got.status != 200 || !bytes.Equal(got.body, wantBA) {
		t.Errorf("compare baseline b with a: %d, %d bytes, want %d: %.300s", got.status, len(got.body), len(wantBA), got.body)
	}
	// Another principal's names and jobs stay unknown.
	for _, body := range []string{`{"baseline_name":"b","current_job_id":"` + a + `"}`, `{"baseline_job_id":"` + a + `","current_job_id":"` + b + `"}`} {
		if got := do(t, e.base, "POST", "/dev/v1/evaluation/compare", tokBob, []byte(body)); got.status != 404 || got.errCode() != devapi.CodeNotFound {
			t.Errorf("bob: %s: %d %s", body, got.status, got.body)
		}
	}

	// The caller's bound still refuses, typed.
	got = do(t, e.base, "POST", "/dev/v1/evaluation/compare", tokAlice,
		[]byte(`{"baseline_job_id":"`+a+`","current_job_id":"`+b+`","options":{"max_output_bytes":1048576}}`))
	if got.status != 400 || got.errCode() != devapi.CodeInvalidReport || !strings.Contains(string(got.body), `"reason":"output_limit_exceeded"`) {
		t.Errorf("max_output_bytes: %d %s", got.status, got.body)
	}
	checkStoredReportsOfAnySize(t, e, a, b, jsonlA, ra, rb)
	// a's case rows (ids of 4 KB: a page of 1,000 rows ends at the byte
	// bound, after about 230) and b's, from their streams.
	checkCasesPages(t, e, a, ra, devapi.MaxCasesPage)
	checkCasesPages(t, e, b, rb, devapi.DefaultCasesPage)
	// A case of a, with its sample, from a's stream: the one the UI
	// opens below.
	opened := wantCaseRows(ra, devapi.CasesFailuresFirst)[100].CaseIndex
	start = time.Now()
	read := e.srv.StreamBytesRead()
	checkCasePages(t, e.base, a, opened, &ra.Cases[opened], devapi.DefaultCaseSamples)
	read = e.srv.StreamBytesRead() - read
	t.Logf("case %d of a: read in %v, %d bytes of its %d-byte stream", opened, time.Since(start).Round(time.Millisecond), read, streamA)
	// Its own sample (about 70 KB) and case line, not the stream up to
	// them (the 24 MB, at worst).
	if read*50 > int64(streamA) {
		t.Errorf("case %d of a read %d bytes of its %d-byte stream", opened, read, streamA)
	}
	checkUIPagesComparison(t, e, a, b, n, wantRegressions, streamA, ra)

}

// TestClusterDevAPI_CompareDocumentJobs: jobs completed as one document
// (the form before results as records) have no stream; compare reads
// their documents, by job id and by baseline name, and answers what it
// answered before: evalengine.Compare rendered as json, one body with its
// content-length.
func TestClusterDevAPI_CompareDocumentJobs(t *testing.T) {
	e := startEnv(t, testcluster.EvalOptions{NATSNodes: 1, ResultDocuments: true})
	ids := make([]string, 2)
	docs := make([]*evalengine.Result, 2)
	for i, version := range []string{"1", "2"} {
		set := bytes.Replace(testcluster.EvalSet("doc-compare", 20-5*i), []byte(`"version":"1"`), []byte(`"version":"`+version+`"`), 1)
		j, err := e.cl.Submit(context.Background(), "team-a", api.SubmitRequest{Set: set, Agent: "scripted"})
		if err != nil {
			t.Fatal(err)
		}
		e.c.WaitJob(e.cl, "team-a", j.JobID, 30*time.Second, "completed")
		doc, err := e.cl.Result(context.Background(), "team-a", j.JobID)
		if err != nil {
			t.Fatal(err)
		}
		ids[i], docs[i] = j.JobID, mustResult(t, doc)
	}
	if _, err := e.cl.ResultStream(context.Background(), "team-a", ids[0], io.Discard, 0); api.AsError(err).Code != api.CodeInvalidRequest {
		t.Fatalf("a document job's stream: %v", err)
	}
	cmp, err := evalengine.Compare(docs[0], docs[1], evalengine.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := evalengine.Render(cmp, "json", evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Their case rows page from the documents.
	checkCasesPages(t, e, ids[0], docs[0], 7)
	// And a case with its samples, from the document.
	for _, ci := range []int{0, 3} {
		checkCasePages(t, e.base, ids[0], ci, &docs[0].Cases[ci], devapi.DefaultCaseSamples)
	}
	checkCaseRouteRefusals(t, e.base, ids[0], len(docs[0].Cases), docs[0].SampleCount)
	if a := do(t, e.base, "PUT", "/dev/v1/evaluation/baselines/main", tokAlice, []byte(`{"job_id":"`+ids[0]+`"}`)); a.status != 200 {
		t.Fatalf("put baseline: %d %s", a.status, a.body)
	}
	for _, body := range []string{
		`{"baseline_job_id":"` + ids[0] + `","current_job_id":"` + ids[1] + `"}`,
		`{"baseline_name":"main","current_job_id":"` + ids[1] + `"}`,
	} {
		a := do(t, e.base, "POST", "/dev/v1/evaluation/compare", tokAlice, []byte(body))
		if a.status != 200 || !bytes.Equal(a.body, want) || a.header.Get("content-length") != fmt.Sprint(len(want)) {
			t.Errorf("%s: %d, content-length %q: %.300s", body, a.status, a.header.Get("content-length"), a.body)
		}
	}
}

// checkUIPagesComparison opens the web UI's compare page for baseline a
// and current b in Chromium (skipped without one): the case table shows
// 100 rows at a time, regressions first, and Next shows the next 100.
// Then job a's page, whose result (a stream of streamA bytes) is past one
// document: it offers downloads, and the JSON Lines one arrives whole.
func checkUIPagesComparison(t *testing.T, e *env, a, b string, rows, regressions, streamA int, ra *evalengine.Result) {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Log("UI check skipped: Chromium is not installed (Debian: apt-get install chromium)")
		return
	}
	_, base := newServer(t, devapi.Options{Tokens: e.tokens, Coord: e.cl, NATS: e.nc, UI: ui.Handler()})
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	var exceptions []string
	var mu sync.Mutex
	if err := chromedp.Listen(bctx, func(ev any) {
		if ex, ok := ev.(*cdpruntime.EventExceptionThrown); ok {
			mu.Lock()
			exceptions = append(exceptions, ex.ExceptionDetails.Text)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	count := chromedp.Evaluate[int](`document.querySelectorAll('#case-rows tbody tr').length`)
	firstStatus := chromedp.Evaluate[string](`document.querySelector('#case-rows tbody tr td:last-child').textContent`)
	pagerText := chromedp.Evaluate[string](`(document.querySelector('#case-rows .pager') || {}).textContent || ''`)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"),
		voidAction(chromedp.Evaluate[bool](`(sessionStorage.setItem('adk.devtoken', '`+tokAlice+`'), true)`)),
		chromedp.Navigate(base+"/#/compare?baseline="+a+"&current="+b+"&go=1"),
		chromedp.WaitVisible(chromedp.CSS("#rows-next"))); err != nil {
		t.Fatalf("UI compare page: %v", err)
	}
	pager := fmt.Sprintf("Rows 1–100 of %d (%d regressions)", rows, regressions)
	if text, err := chromedp.Run(ctx, pagerText); err != nil || !strings.Contains(text, pager) {
		t.Errorf("pager %q (%v), want %q", text, err, pager)
	}
	if n, err := chromedp.Run(ctx, count); err != nil || n != 100 {
		t.Errorf("%d rows shown (%v), want 100", n, err)
	}
	if s, err := chromedp.Run(ctx, firstStatus); err != nil || !strings.Contains(s, "REGRESSION") {
		t.Errorf("first row's status %q (%v), want a regression first", s, err)
	}
	next := fmt.Sprintf("Rows 101–200 of %d", rows)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#rows-next")),
		voidAction(chromedp.Poll[bool](fmt.Sprintf(`(document.querySelector('#case-rows .pager') || {}).textContent.includes(%q)`, next)))); err != nil {
		text, _ := chromedp.Run(ctx, pagerText)
		t.Fatalf("next page: %v (pager %q)", err, text)
	}
	if n, err := chromedp.Run(ctx, count); err != nil || n != 100 {
		t.Errorf("%d rows shown after Next (%v), want 100", n, err)
	}

	// Job a's page: its result is past one document, so the page shows
	// its summary and its case rows from the cases route, 100 at a time,
	// failures first, and offers the downloads the report route streams;
	// the JSON Lines one brings the whole stream through the browser.
	failed := ra.CaseCount - ra.PassedCaseCount
	want := wantCaseRows(ra, devapi.CasesFailuresFirst)
	firstCase := chromedp.Evaluate[string](`document.querySelector('#case-rows tbody tr td').textContent`)
	passRate := chromedp.Evaluate[string](`[...document.querySelectorAll('dl.kv dt')].filter((x) => x.textContent === 'Pass rate').map((x) => x.nextElementSibling.textContent).join('')`)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/jobs/"+a),
		chromedp.WaitVisible(chromedp.CSS("#rows-next"))); err != nil {
		t.Fatalf("job page of a result past 16 MiB: %v", err)
	}
	pager = fmt.Sprintf("Rows 1–100 of %d (%d not passed)", ra.CaseCount, failed)
	if text, err := chromedp.Run(ctx, pagerText); err != nil || !strings.Contains(text, pager) {
		t.Errorf("job a's pager %q (%v), want %q", text, err, pager)
	}
	wantRate := fmt.Sprintf("%.4f (%d/%d cases;", ra.PassRate, ra.PassedCaseCount, ra.CaseCount)
	if text, err := chromedp.Run(ctx, passRate); err != nil || !strings.HasPrefix(text, wantRate) {
		t.Errorf("job a's pass rate %q (%v), want %q…", text, err, wantRate)
	}
	if n, err := chromedp.Run(ctx, count); err != nil || n != 100 {
		t.Errorf("job a: %d rows shown (%v), want 100", n, err)
	}
	if id, err := chromedp.Run(ctx, firstCase); err != nil || id != want[0].CaseID {
		t.Errorf("job a's first row %.40q (%v), want %.40q", id, err, want[0].CaseID)
	}
	for _, page := range []int{1, 2} {
		next := fmt.Sprintf("Rows %d–%d of %d", page*100+1, min(page*100+100, ra.CaseCount), ra.CaseCount)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#rows-next")),
			voidAction(chromedp.Poll[bool](fmt.Sprintf(`(document.querySelector('#case-rows .pager') || {}).textContent.includes(%q)`, next)))); err != nil {
			text, _ := chromedp.Run(ctx, pagerText)
			t.Fatalf("job a, next page: %v (pager %q)", err, text)
		}
		if id, err := chromedp.Run(ctx, firstCase); err != nil || id != want[page*100].CaseID {
			t.Errorf("job a, rows from %d: first %.40q (%v), want %.40q", page*100+1, id, err, want[page*100].CaseID)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#rows-prev")),
		voidAction(chromedp.Poll[bool](`(document.querySelector('#case-rows .pager') || {}).textContent.includes("Rows 101–200")`))); err != nil {
		t.Fatalf("job a, previous page: %v", err)
	}
	statusText := chromedp.Evaluate[string](`(document.querySelector('#big-result-status') || {}).textContent || ''`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#download-jsonl")),
		chromedp.Click(chromedp.CSS("#download-jsonl")),
		voidAction(chromedp.Poll[bool](`(document.querySelector('#big-result-status') || {}).textContent.startsWith('Downloaded')`))); err != nil {
		text, _ := chromedp.Run(ctx, statusText)
		t.Fatalf("job page of a result past 16 MiB: %v (status %q)", err, text)
	}
	file := regexp.MustCompile(`[^A-Za-z0-9_.-]`).ReplaceAllString(a, "_") // as app.js names it
	wantStatus := fmt.Sprintf("Downloaded adk-result-%s.jsonl (%.1f MiB).", file, float64(streamA)/(1<<20))
	if text, err := chromedp.Run(ctx, statusText); err != nil || text != wantStatus {
		t.Errorf("download status %q (%v), want %q", text, err, wantStatus)
	}
	// A row opens its case's page: the case and its sample, read from
	// the stream (rows 101–200 are shown; the first is the 101st). The
	// gateway reads the stream's sample lines up to the case's sample,
	// which takes a while under the race detector: a deadline of its own.
	// The link is clicked from the page's script: its text is the
	// 4,000-byte case id, so its centre, where a mouse click lands, is
	// far right of the window.
	c := &ra.Cases[want[100].CaseIndex]
	ctx, cancelCase := context.WithTimeout(bctx, 3*time.Minute)
	defer cancelCase()
	heading := chromedp.Evaluate[string](`document.querySelector('main h1 code').textContent`)
	sampleText := chromedp.Evaluate[string](`[...document.querySelectorAll('#case-samples section.sample')].map((x) => x.textContent).join('|')`)
	start := time.Now()
	if err := chromedp.Do(ctx, voidAction(chromedp.Evaluate[bool](`(document.querySelector('#case-rows tbody tr td a').click(), true)`)),
		chromedp.WaitVisible(chromedp.CSS(`#case-samples section.sample`))); err != nil {
		page, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('main').textContent`))
		t.Fatalf("open a case of a result past 16 MiB: %v after %v; the page reads %.500q", err, time.Since(start), page)
	}
	t.Logf("the case page of a result past 16 MiB opened in %v", time.Since(start).Round(time.Millisecond))
	if id, err := chromedp.Run(ctx, heading); err != nil || id != c.CaseID {
		t.Errorf("case page of %.40q shows %.40q (%v)", c.CaseID, id, err)
	}
	// Its one sample: its verdict, its input and the agent's answer.
	input, ok := c.Samples[0].Turns[0].Input.(string)
	if !ok || input == "" {
		t.Fatalf("case %.40q: its input is %T", c.CaseID, c.Samples[0].Turns[0].Input)
	}
	if text, err := chromedp.Run(ctx, sampleText); err != nil || strings.Count(text, "|") != 0 ||
		!strings.Contains(text, "Sample 0 "+c.Samples[0].Status) || !strings.Contains(text, "echo: "+input) {
		t.Errorf("case page samples (%v): %.200q…, want sample 0 %s echoing %.40q…", err, text, c.Samples[0].Status, input)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(exceptions) > 0 {
		t.Errorf("uncaught exceptions: %q", exceptions)
	}
}

// voidAction drops an action's value so it can run in a sequence.
func voidAction[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, tg)
		return chromedp.Void{}, err
	}
}

// checkStoredReportsOfAnySize: the job routes that read a stored result
// as one document (report, result, stats) with job a, whose samples are
// over the document's 16 MiB (they were all 400 eval_report_too_large).
// markdown (case by case) and html (one page of at most 16 MiB) are
// evalengine.RenderStream of a's stream, byte for byte, chunked past
// 1 MiB, the spool file removed (junit, sarif and annotations take the
// same path: evalengine's tests hold RenderStream to Render for them;
// each format here reads a's 24 MB again, seconds under -race);
// format=jsonl is the stream itself; json and /result are a typed 413
// naming format=jsonl (the UI's job page reads these two, so it shows
// that error instead of loading the stream); max_bytes and an operator's
// lower ceiling still refuse, typed; stats of b then a is evalengine.StatsReport of the decoded
// results.
func checkStoredReportsOfAnySize(t *testing.T, e *env, a, b string, jsonlA []byte, ra, rb *evalengine.Result) {
	t.Helper()
	spool := t.TempDir()
	t.Setenv("TMPDIR", spool)
	path := "/dev/v1/evaluation/jobs/" + a
	for _, route := range []string{"/result", "/report?format=json"} {
		got := do(t, e.base, "GET", path+route, tokAlice, nil)
		if got.status != 413 || got.errCode() != devapi.CodeResponseTooLarge || !strings.Contains(string(got.body), "format=jsonl") ||
			!strings.Contains(string(got.body), `"reason":"`+evalengine.CodeReportTooLarge+`"`) {
			t.Errorf("GET %s of a: %d %.300s", route, got.status, got.body)
		}
	}
	got := do(t, e.base, "GET", path+"/report?format=jsonl", tokAlice, nil)
	if got.status != 200 || got.header.Get("content-length") != "" || got.header.Get("content-type") != devapi.ContentTypeJSONL ||
		!bytes.Equal(got.body, jsonlA) {
		t.Errorf("report jsonl of a: %d %q %q, %d bytes, want its stream's %d", got.status, got.header.Get("content-length"),
			got.header.Get("content-type"), len(got.body), len(jsonlA))
	}
	// The caller's bound refuses, typed, at the first page past it.
	got = do(t, e.base, "GET", path+"/report?format=jsonl&max_bytes=4096", tokAlice, nil)
	if got.status != 413 || got.errCode() != devapi.CodeResponseTooLarge || !strings.Contains(string(got.body), `"max_bytes":4096`) {
		t.Errorf("report jsonl max_bytes=4096: %d %.300s", got.status, got.body)
	}
	// So does an operator's lower report ceiling, without max_bytes.
	_, low := newServer(t, devapi.Options{Tokens: e.tokens, Coord: e.cl, MaxReportBytes: 1 << 20})
	got = do(t, low, "GET", path+"/report?format=jsonl", tokAlice, nil)
	if got.status != 413 || got.errCode() != devapi.CodeResponseTooLarge || !strings.Contains(string(got.body), `"max_bytes":1048576`) {
		t.Errorf("report jsonl under a 1 MiB ceiling: %d %.300s", got.status, got.body)
	}
	sf, err := evalengine.OpenStreamFile(bytes.NewReader(jsonlA), int64(len(jsonlA)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{evalengine.FormatMarkdown, evalengine.FormatHTML} {
		var want bytes.Buffer
		if err := evalengine.RenderStream(&want, sf, f, evalengine.ExportOptions{MaxBytes: devapi.MaxReportBytes}); err != nil {
			t.Fatal(f, err)
		}
		// The heap is this process's, the test's read of the answer
		// included; html's page (16 MiB by design, held by RenderStream)
		// would say nothing of the stream, so only markdown's is sampled
		// (sampling collects again and again: slow under -race).
		var got answer
		var grew uint64
		start := time.Now()
		if f == evalengine.FormatMarkdown {
			grew = liveHeapPeak(func() { got = do(t, e.base, "GET", path+"/report?format="+f, tokAlice, nil) })
		} else {
			got = do(t, e.base, "GET", path+"/report?format="+f, tokAlice, nil)
		}
		if got.status != 200 || !bytes.Equal(got.body, want.Bytes()) || got.header.Get("content-length") != "" ||
			got.header.Get("content-type") != devapi.ContentType(f) {
			t.Errorf("report %s of a: %d, content-length %q, %d bytes, want RenderStream's %d: %.200s", f, got.status,
				got.header.Get("content-length"), len(got.body), want.Len(), got.body)
		}
		t.Logf("report %s of a: %d bytes in %v; the live heap rose %.1f MiB", f, len(got.body), time.Since(start).Round(time.Millisecond), float64(grew)/(1<<20))
		if grew > 2*uint64(len(jsonlA)) {
			t.Errorf("report %s: the live heap rose %d bytes for a result of %d bytes", f, grew, len(jsonlA))
		}
	}
	// The spool bound: a report whose stream alone passes it is 503
	// report_spool_limit; one that would pass it beside the spools of
	// other reports is 429 report_spool_full with retry-after. Both give
	// back what they took.
	// (Small bounds: each refused report reads its stream only up to them.)
	small, smallBase := newServer(t, devapi.Options{Tokens: e.tokens, Coord: e.cl, ReportSpoolBytes: 4 << 20})
	got = do(t, smallBase, "GET", path+"/report?format=markdown", tokAlice, nil)
	if got.status != 503 || got.errCode() != devapi.CodeServiceUnavailable || !strings.Contains(string(got.body), `"reason":"report_spool_limit"`) ||
		!strings.Contains(string(got.body), fmt.Sprintf(`"max_spool_bytes":%d`, 4<<20)) || got.header.Get("retry-after") != "" {
		t.Errorf("markdown of a %d-byte stream under a 4 MiB spool: %d %q %.300s", len(jsonlA), got.status, got.header.Get("retry-after"), got.body)
	}
	shared, sharedBase := newServer(t, devapi.Options{Tokens: e.tokens, Coord: e.cl, ReportSpoolBytes: 8 << 20})
	release, ok := shared.HoldSpool(6 << 20) // another report's spool
	if !ok {
		t.Fatal("hold the spool")
	}
	got = do(t, sharedBase, "GET", path+"/report?format=markdown", tokAlice, nil)
	release()
	if got.status != 429 || got.errCode() != devapi.CodeCapacityReached || !strings.Contains(string(got.body), `"reason":"report_spool_full"`) ||
		got.header.Get("retry-after") != "1" {
		t.Errorf("markdown beside a held spool: %d %q %.300s", got.status, got.header.Get("retry-after"), got.body)
	}
	if small.SpoolHeld() != 0 || shared.SpoolHeld() != 0 {
		t.Errorf("spool held after the reports: %d, %d", small.SpoolHeld(), shared.SpoolHeld())
	}
	if left, err := os.ReadDir(spool); err != nil || len(left) != 0 {
		t.Errorf("spool files left: %v %v", left, err)
	}
	if got := do(t, e.base, "GET", path+"/report?format=jsonl", tokBob, nil); got.status != 404 {
		t.Errorf("bob: report of a: %d %.200s", got.status, got.body)
	}
	wantStats, _, err := evalengine.StatsReport([]*evalengine.Result{rb, ra},
		evalengine.StatsOptions{Gate: evalengine.DefaultGateOptions(), Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	got = do(t, e.base, "POST", "/dev/v1/evaluation/stats", tokAlice, []byte(`{"job_ids":["`+b+`","`+a+`"]}`))
	if got.status != 200 || !bytes.Equal(got.body, wantStats) {
		t.Errorf("stats b, a: %d, %d bytes, want %d: %.300s", got.status, len(got.body), len(wantStats), got.body)
	}
}
