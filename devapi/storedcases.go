package devapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
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

// errPageDone ends a read of case lines or sample lines once the page
// being built is complete: what is left of the stream is not read.
var errPageDone = errors.New("page complete")

// errPageIncomplete: a stored result ended before a page's items came
// (its lines disagree with its counts).
var errPageIncomplete = errors.New("the stored result ended before the page's items")

// pagePicker builds a page of items (case rows, samples) whose places,
// from..end-1, are known as the items come, in any order: an item's
// encoding is kept in its slot, and the page is the longest prefix of
// places whose encodings fit budget (the first always, when it fits
// first, else nothing: tooLarge). Once the prefix is known (every slot up
// to the cut filled) the page is done: add returns errPageDone and the
// reader stops. Items past a cut are dropped as the cut becomes known, so
// the slots hold at most budget and the first item.
type pagePicker struct {
	from, end int
	budget    int // bytes of the items after the first, each with a comma
	first     int // bytes the first item may have
	slots     [][]byte
	tooLarge  bool
}

func newPagePicker(from, end, budget, first int) *pagePicker {
	return &pagePicker{from: from, end: end, budget: budget, first: first, slots: make([][]byte, max(end-from, 0))}
}

// add places an item's encoding at place (outside from..end-1: dropped)
// and says errPageDone once the page is complete.
func (p *pagePicker) add(place int, b []byte) error {
	if place < p.from || place >= p.end {
		return nil
	}
	p.slots[place-p.from] = b
	return p.settle()
}

// settle cuts the page where the known encodings pass the budget and
// says errPageDone when every place before the cut is filled.
func (p *pagePicker) settle() error {
	if len(p.slots) == 0 {
		return errPageDone
	}
	if b := p.slots[0]; b != nil && len(b) > p.first {
		p.tooLarge = true
		return errPageDone
	}
	used, full := 0, true
	for k, b := range p.slots {
		if b == nil {
			full = false
			continue
		}
		if used += len(b) + 1; k > 0 && used > p.budget {
			clear(p.slots[k:])
			p.slots, p.end = p.slots[:k], p.from+k
			break
		}
	}
	if full {
		return errPageDone
	}
	return nil
}

// page is the page's items once every place came (a reader that ran to
// its end without errPageDone has them all).
func (p *pagePicker) page() [][]byte { return p.slots }

// caseRowPlace is where the cases route's order puts case ci: its index
// in case order; failures first, its rank among the failed cases, or
// the failed count and its rank among the passed, counted as the cases
// come in case order.
type caseRowPlace struct {
	order                string
	failed               int
	failedSeen, passSeen int
}

func (o *caseRowPlace) place(ci int, passed bool) int {
	if o.order != CasesFailuresFirst {
		return ci
	}
	if passed {
		o.passSeen++
		return o.failed + o.passSeen - 1
	}
	o.failedSeen++
	return o.failedSeen - 1
}

// jobCases answers a page of a completed job's case rows, failures first
// by default, with its summary. A job with a stream is read from it
// without its sample lines (the header, the summary, then case lines,
// evalengine.StreamCases), and only as far as the page needs: in case
// order exactly the page's case lines, failures first the case lines up
// to the last of the page's rows; reading stops early too once the page
// reaches its byte bound. A job completed as one document reads that
// document (at most 16 MiB).
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
	st, e := s.openStoredCases(c.r.Context(), cl, scope, id)
	if e != nil {
		return e
	}
	n := st.n
	if int(offset) > n {
		return errorf(http.StatusBadRequest, CodeInvalidQuery, "query parameter \"offset\" must be at most the case count, "+strconv.Itoa(n)).
			with(map[string]any{"parameter": "offset", "case_count": n})
	}
	summary := *st.summary
	summary.Cases = nil
	sb, err := json.Marshal(&summary)
	if err != nil {
		return errorf(http.StatusInternalServerError, "internal_error", "encoding the summary failed")
	}
	from, to := int(offset), int(min(offset+limit, int64(n)))
	budget := MaxCasesPageBytes - len(sb)
	pick := newPagePicker(from, to, budget, math.MaxInt)
	places := &caseRowPlace{order: order, failed: n - st.summary.PassedCaseCount}
	rows := make([]CaseRow, to-from)
	var encErr error
	// put places case ci's row at place in the page.
	put := func(place, ci int, c *evalengine.CaseResult) error {
		rows[place-from] = caseRow(ci, c)
		rb, err := json.Marshal(rows[place-from])
		if err != nil {
			encErr = err
			return err
		}
		return pick.add(place, rb)
	}
	add := func(ci int, c *evalengine.CaseResult) error {
		place := places.place(ci, c.Passed)
		if place < pick.from || place >= pick.end {
			return nil
		}
		return put(place, ci, c)
	}
	// In case order a page's rows are its case lines; failures first,
	// the coordinator answers the page's rows (result_cases), else its
	// rows' places are known only counting from the first case.
	readFrom, readTo := from, to
	done := false
	if order == CasesFailuresFirst && from < to {
		row := from
		done, e = st.readRows(from, to, func(ci int, c *evalengine.CaseResult) error {
			row++
			return put(row-1, ci, c)
		})
		if encErr != nil {
			return errorf(http.StatusInternalServerError, "internal_error", "encoding a case row failed")
		}
		if e != nil {
			return e
		}
		readFrom, readTo = 0, n
	}
	if from < to && !done {
		e := st.readCases(readFrom, readTo, add)
		if encErr != nil {
			return errorf(http.StatusInternalServerError, "internal_error", "encoding a case row failed")
		}
		if e != nil {
			return e
		}
	}
	page := CasesPage{JobID: id, Order: order, Offset: from, CaseCount: n, FailedCaseCount: places.failed, Cases: []CaseRow{}, Summary: sb}
	for i, rb := range pick.page() {
		if rb == nil {
			return storedStreamError(errPageIncomplete)
		}
		page.Cases = append(page.Cases, rows[i])
	}
	if next := from + len(page.Cases); next < n {
		page.NextOffset = &next
	}
	return s.writeJSON(w, http.StatusOK, page)
}

// storedCases is a completed job's result as the cases routes read it:
// its summary and case count at once, then case lines and one case's
// samples as a page needs them. A job with a stream reads its lines
// (client.ResultLines, each read checked against the stream's digest);
// a job completed as one document has that document, decoded.
type storedCases struct {
	s         *Server
	ctx       context.Context
	cl        *client.Client
	scope, id string
	summary   *evalengine.Result
	n         int
	lines     int64 // the stream's lines: header, samples, n case lines, summary
	digest    string
	sc        *evalengine.StreamCases
	doc       *evalengine.Result
}

// openStoredCases reads a completed job's summary and case count: a job
// with a stream, its header and summary lines; a job completed as one
// document, the document.
func (s *Server) openStoredCases(ctx context.Context, cl *client.Client, scope, id string) (*storedCases, *Error) {
	st := &storedCases{s: s, ctx: ctx, cl: cl, scope: scope, id: id}
	var head, tail bytes.Buffer
	lines, digest, err := cl.ResultLines(ctx, scope, id, 0, 1, &head, 1)
	if err != nil && head.Len() == 0 && api.AsError(err).Code == api.CodeInvalidRequest {
		// Completed before results were records: its document.
		doc, err := cl.Result(ctx, scope, id)
		if err != nil {
			return nil, serviceError(err)
		}
		r, err := evalengine.DecodeResult(doc)
		if err != nil {
			return nil, storedStreamError(err)
		}
		st.summary, st.n, st.doc = r, len(r.Cases), r
		return st, nil
	}
	if err != nil {
		return nil, serviceError(err)
	}
	_, d, err := cl.ResultLines(ctx, scope, id, lines-1, lines, &tail, 1)
	s.streamRead.Add(int64(head.Len() + tail.Len()))
	if err == nil && d != digest {
		err = api.Errorf(api.CodeResultDigestMismatch, "result changed between reads")
	}
	if err != nil {
		return nil, serviceError(err)
	}
	sc, err := evalengine.OpenStreamCases(head.Bytes(), tail.Bytes())
	if err != nil {
		return nil, storedStreamError(err)
	}
	st.summary, st.n, st.lines, st.digest, st.sc = sc.Summary, sc.Header.CaseCount, lines, digest, sc
	return st, nil
}

// readCases calls fn with cases from..to-1 in case order (each valid only
// during the call); fn's errPageDone ends the read early, without error.
func (st *storedCases) readCases(from, to int, fn func(int, *evalengine.CaseResult) error) *Error {
	if st.doc != nil {
		for i := from; i < to; i++ {
			if err := fn(i, &st.doc.Cases[i]); errors.Is(err, errPageDone) {
				return nil
			} else if err != nil {
				return storedStreamError(err)
			}
		}
		return nil
	}
	if from == to {
		return nil
	}
	first := st.lines - 1 - int64(st.n) // the first case line
	return st.read(first+int64(from), first+int64(to), func(r io.Reader) error {
		return st.sc.ReadRange(r, from, to, fn)
	})
}

// readRows calls fn with the cases of rows from..to-1 of the
// failures-first order, in that order (each valid only during the call),
// when the job's stream is served by the coordinator's result_cases
// (StreamCases.ReadFailuresFirst checks them); done is false, with
// nothing read, for a job completed as one document and where no
// coordinator serves result_cases (an earlier build's): the caller
// then places every case from the first. fn's errPageDone ends the read
// early, without error.
func (st *storedCases) readRows(from, to int, fn func(int, *evalengine.CaseResult) error) (done bool, _ *Error) {
	if st.doc != nil {
		return false, nil
	}
	got := st.s.readStored(st.id, st.digest, func(w io.Writer) (string, error) {
		_, d, err := st.cl.ResultCases(st.ctx, st.scope, st.id, from, to, w)
		return d, err
	}, func(r io.Reader) error {
		return st.sc.ReadFailuresFirst(r, from, to, fn)
	})
	switch {
	case got.fetchErr != nil && got.wrote == 0 && api.AsError(got.fetchErr).Code == api.CodeServiceUnavailable:
		// No coordinator serves result_cases: an earlier build's.
		return false, nil
	case got.fetchErr != nil:
		return false, serviceError(got.fetchErr)
	case errors.Is(got.readErr, errPageDone):
		return true, nil
	case got.readErr != nil:
		return false, storedStreamError(got.readErr)
	}
	return true, nil
}

// readSamples calls fn with samples from..to-1 of case ci (c is its
// case), in the order they come. A stream's are the sample lines of
// their tasks (client.ResultSamples: sample si of case ci is task
// si × cases + ci), read in sample order and nothing else
// (StreamCases.ReadCaseSamples), each read checked against the stream's
// digest; coordinators of an earlier build do not answer that, and the
// case's samples are then read from the stream's sample lines (every
// case's, the others skipped undecoded, StreamCases.ReadSamples). A
// document's come in sample order. fn's errPageDone ends the read early,
// without error.
func (st *storedCases) readSamples(ci int, c *evalengine.CaseResult, from, to int, fn func(*evalengine.SampleResult) error) *Error {
	if st.doc != nil {
		for i := from; i < to; i++ {
			if err := fn(&st.doc.Cases[ci].Samples[i]); errors.Is(err, errPageDone) {
				return nil
			} else if err != nil {
				return storedStreamError(err)
			}
		}
		return nil
	}
	if from == to {
		return nil
	}
	tasks := make([]int, 0, to-from)
	for si := from; si < to; si++ {
		tasks = append(tasks, si*st.n+ci) // api.TaskIndex's inverse
	}
	got := st.s.readStored(st.id, st.digest, func(w io.Writer) (string, error) {
		_, d, err := st.cl.ResultSamples(st.ctx, st.scope, st.id, tasks, w)
		return d, err
	}, func(r io.Reader) error {
		return st.sc.ReadCaseSamples(r, ci, c, from, to, fn)
	})
	switch {
	case got.fetchErr != nil && got.wrote == 0 && api.AsError(got.fetchErr).Code == api.CodeServiceUnavailable:
		// No coordinator serves result_samples: an earlier build's.
		return st.read(1, st.lines-1-int64(st.n), func(r io.Reader) error {
			return st.sc.ReadSamples(r, ci, c, fn)
		})
	case got.fetchErr != nil:
		return serviceError(got.fetchErr)
	case errors.Is(got.readErr, errPageDone):
		return nil
	case got.readErr != nil:
		return storedStreamError(got.readErr)
	}
	return nil
}

// read gives read lines [from, to) of the job's stream.
func (st *storedCases) read(from, to int64, read func(io.Reader) error) *Error {
	noStream, e, serr := st.s.readStoredLines(st.ctx, st.cl, st.scope, st.id, from, to, st.digest, read)
	switch {
	case e != nil:
		return e
	case noStream:
		return serviceError(api.Errorf(api.CodeResultDigestMismatch, "job %s: its stream went away between reads", st.id))
	case errors.Is(serr, errPageDone):
		return nil
	case serr != nil:
		return storedStreamError(serr)
	}
	return nil
}

// storedStreamError is the answer to a stored result that does not read
// as one (the service's data, not the caller's request).
func storedStreamError(err error) *Error {
	return errorf(http.StatusServiceUnavailable, CodeServiceUnavailable, "the stored result does not read: "+err.Error()).
		with(map[string]string{"reason": evalengine.ErrorCode(err)})
}
