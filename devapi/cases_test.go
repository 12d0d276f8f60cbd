package devapi_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/evalengine"
)

// wantCaseRows are r's case rows in the cases route's order:
// failures_first (the cases that did not pass, then the others, each in
// case order) or case.
func wantCaseRows(r *evalengine.Result, order string) []devapi.CaseRow {
	var failed, passed []devapi.CaseRow
	for i := range r.Cases {
		c := &r.Cases[i]
		row := devapi.CaseRow{CaseIndex: i, CaseID: c.CaseID, Status: c.Status, Passed: c.Passed, SampleCount: c.SampleCount,
			PassedSampleCount: c.PassedSampleCount, Criteria: []devapi.CaseCriterion{}}
		for _, m := range c.Criteria {
			row.Criteria = append(row.Criteria, devapi.CaseCriterion{MetricID: m.MetricID, Score: m.Score, Threshold: m.Threshold, Passed: m.Passed, Status: m.Status})
		}
		if c.Passed || order == devapi.CasesInOrder {
			passed = append(passed, row)
		} else {
			failed = append(failed, row)
		}
	}
	return append(failed, passed...)
}

func casesPage(t *testing.T, e *env, base, token, jobID, query string) (devapi.CasesPage, answer) {
	t.Helper()
	got := do(t, base, "GET", "/dev/v1/evaluation/jobs/"+jobID+"/cases"+query, token, nil)
	var p devapi.CasesPage
	if got.status == 200 {
		if err := json.Unmarshal(got.body, &p); err != nil {
			t.Fatalf("cases%s: %v", query, err)
		}
	}
	return p, got
}

// checkCasesPages reads every case row of job id through the cases
// route, page after page in each order, and holds them and the summary
// to r (the job's result, decoded by the test); then the route's bounds,
// each a 400 naming its parameter, and another principal's 404. limit
// is the page size asked while following next_offset; a page that ends
// before it (the byte bound) is continued all the same.
func checkCasesPages(t *testing.T, e *env, id string, r *evalengine.Result, limit int) {
	t.Helper()
	sum := *r
	sum.Cases = nil
	wantSum, err := json.Marshal(&sum)
	if err != nil {
		t.Fatal(err)
	}
	failed := r.CaseCount - r.PassedCaseCount
	for _, order := range []string{devapi.CasesFailuresFirst, devapi.CasesInOrder} {
		want := wantCaseRows(r, order)
		var got []devapi.CaseRow
		pages, short := 0, 0
		for off := 0; ; pages++ {
			p, a := casesPage(t, e, e.base, tokAlice, id, fmt.Sprintf("?order=%s&offset=%d&limit=%d", order, off, limit))
			if a.status != 200 || p.Offset != off || p.CaseCount != len(r.Cases) || p.FailedCaseCount != failed || p.Order != order {
				t.Fatalf("%s page at %d: %d %+v %.300s", order, off, a.status, p, a.body)
			}
			if len(a.body) > devapi.MaxResponseBytes || len(p.Cases) == 0 && len(r.Cases) > 0 {
				t.Fatalf("%s page at %d: %d bytes, %d rows", order, off, len(a.body), len(p.Cases))
			}
			if string(p.Summary) != string(wantSum) {
				t.Fatalf("%s page at %d: summary %.300s, want %.300s", order, off, p.Summary, wantSum)
			}
			got = append(got, p.Cases...)
			if p.NextOffset == nil {
				break
			}
			if len(p.Cases) < limit {
				short++
			}
			off = *p.NextOffset
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows in %d pages, want %d", order, len(got), pages, len(want))
		}
		for i := range want {
			if !slices.EqualFunc([]devapi.CaseRow{got[i]}, []devapi.CaseRow{want[i]}, rowEqual) {
				t.Fatalf("%s row %d: %+v, want %+v", order, i, got[i], want[i])
			}
		}
		t.Logf("%s: %d rows in %d pages of up to %d (%d cut short by the byte bound)", order, len(got), pages+1, limit, short)
	}
	// The default page: 100 rows, failures first.
	if p, a := casesPage(t, e, e.base, tokAlice, id, ""); a.status != 200 || len(p.Cases) != min(devapi.DefaultCasesPage, len(r.Cases)) ||
		p.Order != devapi.CasesFailuresFirst {
		t.Errorf("default page: %d, %d rows, order %q", a.status, len(p.Cases), p.Order)
	}
	for _, c := range []struct{ query, param string }{
		{"?limit=0", "limit"}, {fmt.Sprintf("?limit=%d", devapi.MaxCasesPage+1), "limit"}, {"?limit=x", "limit"},
		{fmt.Sprintf("?offset=%d", len(r.Cases)+1), "offset"}, {"?offset=-1", "offset"},
		{"?order=random", "order"}, {"?page=2", "page"},
	} {
		_, a := casesPage(t, e, e.base, tokAlice, id, c.query)
		if a.status != 400 || a.errCode() != devapi.CodeInvalidQuery || !strings.Contains(string(a.body), `"parameter":"`+c.param+`"`) {
			t.Errorf("cases%s: %d %.300s, want 400 naming %s", c.query, a.status, a.body, c.param)
		}
	}
	if _, a := casesPage(t, e, e.base, tokBob, id, ""); a.status != 404 || a.errCode() != devapi.CodeNotFound {
		t.Errorf("bob: cases: %d %.300s", a.status, a.body)
	}
}

func rowEqual(a, b devapi.CaseRow) bool {
	return a.CaseIndex == b.CaseIndex && a.CaseID == b.CaseID && a.Status == b.Status && a.Passed == b.Passed &&
		a.SampleCount == b.SampleCount && a.PassedSampleCount == b.PassedSampleCount && slices.Equal(a.Criteria, b.Criteria)
}
