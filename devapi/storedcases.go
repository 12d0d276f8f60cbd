package devapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
)

// PathJobCases pages a completed job's case rows with its summary.
const PathJobCases = "/dev/v1/evaluation/jobs/{job_id}/cases"

// Bounds of the cases route: rows a page (default DefaultCasesPage), and
// the bytes of the rows and summary of one answer (under
// MaxResponseBytes); a page that would pass them ends early, and
// next_offset continues it.
const (
	DefaultCasesPage  = 100
	MaxCasesPage      = 1000
	MaxCasesPageBytes = 960 << 10
)

// Orders of the cases route's rows.
const (
	// CasesFailuresFirst: the cases that did not pass, then those that
	// did, each in case order (the UI's and the html report's order).
	CasesFailuresFirst = "failures_first"
	// CasesInOrder: case order.
	CasesInOrder = "case"
)

// CasesPage is GET .../jobs/{job_id}/cases: the result's summary (the
// result document without its cases) and a page of its case rows.
type CasesPage struct {
	JobID           string          `json:"job_id"`
	Order           string          `json:"order"`
	Offset          int             `json:"offset"`
	CaseCount       int             `json:"case_count"`
	FailedCaseCount int             `json:"failed_case_count"`
	Cases           []CaseRow       `json:"cases"`
	NextOffset      *int            `json:"next_offset"` // null: the page reaches the last row
	Summary         json.RawMessage `json:"summary"`
}

// CaseRow is one case of a CasesPage: its verdict, sample counts and
// case-level criteria (the result's case without its samples, trajectory
// and metadata).
type CaseRow struct {
	CaseIndex         int             `json:"case_index"`
	CaseID            string          `json:"case_id"`
	Status            string          `json:"status"`
	Passed            bool            `json:"passed"`
	SampleCount       int             `json:"sample_count"`
	PassedSampleCount int             `json:"passed_sample_count"`
	Criteria          []CaseCriterion `json:"criteria"`
}

// CaseCriterion is one case-level criterion of a CaseRow.
type CaseCriterion struct {
	MetricID  string  `json:"metric_id"`
	Score     float64 `json:"score"`
	Threshold float64 `json:"threshold"`
	Passed    bool    `json:"passed"`
	Status    string  `json:"status"`
}

func caseRow(ci int, c *evalengine.CaseResult) CaseRow {
	row := CaseRow{CaseIndex: ci, CaseID: c.CaseID, Status: c.Status, Passed: c.Passed, SampleCount: c.SampleCount,
		PassedSampleCount: c.PassedSampleCount, Criteria: make([]CaseCriterion, len(c.Criteria))}
	for i, m := range c.Criteria {
		row.Criteria[i] = CaseCriterion{MetricID: m.MetricID, Score: m.Score, Threshold: m.Threshold, Passed: m.Passed, Status: m.Status}
	}
	return row
}

// rowPicker keeps the rows of a page as the cases come in case order:
// a row's place is its case index, or, failures first, its rank among
// the failed cases, or the failed count and its rank among the passed.
type rowPicker struct {
	order                string
	from, to, failed     int
	failedSeen, passSeen int
	rows                 []CaseRow
}

func (p *rowPicker) add(ci int, c *evalengine.CaseResult) error {
	place := ci
	if p.order == CasesFailuresFirst {
		if c.Passed {
			place = p.failed + p.passSeen
			p.passSeen++
		} else {
			place = p.failedSeen
			p.failedSeen++
		}
	}
	if place >= p.from && place < p.to {
		p.rows = append(p.rows, caseRow(ci, c))
	}
	return nil
}

// jobCases answers a page of a completed job's case rows, failures first
// by default, with its summary. A job with a stream is read from it
// without its sample lines (client.ResultLines: the header, the summary,
// then the case lines, evalengine.StreamCases), so a page costs the case
// lines whatever the samples hold; a job completed as one document reads
// that document (at most 16 MiB).
func (s *Server) jobCases(w http.ResponseWriter, c *call) *Error {
	cl, scope, id, e := s.jobCall(c)
	if e != nil {
		return e
	}
	offset, e := queryInt(c.query, "offset", 0, 0, evalengine.MaxCases)
	if e != nil {
		return e
	}
	limit, e := queryInt(c.query, "limit", DefaultCasesPage, 1, MaxCasesPage)
	if e != nil {
		return e
	}
	order, ok := c.query["order"]
	if !ok {
		order = CasesFailuresFirst
	}
	if order != CasesFailuresFirst && order != CasesInOrder {
		return errorf(http.StatusBadRequest, CodeInvalidQuery, "order must be "+CasesFailuresFirst+" or "+CasesInOrder).
			with(map[string]any{"parameter": "order", "valid": []string{CasesFailuresFirst, CasesInOrder}})
	}
	ctx := c.r.Context()
	sum, cases, read, e := storedCases(ctx, cl, scope, id)
	if e != nil {
		return e
	}
	n := cases
	if int(offset) > n {
		return errorf(http.StatusBadRequest, CodeInvalidQuery, "query parameter \"offset\" must be at most the case count, "+strconv.Itoa(n)).
			with(map[string]any{"parameter": "offset", "case_count": n})
	}
	p := &rowPicker{order: order, from: int(offset), to: int(min(offset+limit, int64(n))), failed: n - sum.PassedCaseCount}
	if e := read(p.add); e != nil {
		return e
	}
	// Rows in their places: case order is the order they came in; failures
	// first puts the failed ones (which came interleaved) before the rest.
	if order == CasesFailuresFirst {
		slices.SortStableFunc(p.rows, func(a, b CaseRow) int {
			switch {
			case a.Passed == b.Passed:
				return 0
			case !a.Passed:
				return -1
			}
			return 1
		})
	}
	summary := *sum
	summary.Cases = nil
	sb, err := json.Marshal(&summary)
	if err != nil {
		return errorf(http.StatusInternalServerError, "internal_error", "encoding the summary failed")
	}
	page := CasesPage{JobID: id, Order: order, Offset: int(offset), CaseCount: n, FailedCaseCount: p.failed, Cases: []CaseRow{}, Summary: sb}
	budget := MaxCasesPageBytes - len(sb)
	for _, row := range p.rows {
		rb, err := json.Marshal(row)
		if err != nil {
			return errorf(http.StatusInternalServerError, "internal_error", "encoding a case row failed")
		}
		if budget -= len(rb) + 1; budget < 0 && len(page.Cases) > 0 {
			break
		}
		page.Cases = append(page.Cases, row)
	}
	if next := int(offset) + len(page.Cases); next < n {
		page.NextOffset = &next
	}
	return s.writeJSON(w, http.StatusOK, page)
}

// storedCases reads a completed job's summary and case count, and
// returns read, which calls fn with each of its cases in case order. A
// job with a stream: the header and summary lines now, the case lines in
// read; a job completed as one document: the document, decoded now.
func storedCases(ctx context.Context, cl *client.Client, scope, id string) (*evalengine.Result, int, func(fn func(int, *evalengine.CaseResult) error) *Error, *Error) {
	var head, tail bytes.Buffer
	lines, digest, err := cl.ResultLines(ctx, scope, id, 0, 1, &head, 1)
	if err != nil && head.Len() == 0 && api.AsError(err).Code == api.CodeInvalidRequest {
		// Completed before results were records: its document.
		doc, err := cl.Result(ctx, scope, id)
		if err != nil {
			return nil, 0, nil, serviceError(err)
		}
		r, err := evalengine.DecodeResult(doc)
		if err != nil {
			return nil, 0, nil, storedStreamError(err)
		}
		return r, len(r.Cases), func(fn func(int, *evalengine.CaseResult) error) *Error {
			for i := range r.Cases {
				if err := fn(i, &r.Cases[i]); err != nil {
					return storedStreamError(err)
				}
			}
			return nil
		}, nil
	}
	if err != nil {
		return nil, 0, nil, serviceError(err)
	}
	_, d, err := cl.ResultLines(ctx, scope, id, lines-1, lines, &tail, 1)
	if err == nil && d != digest {
		err = api.Errorf(api.CodeResultDigestMismatch, "result changed between reads")
	}
	if err != nil {
		return nil, 0, nil, serviceError(err)
	}
	sc, err := evalengine.OpenStreamCases(head.Bytes(), tail.Bytes())
	if err != nil {
		return nil, 0, nil, storedStreamError(err)
	}
	n := sc.Header.CaseCount
	return sc.Summary, n, func(fn func(int, *evalengine.CaseResult) error) *Error {
		if n == 0 {
			return nil
		}
		var rerr error
		noStream, e, serr := readStoredLines(ctx, cl, scope, id, lines-1-int64(n), lines-1, digest, func(r io.Reader) error {
			rerr = sc.Read(r, fn)
			return rerr
		})
		switch {
		case e != nil:
			return e
		case noStream:
			return serviceError(api.Errorf(api.CodeResultDigestMismatch, "job %s: its stream went away between reads", id))
		case serr != nil:
			return storedStreamError(serr)
		}
		return nil
	}, nil
}

// storedStreamError is the answer to a stored result that does not read
// as one (the service's data, not the caller's request).
func storedStreamError(err error) *Error {
	return errorf(http.StatusServiceUnavailable, CodeServiceUnavailable, "the stored result does not read: "+err.Error()).
		with(map[string]string{"reason": evalengine.ErrorCode(err)})
}
