package devapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/fadcedab/adk/evalengine"
)

// PathJobCase is one case of a completed job with a page of its samples.
const PathJobCase = "/dev/v1/evaluation/jobs/{job_id}/cases/{case_index}"

// Bounds of the case route: samples a page (a case has at most
// evalengine.MaxSamplesPerCase, so the default page is the whole case),
// and the bytes of the case and the samples of one page after its first
// sample. The first sample is sent whatever its size up to the report
// ceiling (a stream line, so a sample, is at most 16 MiB): every sample
// can be read, one page at a time.
const (
	DefaultCaseSamples = evalengine.MaxSamplesPerCase
	MaxCaseSamples     = evalengine.MaxSamplesPerCase
	MaxCasePageBytes   = 960 << 10
)

// CasePage is GET .../jobs/{job_id}/cases/{case_index}: one case of a
// completed job (the result's case without its samples, "samples": null)
// and a page of its samples in sample order.
type CasePage struct {
	JobID       string            `json:"job_id"`
	CaseIndex   int               `json:"case_index"`
	Case        json.RawMessage   `json:"case"`
	SampleCount int               `json:"sample_count"`
	Offset      int               `json:"offset"`
	Samples     []json.RawMessage `json:"samples"`
	NextOffset  *int              `json:"next_offset"` // null: the page reaches the last sample
}

// validCaseIndex reports whether v is a case index as the case rows
// carry it: a decimal integer of at most 9 digits, without sign or
// leading zeros (TestValidCaseIndex holds it to ^(0|[1-9][0-9]{0,8})$).
func validCaseIndex(v string) bool {
	if len(v) == 0 || len(v) > 9 || (v[0] == '0' && v != "0") {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

func (c *call) caseIndex() (int, *Error) {
	v := c.params["case_index"]
	n, err := strconv.Atoi(v)
	if !validCaseIndex(v) || err != nil || n >= evalengine.MaxCases {
		return 0, errorf(http.StatusBadRequest, CodeInvalidPathParameter,
			"case_index must be a case's index in its eval set, 0.."+strconv.Itoa(evalengine.MaxCases-1)).
			with(map[string]string{"parameter": "case_index"})
	}
	return n, nil
}

// jobCase answers one case of a completed job: its case line and a page
// of its samples, in sample order from offset. A job with a stream reads
// the case's line (one line) and then the page's samples only, by their
// task indexes (the coordinator's result_samples, storedCases.readSamples):
// a page costs its own case and samples, whatever the stream holds
// before them. The page holds up to limit
// samples and ends before the case and its samples pass MaxCasePageBytes,
// except that its first sample is always sent when the answer fits the
// report ceiling (else 413 response_limit_exceeded naming the sample and
// the JSON Lines download). A job completed as one document reads that
// document (at most 16 MiB). An index past the case count is 404.
func (s *Server) jobCase(w http.ResponseWriter, c *call) *Error {
	cl, scope, id, e := s.jobCall(c)
	if e != nil {
		return e
	}
	ci, e := c.caseIndex()
	if e != nil {
		return e
	}
	offset, e := queryInt(c.query, "offset", 0, 0, evalengine.MaxSamplesPerCase)
	if e != nil {
		return e
	}
	limit, e := queryInt(c.query, "limit", DefaultCaseSamples, 1, MaxCaseSamples)
	if e != nil {
		return e
	}
	st, e := s.openStoredCases(c.r.Context(), cl, scope, id)
	if e != nil {
		return e
	}
	if ci >= st.n {
		return errorf(http.StatusNotFound, CodeNotFound, "the job's result has "+strconv.Itoa(st.n)+" cases; there is no case "+strconv.Itoa(ci)).
			with(map[string]any{"parameter": "case_index", "case_count": st.n})
	}
	var cr evalengine.CaseResult
	if e := st.readCases(ci, ci+1, func(_ int, c *evalengine.CaseResult) error {
		cr = *c
		cr.Samples = nil
		return nil
	}); e != nil {
		return e
	}
	S := cr.SampleCount
	if int(offset) > S {
		return errorf(http.StatusBadRequest, CodeInvalidQuery, "query parameter \"offset\" must be at most the case's sample count, "+strconv.Itoa(S)).
			with(map[string]any{"parameter": "offset", "sample_count": S})
	}
	cb, err := json.Marshal(&cr)
	if err != nil {
		return errorf(http.StatusInternalServerError, "internal_error", "encoding the case failed")
	}
	// What the answer holds besides its samples: the case, the other
	// fields (well under 256 bytes) and the commas.
	fixed := len(cb) + 256
	from, to := int(offset), int(min(offset+limit, int64(S)))
	pick := newPagePicker(from, to, min(MaxCasePageBytes, s.o.MaxReportBytes)-fixed, s.o.MaxReportBytes-fixed)
	var encErr error
	if from < to {
		e := st.readSamples(ci, &cr, from, to, func(sm *evalengine.SampleResult) error {
			if sm.SampleIndex < pick.from || sm.SampleIndex >= pick.end {
				return nil
			}
			b, err := json.Marshal(sm)
			if err != nil {
				encErr = err
				return err
			}
			return pick.add(sm.SampleIndex, b)
		})
		if encErr != nil {
			return errorf(http.StatusInternalServerError, "internal_error", "encoding a sample failed")
		}
		if e != nil {
			return e
		}
	}
	if pick.tooLarge {
		return errorf(http.StatusRequestEntityTooLarge, CodeResponseTooLarge,
			"sample "+strconv.Itoa(from)+" of the case is larger than the "+strconv.Itoa(s.o.MaxReportBytes)+
				" bytes an answer may have; the job's report?format=jsonl has it").
			with(map[string]any{"max_bytes": s.o.MaxReportBytes, "sample_index": from, "route": PathJobReport + "?format=jsonl"})
	}
	page := CasePage{JobID: id, CaseIndex: ci, Case: cb, SampleCount: S, Offset: from, Samples: []json.RawMessage{}}
	for _, b := range pick.page() {
		if b == nil {
			return storedStreamError(errPageIncomplete)
		}
		page.Samples = append(page.Samples, b)
	}
	if next := from + len(page.Samples); next < S {
		page.NextOffset = &next
	}
	b, err := json.Marshal(page)
	if err != nil {
		return errorf(http.StatusInternalServerError, "internal_error", "encoding the answer failed")
	}
	return s.writeRaw(w, http.StatusOK, "application/json; charset=utf-8", append(b, '\n'), s.o.MaxReportBytes)
}
