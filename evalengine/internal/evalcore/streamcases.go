package evalcore

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// StreamCases reads a complete stream's cases without its samples. A
// stored stream can be read from any line: its first line is the header,
// its last the summary, and the case lines (one per case, in case order)
// come right before the summary, so a reader takes those and skips every
// sample line. That is O(cases) whatever the samples hold: the developer
// API pages a result's cases this way (a page reads the case lines it
// needs again, never the samples). One case's samples are the sample
// lines naming it (ReadSamples): they are in finish order, so a reader
// of one case passes over the others' lines, skipping them by their
// prefix without decoding them; where the store reads a sample by its
// index (the fleet's records), a reader asks exactly a case's lines and
// checks them in sample order (ReadCaseSamples).
//
// The header and the summary are checked as OpenStreamFile checks them
// (the same reasons). A case line is checked as OpenStreamFile checks it
// except against its samples, which are not read: its position, its
// sample count, and, once every case line came, the number that passed
// against the summary's.
type StreamCases struct {
	Header  StreamHeader
	Summary *Result // Cases is nil
}

// OpenStreamCases checks a stream's header line and summary line (each
// with or without its newline) and that they agree. Errors are
// invalid_eval_stream with the reason and the line ("header",
// "summary") as detail.
func OpenStreamCases(header, summary []byte) (*StreamCases, error) {
	lim := streamLineLimits()
	sc := &StreamCases{}
	if reason := decodeHeaderLine(trimNewline(header), lim, &sc.Header); reason != "" {
		return nil, ReasonErr(CodeInvalidEvalStream, reason, "header")
	}
	sum, ok := decodeSummaryLine(trimNewline(summary), lim)
	if !ok {
		return nil, ReasonErr(CodeInvalidEvalStream, "invalid_summary", "summary")
	}
	// The passed count is checked against the case lines in Read.
	if !sum.summarizes(&sc.Header, sum.PassedCaseCount) || sum.PassedCaseCount < 0 || sum.PassedCaseCount > sum.CaseCount {
		return nil, ReasonErr(CodeInvalidEvalStream, "summary_mismatch", "summary")
	}
	sc.Summary = sum
	return sc, nil
}

// Read reads the stream's case lines from r: exactly Header.CaseCount
// lines, in case order, and nothing after them. fn is called with each
// case (valid only during the call; Samples is nil); its error ends the
// read. Errors are invalid_eval_stream with the reason and "case N".
func (s *StreamCases) Read(r io.Reader, fn func(ci int, c *CaseResult) error) error {
	return s.ReadRange(r, 0, s.Header.CaseCount, fn)
}

// ReadRange is Read of case lines from..to-1 only: r holds exactly those
// lines (the stream's lines before the summary, from the from-th on),
// so a reader of a page of cases reads no line outside it. The passed
// count is checked against the summary's only when r holds every case
// line (from 0 to Header.CaseCount): a range cannot count them.
func (s *StreamCases) ReadRange(r io.Reader, from, to int, fn func(ci int, c *CaseResult) error) error {
	if from < 0 || to < from || to > s.Header.CaseCount {
		return ReasonErr(CodeInvalidEvalStream, "case_out_of_range", strconv.Itoa(from)+".."+strconv.Itoa(to))
	}
	lim := streamLineLimits()
	br := bufio.NewReaderSize(r, streamBufferBytes)
	passed := 0
	bad := func(ci int, reason string) error {
		return ReasonErr(CodeInvalidEvalStream, reason, "case "+strconv.Itoa(ci))
	}
	for ci := from; ci < to; ci++ {
		line, err := readLine(br)
		switch {
		case err == io.EOF && len(line) > 0:
			return bad(ci, "truncated_line")
		case err == io.EOF:
			return bad(ci, "missing_cases")
		case errors.Is(err, errLineTooLong):
			return bad(ci, "line_too_large")
		case err != nil:
			return &Error{Code: CodeInvalidEvalStream, Reason: "read_failed", Err: err}
		}
		cl, err := decodeCaseLine(line, lim)
		if err != nil || cl.Type != streamTypeCase {
			return bad(ci, "invalid_case")
		}
		if cl.CaseIndex != ci {
			return bad(ci, "case_out_of_order")
		}
		c := cl.Case
		if c.SampleCount != s.Header.SampleCount || c.PassedSampleCount < 0 || c.PassedSampleCount > c.SampleCount {
			return bad(ci, "case_mismatch")
		}
		if c.Passed {
			passed++
		}
		if err := fn(ci, c); err != nil {
			return err
		}
	}
	if line, err := readLine(br); err != io.EOF || len(line) > 0 {
		return bad(to, "line_after_cases")
	}
	if from == 0 && to == s.Header.CaseCount && passed != s.Summary.PassedCaseCount {
		return ReasonErr(CodeInvalidEvalStream, "summary_mismatch", "summary")
	}
	return nil
}

// ReadFailuresFirst reads the case lines of rows from..to-1 of the
// result's failures-first order (the cases that did not pass, then those
// that did, each in case order) from r: exactly those lines, in that
// order, as a store that lists a result's failed cases answers them (the
// fleet's result_cases). Each is checked as ReadRange checks a case line,
// and against its row: a row before the summary's failed count must not
// have passed and one after it must have, case indexes ascend within
// each part, and the row's rank bounds its index (the failed case of
// rank k is at k or later, and at most the passed count later). Whether
// a case was left out between two rows cannot be seen without every case
// line (Read counts them). fn is called with each (valid only during the
// call); its error ends the read and is returned as is.
func (s *StreamCases) ReadFailuresFirst(r io.Reader, from, to int, fn func(ci int, c *CaseResult) error) error {
	n := s.Header.CaseCount
	if from < 0 || to < from || to > n {
		return ReasonErr(CodeInvalidEvalStream, "case_out_of_range", strconv.Itoa(from)+".."+strconv.Itoa(to))
	}
	passedN := s.Summary.PassedCaseCount
	failedN := n - passedN
	lim := streamLineLimits()
	br := bufio.NewReaderSize(r, streamBufferBytes)
	last := -1
	for row := from; row < to; row++ {
		bad := func(reason string) error {
			return ReasonErr(CodeInvalidEvalStream, reason, "row "+strconv.Itoa(row))
		}
		line, err := readLine(br)
		switch {
		case err == io.EOF && len(line) > 0:
			return bad("truncated_line")
		case err == io.EOF:
			return bad("missing_cases")
		case errors.Is(err, errLineTooLong):
			return bad("line_too_large")
		case err != nil:
			return &Error{Code: CodeInvalidEvalStream, Reason: "read_failed", Err: err}
		}
		cl, err := decodeCaseLine(line, lim)
		if err != nil || cl.Type != streamTypeCase {
			return bad("invalid_case")
		}
		c, ci := cl.Case, cl.CaseIndex
		if c.SampleCount != s.Header.SampleCount || c.PassedSampleCount < 0 || c.PassedSampleCount > c.SampleCount {
			return bad("case_mismatch")
		}
		rank, others := row, passedN
		if row >= failedN {
			rank, others = row-failedN, failedN
			if row == failedN {
				last = -1
			}
		}
		if c.Passed != (row >= failedN) || ci <= last || ci < rank || ci > rank+others {
			return bad("case_out_of_order")
		}
		last = ci
		if err := fn(ci, c); err != nil {
			return err
		}
	}
	if line, err := readLine(br); err != io.EOF || len(line) > 0 {
		return ReasonErr(CodeInvalidEvalStream, "line_after_cases", "row "+strconv.Itoa(to))
	}
	return nil
}

// ReadSamples reads the stream's sample lines from r (the lines between
// the header and the first case line: Header.CaseCount × SampleCount of
// them, in the order the samples finished) and calls fn with each sample
// of case ci, whose case line is c, as it comes (valid only during the
// call). A sample line of another case is skipped as soon as the
// writer's prefix ({"type":"sample","case_index":N,"sample":) names its
// case: it is counted, not decoded (a stored stream's lines are checked
// against their digest where they are kept); a line without that prefix
// is decoded to find its case. A sample of case ci is checked as
// ReadStream checks one (index range, identity, derived status) and
// against c (its case id, no sample twice), and once r ends every sample
// of the case must have come, with c's count of passed ones, and r must
// have held every sample line. fn's error ends the read and is returned
// as is: a caller that has the samples it wants stops there. Errors are
// invalid_eval_stream with the reason and "sample line N" (1-based in r).
func (s *StreamCases) ReadSamples(r io.Reader, ci int, c *CaseResult, fn func(sm *SampleResult) error) error {
	h := &s.Header
	if ci < 0 || ci >= h.CaseCount {
		return ReasonErr(CodeInvalidEvalStream, "case_out_of_range", strconv.Itoa(ci))
	}
	lim := streamLineLimits()
	br := bufio.NewReaderSize(r, streamBufferBytes)
	seen := make([]bool, h.SampleCount)
	got, passed, n := 0, 0, 0
	bad := func(reason string) error {
		return ReasonErr(CodeInvalidEvalStream, reason, "sample line "+strconv.Itoa(n))
	}
	var sm SampleResult
	for {
		line, err := readLine(br)
		n++
		switch {
		case err == io.EOF && len(line) > 0:
			return bad("truncated_line")
		case err == io.EOF:
			n--
			if n != h.CaseCount*h.SampleCount || got != h.SampleCount {
				return ReasonErr(CodeInvalidEvalStream, "incomplete", strconv.Itoa(n)+" sample lines, "+strconv.Itoa(got)+" of case "+strconv.Itoa(ci))
			}
			if passed != c.PassedSampleCount {
				return ReasonErr(CodeInvalidEvalStream, "case_mismatch", "case "+strconv.Itoa(ci))
			}
			return nil
		case errors.Is(err, errLineTooLong):
			return bad("line_too_large")
		case err != nil:
			return &Error{Code: CodeInvalidEvalStream, Reason: "read_failed", Err: err}
		}
		if lc, ok := sampleLineCase(line); ok && lc != ci {
			continue
		}
		sm = SampleResult{}
		sl := streamSample{Sample: &sm}
		if err := jsonlimit.Unmarshal(line, lim, &sl); err != nil || sl.Type != streamTypeSample || sl.Sample != &sm {
			return bad("invalid_sample")
		}
		if sl.CaseIndex != ci {
			if sl.CaseIndex < 0 || sl.CaseIndex >= h.CaseCount {
				return bad("sample_out_of_range")
			}
			continue
		}
		if err := checkStreamSample(h, ci, &sm); err != nil {
			return bad(err.Error())
		}
		switch {
		case sm.CaseID != c.CaseID:
			return bad("case_mismatch")
		case seen[sm.SampleIndex]:
			return bad("duplicate_sample")
		}
		seen[sm.SampleIndex] = true
		got++
		if sm.Passed {
			passed++
		}
		if err := fn(&sm); err != nil {
			return err
		}
	}
}

// ReadCaseSamples reads samples from..to-1 of case ci, whose case line
// is c, from r: exactly those sample lines of the stream, in sample
// order (what a store that reads a sample by its index answers, so a
// reader of one case reads its own lines only). Each is checked as
// ReadSamples checks it, and must be the next sample of the range; once
// r ends every sample of the range must have come, with c's count of
// passed ones when the range is the whole case. fn is called with each
// as it comes (valid only during the call); its error ends the read and
// is returned as is. Errors are invalid_eval_stream with the reason and
// "sample N" (its index in the case).
func (s *StreamCases) ReadCaseSamples(r io.Reader, ci int, c *CaseResult, from, to int, fn func(sm *SampleResult) error) error {
	h := &s.Header
	if ci < 0 || ci >= h.CaseCount || from < 0 || to < from || to > h.SampleCount {
		return ReasonErr(CodeInvalidEvalStream, "sample_out_of_range", "case "+strconv.Itoa(ci)+" samples "+strconv.Itoa(from)+".."+strconv.Itoa(to))
	}
	lim := streamLineLimits()
	br := bufio.NewReaderSize(r, streamBufferBytes)
	passed := 0
	var sm SampleResult
	for si := from; ; si++ {
		bad := func(reason string) error {
			return ReasonErr(CodeInvalidEvalStream, reason, "sample "+strconv.Itoa(si))
		}
		line, err := readLine(br)
		switch {
		case err == io.EOF && len(line) > 0:
			return bad("truncated_line")
		case err == io.EOF && si < to:
			return bad("incomplete")
		case err == io.EOF:
			if from == 0 && to == h.SampleCount && passed != c.PassedSampleCount {
				return ReasonErr(CodeInvalidEvalStream, "case_mismatch", "case "+strconv.Itoa(ci))
			}
			return nil
		case errors.Is(err, errLineTooLong):
			return bad("line_too_large")
		case err != nil:
			return &Error{Code: CodeInvalidEvalStream, Reason: "read_failed", Err: err}
		case si >= to:
			return bad("line_after_samples")
		}
		sm = SampleResult{}
		sl := streamSample{Sample: &sm}
		if err := jsonlimit.Unmarshal(line, lim, &sl); err != nil || sl.Type != streamTypeSample || sl.Sample != &sm {
			return bad("invalid_sample")
		}
		if sl.CaseIndex != ci || sm.SampleIndex != si {
			return bad("sample_out_of_order")
		}
		if err := checkStreamSample(h, ci, &sm); err != nil {
			return bad(err.Error())
		}
		if sm.CaseID != c.CaseID {
			return bad("case_mismatch")
		}
		if sm.Passed {
			passed++
		}
		if err := fn(&sm); err != nil {
			return err
		}
	}
}

// sampleLinePrefix is how the stream writer starts a sample line; the
// case index and `,"sample":` follow.
var sampleLinePrefix = []byte(`{"type":"sample","case_index":`)

// sampleLineCase reads the case index of a sample line the stream writer
// wrote from its prefix (false: the line does not start that way).
func sampleLineCase(line []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(line, sampleLinePrefix)
	if !ok {
		return 0, false
	}
	n, i := 0, 0
	for ; i < len(rest) && i < 7 && rest[i] >= '0' && rest[i] <= '9'; i++ {
		n = n*10 + int(rest[i]-'0')
	}
	if i == 0 || rest[0] == '0' && i > 1 || !bytes.HasPrefix(rest[i:], []byte(`,"sample":`)) {
		return 0, false
	}
	return n, true
}

// streamLineLimits are the JSON limits of one stream line: the writer's
// own document limits, a line at most MaxStreamLineBytes.
func streamLineLimits() jsonlimit.Limits {
	lim := jsonlimit.OwnDocumentLimits()
	lim.MaxBytes = MaxStreamLineBytes
	return lim
}

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}
