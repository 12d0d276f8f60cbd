package devapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fadcedab/adk/coordinator"
	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/testcluster"
)

func casePageOf(t *testing.T, base, token, jobID, index, query string) (devapi.CasePage, answer) {
	t.Helper()
	got := do(t, base, "GET", "/dev/v1/evaluation/jobs/"+jobID+"/cases/"+index+query, token, nil)
	var p devapi.CasePage
	if got.status == 200 {
		if err := json.Unmarshal(got.body, &p); err != nil {
			t.Fatalf("case %s%s: %v", index, query, err)
		}
	}
	return p, got
}

// sameJSON says whether two JSON documents hold the same value (a
// metadata map decoded from a line encodes its keys sorted, where the
// engine's own value is a struct in field order).
func sameJSON(a, b []byte) bool {
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkCasePages reads case ci of job id through the case route, page
// after page (limit samples a page asked), and holds the case and every
// sample to c (the job's result, decoded by the test), in sample order.
// It returns the number of pages.
func checkCasePages(t *testing.T, base, id string, ci int, c *evalengine.CaseResult, limit int) int {
	t.Helper()
	bare := *c
	bare.Samples = nil
	wantCase := mustJSON(t, &bare)
	var got []json.RawMessage
	pages := 0
	for off := 0; ; pages++ {
		p, a := casePageOf(t, base, tokAlice, id, fmt.Sprint(ci), fmt.Sprintf("?offset=%d&limit=%d", off, limit))
		if a.status != 200 || p.JobID != id || p.CaseIndex != ci || p.Offset != off || p.SampleCount != len(c.Samples) ||
			!sameJSON(p.Case, []byte(wantCase)) || len(p.Samples) == 0 || len(p.Samples) > limit {
			t.Fatalf("case %d, page at %d: %d, case %s (want %s), %d samples: %.300s", ci, off, a.status, p.Case, wantCase, len(p.Samples), a.body)
		}
		if len(p.Samples) > 1 && len(a.body) > devapi.MaxResponseBytes {
			t.Errorf("case %d, page at %d: %d samples in %d bytes", ci, off, len(p.Samples), len(a.body))
		}
		got = append(got, p.Samples...)
		if p.NextOffset == nil {
			break
		}
		off = *p.NextOffset
	}
	if len(got) != len(c.Samples) {
		t.Fatalf("case %d: %d samples in %d pages, want %d", ci, len(got), pages+1, len(c.Samples))
	}
	for i := range got {
		if want := mustJSON(t, &c.Samples[i]); !sameJSON(got[i], []byte(want)) {
			t.Fatalf("case %d, sample %d: %.300s, want %.300s", ci, i, got[i], want)
		}
	}
	return pages + 1
}

// checkCaseRouteRefusals: the case route's bounds, each typed: a
// case_index that is not one (400 naming it), past the case count (404
// naming it), a bad offset or limit (400 naming it), and another
// principal's job (404, as every job route).
func checkCaseRouteRefusals(t *testing.T, base, id string, cases, samples int) {
	t.Helper()
	for _, c := range []struct {
		index, query, code, param string
		status                    int
	}{
		{"x", "", devapi.CodeInvalidPathParameter, "case_index", 400},
		{"-1", "", devapi.CodeInvalidPathParameter, "case_index", 400},
		{"01", "", devapi.CodeInvalidPathParameter, "case_index", 400},
		{"1000000000", "", devapi.CodeInvalidPathParameter, "case_index", 400},
		{fmt.Sprint(cases), "", devapi.CodeNotFound, "case_index", 404},
		{"0", fmt.Sprintf("?offset=%d", samples+1), devapi.CodeInvalidQuery, "offset", 400},
		{"0", "?offset=-1", devapi.CodeInvalidQuery, "offset", 400},
		{"0", "?limit=0", devapi.CodeInvalidQuery, "limit", 400},
		{"0", fmt.Sprintf("?limit=%d", devapi.MaxCaseSamples+1), devapi.CodeInvalidQuery, "limit", 400},
		{"0", "?order=case", devapi.CodeInvalidQuery, "order", 400},
	} {
		_, a := casePageOf(t, base, tokAlice, id, c.index, c.query)
		if a.status != c.status || a.errCode() != c.code || !strings.Contains(string(a.body), `"parameter":"`+c.param+`"`) {
			t.Errorf("case %s%s: %d %.300s, want %d %s naming %s", c.index, c.query, a.status, a.body, c.status, c.code, c.param)
		}
	}
	if _, a := casePageOf(t, base, tokBob, id, "0", ""); a.status != 404 || a.errCode() != devapi.CodeNotFound {
		t.Errorf("bob: case 0: %d %.300s", a.status, a.body)
	}
}

// caseSet is an eval set whose case i has an id of idLen bytes and an
// input of pad(i) bytes (the scripted agent echoes it, so a sample holds
// it about three times); the odd cases fail.
func caseSet(id string, n, idLen int, pad func(int) int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"schema_version":2,"id":%q,"version":"1","cases":[`, id)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		input := fmt.Sprintf("%s%d", strings.Repeat("x", pad(i)), i)
		want := "echo: " + input
		if i%2 == 1 {
			want = "no"
		}
		cid := fmt.Sprintf("case-%04d-", i)
		cid += strings.Repeat("i", max(idLen-len(cid), 0))
		fmt.Fprintf(&b, `{"id":%q,"turns":[{"id":"t","input":%q,"expected_response":%q}]}`, cid, input, want)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// TestClusterDevAPI_CasePages: GET .../jobs/{job_id}/cases/{case_index}
// answers a case of a stored result and its samples, read from the job's
// stream, equal to the result the test decodes: every case of a job of
// 3 samples a case, in one page and a sample a page; samples of 600 KB
// one a page (the first sample of a page is sent past the byte bound),
// of 350 KB two a page; under an operator's 512 KiB report ceiling the
// 600 KB sample is a typed 413 and the 350 KB ones come one a page. Then the cases route reads only what a
// page needs: its bytes read from the stream are a fraction of the case
// lines, and its pages are the rows of the whole result all the same.
func TestClusterDevAPI_CasePages(t *testing.T) {
	// Sets of megabytes validate slowly under the race detector.
	e := startEnv(t, testcluster.EvalOptions{NATSNodes: 1, Limits: coordinator.Limits{ValidationTimeout: time.Minute}})
	slow := client.New(e.nc, 2*time.Minute)
	submit := func(set []byte, samples int) (string, *evalengine.Result) {
		t.Helper()
		j, err := slow.Submit(context.Background(), "team-a", api.SubmitRequest{Set: set, Agent: "scripted",
			Options: []byte(fmt.Sprintf(`{"sample_count":%d}`, samples))})
		if err != nil {
			t.Fatal(err)
		}
		e.c.WaitJob(e.cl, "team-a", j.JobID, 90*time.Second, "completed")
		r, _ := storedResult(t, e, "team-a", j.JobID)
		return j.JobID, r
	}

	// Every case of a small job, whole and a sample a page.
	small, rs := submit(testcluster.EvalSet("case-pages", 12), 3)
	for ci := range rs.Cases {
		if pages := checkCasePages(t, e.base, small, ci, &rs.Cases[ci], devapi.DefaultCaseSamples); pages != 1 {
			t.Errorf("case %d: %d pages of 3 samples", ci, pages)
		}
	}
	if pages := checkCasePages(t, e.base, small, 5, &rs.Cases[5], 1); pages != 3 {
		t.Errorf("case 5 a sample a page: %d pages", pages)
	}
	checkCaseRouteRefusals(t, e.base, small, len(rs.Cases), 3)

	// Big samples (a fleet's sample is at most 768 KiB as a message):
	// case 0's are about 600 KB (it passes: its input three times, as
	// input, expected and actual; one a page, the first of a page past
	// the byte bound with the rest), case 1's about 350 KB (it fails:
	// twice; two a page).
	big, rb := submit(caseSet("case-big", 2, 20, func(i int) int { return []int{200 << 10, 170 << 10}[i] }), 3)
	for ci, want := range []int{3, 2} {
		if s := rb.Cases[ci].Samples[0]; s.Status == evalengine.SampleStatusError {
			t.Fatalf("big case %d: its sample is in error: %s", ci, s.Error)
		}
		if pages := checkCasePages(t, e.base, big, ci, &rb.Cases[ci], devapi.DefaultCaseSamples); pages != want {
			t.Errorf("big case %d: %d pages, want %d", ci, pages, want)
		}
	}
	// Under an operator's 512 KiB report ceiling a 600 KB sample is a
	// typed 413 naming it, and 350 KB ones come one a page.
	_, low := newServer(t, devapi.Options{Tokens: e.tokens, Coord: e.cl, MaxReportBytes: 512 << 10})
	if _, a := casePageOf(t, low, tokAlice, big, "0", "?offset=1"); a.status != 413 || a.errCode() != devapi.CodeResponseTooLarge ||
		!strings.Contains(string(a.body), `"sample_index":1`) || !strings.Contains(string(a.body), fmt.Sprintf(`"max_bytes":%d`, 512<<10)) {
		t.Errorf("a 600 KB sample under a 512 KiB ceiling: %d %.300s", a.status, a.body)
	}
	if p, a := casePageOf(t, low, tokAlice, big, "1", ""); a.status != 200 || len(p.Samples) != 1 || p.NextOffset == nil || *p.NextOffset != 1 {
		t.Errorf("350 KB samples under a 512 KiB ceiling: %d, %d samples, next %v", a.status, len(p.Samples), p.NextOffset)
	}

	// The cases route reads what a page needs. 1,000 cases with ids of
	// 2,000 bytes: about 2.4 MB of case lines, a few of the coordinator's
	// pages.
	const n = 1000
	many, rm := submit(caseSet("case-many", n, 2000, func(int) int { return 0 }), 1)
	caseLines := 0
	for i := range rm.Cases {
		c := rm.Cases[i]
		c.Samples = nil
		caseLines += len(mustJSON(t, &c))
	}
	for _, c := range []struct {
		query string
		order string
		from  int
		// most is the share of the case lines' bytes the page may read.
		most float64
	}{
		{"?order=case&offset=0&limit=10", devapi.CasesInOrder, 0, 0.05},
		{"?order=case&offset=500&limit=10", devapi.CasesInOrder, 500, 0.05},
		// Failures first, the coordinator answers the page's rows
		// (result_cases): their lines only.
		{"?order=failures_first&offset=0&limit=10", devapi.CasesFailuresFirst, 0, 0.05},
		// A full page of 1,000 rows ends at the byte bound, after about
		// 400: so does the read.
		{"?order=case&offset=0&limit=1000", devapi.CasesInOrder, 0, 0.7},
		// The passed cases come after the 500 failed: the page's 100
		// rows, not every case line up to its last row.
		{"?order=failures_first&offset=900&limit=100", devapi.CasesFailuresFirst, 900, 0.15},
	} {
		before := e.srv.StreamBytesRead()
		p, a := casesPage(t, e, e.base, tokAlice, many, c.query)
		read := e.srv.StreamBytesRead() - before
		want := wantCaseRows(rm, c.order)[c.from:]
		if a.status != 200 || len(p.Cases) == 0 || len(p.Cases) > len(want) || p.CaseCount != n || p.FailedCaseCount != n/2 {
			t.Fatalf("cases%s: %d, %d rows: %.300s", c.query, a.status, len(p.Cases), a.body)
		}
		for i := range p.Cases {
			if !rowEqual(p.Cases[i], want[i]) {
				t.Fatalf("cases%s: row %d %+v, want %+v", c.query, i, p.Cases[i], want[i])
			}
		}
		if next := c.from + len(p.Cases); (p.NextOffset == nil) != (next == n) || p.NextOffset != nil && *p.NextOffset != next {
			t.Errorf("cases%s: next_offset %v after %d rows", c.query, p.NextOffset, len(p.Cases))
		}
		t.Logf("cases%s: %d rows, read %d bytes of the stream (case lines %d)", c.query, len(p.Cases), read, caseLines)
		if float64(read) > c.most*float64(caseLines) || read == 0 {
			t.Errorf("cases%s read %d bytes, more than %.0f%% of the %d bytes of case lines", c.query, read, 100*c.most, caseLines)
		}
	}
	// And every page, both orders, as before.
	checkCasesPages(t, e, many, rm, devapi.MaxCasesPage)
	if pages := checkCasePages(t, e.base, many, n-1, &rm.Cases[n-1], devapi.DefaultCaseSamples); pages != 1 {
		t.Errorf("the last case of %s: %d pages", many, pages)
	}

	// A case page reads its own samples, not the stream up to them: the
	// header, the summary, its case line and its sample line, whatever
	// comes before them (the sample lines of the 1,000 cases: about 2.9
	// MB; reading up to the last case's sample read them all).
	sampleLines := 0
	for i := range rm.Cases {
		sampleLines += len(mustJSON(t, &rm.Cases[i].Samples[0]))
	}
	for _, ci := range []int{n - 1, n / 2, 0} {
		before := e.srv.StreamBytesRead()
		p, a := casePageOf(t, e.base, tokAlice, many, fmt.Sprint(ci), "")
		read := e.srv.StreamBytesRead() - before
		if a.status != 200 || len(p.Samples) != 1 || !sameJSON(p.Samples[0], []byte(mustJSON(t, &rm.Cases[ci].Samples[0]))) {
			t.Fatalf("case %d: %d, %d samples: %.300s", ci, a.status, len(p.Samples), a.body)
		}
		t.Logf("case %d: read %d bytes of the stream (sample lines %d)", ci, read, sampleLines)
		if own := int64(len(a.body)); read == 0 || read > 4*own || read*50 > int64(sampleLines) {
			t.Errorf("case %d read %d bytes of the stream for a %d-byte page (sample lines %d)", ci, read, own, sampleLines)
		}
	}

	// result_cases' bounds, each typed, and its scope, as result_samples'
	// below.
	for _, c := range []struct {
		name   string
		scope  string
		offset int64
		limit  int
		code   string
		names  string
	}{
		{"no row", "team-a", 0, 0, api.CodeInvalidRequest, "limit"},
		{"too many rows", "team-a", 0, api.MaxResultCases + 1, api.CodeInvalidRequest, "limit"},
		{"a negative row", "team-a", -1, 1, api.CodeInvalidRequest, "offset"},
		{"a row past the job", "team-a", n, 1, api.CodeInvalidRequest, "offset"},
		{"another scope's job", "team-b", 0, 1, evalrecord.CodeNotFound, ""},
	} {
		_, err := e.cl.Call(context.Background(), api.OpResultCases, &api.Request{Scope: c.scope, JobID: many, Offset: c.offset, Limit: c.limit})
		if ae := api.AsError(err); ae == nil || ae.Code != c.code || !strings.Contains(ae.Detail, c.names) {
			t.Errorf("result_cases, %s: %v, want %s naming %q", c.name, err, c.code, c.names)
		}
	}

	// result_samples' bounds, each typed, and its scope: the case route
	// never sends these, a client of the coordinator may.
	ctx := context.Background()
	over := make([]int, api.MaxResultTasks+1)
	for _, c := range []struct {
		name  string
		scope string
		tasks []int
		code  string
		names string
	}{
		{"no task", "team-a", nil, api.CodeInvalidRequest, "tasks"},
		{"too many tasks", "team-a", over, api.CodeInvalidRequest, "tasks"},
		{"a negative task", "team-a", []int{0, -1}, api.CodeInvalidRequest, "tasks[1]"},
		{"a task past the job", "team-a", []int{n}, api.CodeInvalidRequest, "tasks[0]"},
		{"another scope's job", "team-b", []int{0}, evalrecord.CodeNotFound, ""},
	} {
		_, err := e.cl.Call(ctx, api.OpResultSamples, &api.Request{Scope: c.scope, JobID: many, Tasks: c.tasks})
		if ae := api.AsError(err); ae == nil || ae.Code != c.code || !strings.Contains(ae.Detail, c.names) {
			t.Errorf("result_samples, %s: %v, want %s naming %q", c.name, err, c.code, c.names)
		}
	}
}

// TestClusterDevAPI_CasePagesFromAnEarlierBuild: coordinators of an
// earlier build have no responder for result_samples and result_cases
// (the cluster's coordinators here subscribe neither, as such a build
// does not). The case route and the failures-first cases route still
// answer every page equal to the result the test decodes, by reading
// the stream's lines as before those operations: the bytes they read
// show that path was taken.
func TestClusterDevAPI_CasePagesFromAnEarlierBuild(t *testing.T) {
	e := startEnv(t, testcluster.EvalOptions{NATSNodes: 1, CoordWithoutOps: []string{api.OpResultSamples, api.OpResultCases}})
	ctx := context.Background()
	for _, op := range []string{api.OpResultSamples, api.OpResultCases} {
		if _, err := e.cl.Call(ctx, op, &api.Request{Scope: "team-a", JobID: "eval-x", Tasks: []int{0}, Limit: 1}); api.AsError(err).Code != api.CodeServiceUnavailable {
			t.Fatalf("%s on an earlier build's coordinators: %v, want %s", op, err, api.CodeServiceUnavailable)
		}
	}
	const n = 200
	j, err := e.cl.Submit(ctx, "team-a", api.SubmitRequest{Set: caseSet("case-old", n, 200, func(int) int { return 0 }), Agent: "scripted"})
	if err != nil {
		t.Fatal(err)
	}
	e.c.WaitJob(e.cl, "team-a", j.JobID, 90*time.Second, "completed")
	r, _ := storedResult(t, e, "team-a", j.JobID)
	sampleLines, caseLines := 0, 0
	for i := range r.Cases {
		sampleLines += len(mustJSON(t, &r.Cases[i].Samples[0]))
		c := r.Cases[i]
		c.Samples = nil
		caseLines += len(mustJSON(t, &c))
	}
	for _, ci := range []int{n - 1, n / 2, 0} {
		before := e.srv.StreamBytesRead()
		checkCasePages(t, e.base, j.JobID, ci, &r.Cases[ci], devapi.DefaultCaseSamples)
		read := e.srv.StreamBytesRead() - before
		t.Logf("case %d: read %d bytes of the stream (sample lines %d)", ci, read, sampleLines)
		// The stream's sample lines up to the case's (in finish order,
		// so the last case reads most of them).
		if ci == n-1 && read*2 < int64(sampleLines) {
			t.Errorf("case %d read %d bytes: not the stream's sample lines (%d)", ci, read, sampleLines)
		}
	}
	// Failures first, the last page's rows are passed cases: the read
	// places every case from the first.
	before := e.srv.StreamBytesRead()
	p, a := casesPage(t, e, e.base, tokAlice, j.JobID, "?order=failures_first&offset=150&limit=50")
	read := e.srv.StreamBytesRead() - before
	want := wantCaseRows(r, devapi.CasesFailuresFirst)[150:]
	if a.status != 200 || len(p.Cases) != len(want) {
		t.Fatalf("failures first from 150: %d, %d rows: %.300s", a.status, len(p.Cases), a.body)
	}
	for i := range want {
		if !rowEqual(p.Cases[i], want[i]) {
			t.Fatalf("failures first from 150: row %d %+v, want %+v", i, p.Cases[i], want[i])
		}
	}
	if read*10 < int64(caseLines)*9 {
		t.Errorf("failures first from 150 read %d bytes: not the case lines up to its last row (%d)", read, caseLines)
	}
	checkCasesPages(t, e, j.JobID, r, 30)
}
