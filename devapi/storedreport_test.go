package devapi_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/testcluster"
)

// quoteSet is a set of n failing cases whose inputs are pad apostrophes:
// one byte each in the result document, five in html ("&#39;"), where a
// failed sample shows its input, its response and their difference. So
// a result of a few MiB, well inside one document, has an html report
// over 16 MiB.
func quoteSet(n, pad int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"schema_version":2,"id":"quotes","version":"1","cases":[`)
	in := strings.Repeat("'", pad)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"case-%03d","turns":[{"id":"t","input":"%s%d","expected_response":"no"}]}`, i, in, i)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// TestClusterDevAPI_ReportOverTheCeilingOfAFittingResult: a result that
// fits one document (its report route rendered it from the document)
// but whose html report renders over 16 MiB was 413. Now, at the default
// ceiling, the report is rendered from the job's stream like a result
// past one document: one html page of at most 16 MiB, failed cases
// first under its note, chunked. max_bytes and an operator's lower
// ceiling still refuse it, typed; markdown, which fits, is Render's.
func TestClusterDevAPI_ReportOverTheCeilingOfAFittingResult(t *testing.T) {
	e := startEnv(t, testcluster.EvalOptions{NATSNodes: 1, Workers: []string{"w0", "w1"}, Capacity: 16,
		Limits: coordinator.Limits{ValidationTimeout: time.Minute},
		Timing: coordinator.Timing{RaftHeartbeat: 300 * time.Millisecond, RaftLeaderLease: 150 * time.Millisecond,
			Tick: 20 * time.Millisecond, LeaseInterval: 200 * time.Millisecond, FenceLease: 15 * time.Second,
			WorkerTTL: 10 * time.Second, DispatchGrace: 20 * time.Second, TaskAckWait: 10 * time.Second, ResultAckWait: 10 * time.Second}})
	start := time.Now()
	step := func(what string) { t.Logf("%v: %s", time.Since(start).Round(time.Millisecond), what) }
	slow := client.New(e.nc, 2*time.Minute)
	j, err := slow.Submit(context.Background(), "team-a", api.SubmitRequest{Set: quoteSet(24, 64<<10), Agent: "scripted"})
	if err != nil {
		t.Fatal(err)
	}
	id := j.JobID
	e.c.WaitJob(e.cl, "team-a", id, 60*time.Second, "completed")
	doc, err := e.cl.Result(context.Background(), "team-a", id)
	if err != nil {
		t.Fatalf("the result fits one document: %v", err)
	}
	r := mustResult(t, doc)
	step("completed")
	spool := t.TempDir()
	t.Setenv("TMPDIR", spool)
	path := "/dev/v1/evaluation/jobs/" + id + "/report?format=html"
	// The page is RenderStream's (the result past one document has that
	// checked byte for byte: CompareOfAnySize); here, that this report
	// took the stream's path: one bounded page with its note, chunked.
	got := do(t, e.base, "GET", path, tokAlice, nil)
	note := fmt.Sprintf(` of %d cases</strong>: the whole report is over the %d bytes one page holds.`, len(r.Cases), devapi.MaxReportBytes)
	if got.status != 200 || got.header.Get("content-length") != "" || got.header.Get("content-type") != devapi.ContentType(evalengine.FormatHTML) ||
		len(got.body) > devapi.MaxReportBytes || !bytes.Contains(got.body, []byte(`<p class="paged" role="note"><strong>This page shows `)) ||
		!bytes.Contains(got.body, []byte(note)) {
		t.Fatalf("html of a %d-byte result: %d, content-length %q, %d bytes: %.300s", len(doc), got.status,
			got.header.Get("content-length"), len(got.body), got.body)
	}
	step("html")
	t.Logf("html of a %d-byte result: %d bytes from its stream", len(doc), len(got.body))
	if left, err := os.ReadDir(spool); err != nil || len(left) != 0 {
		t.Errorf("spool files left: %v %v", left, err)
	}
	// The caller's bound and the operator's lower ceiling refuse, typed.
	got = do(t, e.base, "GET", path+"&max_bytes=1048576", tokAlice, nil)
	if got.status != 413 || got.errCode() != devapi.CodeResponseTooLarge || !strings.Contains(string(got.body), `"max_bytes":1048576`) {
		t.Errorf("html with max_bytes: %d %.300s", got.status, got.body)
	}
	_, low := newServer(t, devapi.Options{Tokens: e.tokens, Coord: e.cl, MaxReportBytes: 1 << 20})
	if got := do(t, low, "GET", path, tokAlice, nil); got.status != 413 || got.errCode() != devapi.CodeResponseTooLarge ||
		!strings.Contains(string(got.body), `"max_bytes":1048576`) {
		t.Errorf("html under a 1 MiB ceiling: %d %.300s", got.status, got.body)
	}
	step("bounds")
	// The other formats fit and are Render's, from the document.
	wantMD, err := evalengine.Render(r, evalengine.FormatMarkdown, evalengine.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := do(t, e.base, "GET", "/dev/v1/evaluation/jobs/"+id+"/report?format=markdown", tokAlice, nil); got.status != 200 ||
		!bytes.Equal(got.body, wantMD) || got.header.Get("content-length") != fmt.Sprint(len(wantMD)) {
		t.Errorf("markdown: %d, content-length %q, %d bytes, want %d", got.status, got.header.Get("content-length"), len(got.body), len(wantMD))
	}
	step("markdown")
}
