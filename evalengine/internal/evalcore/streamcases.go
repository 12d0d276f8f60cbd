package evalcore

import (
	"bufio"
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
// API pages a result's cases this way (a page reads the case lines again,
// never the samples).
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
	lim := streamLineLimits()
	br := bufio.NewReaderSize(r, streamBufferBytes)
	passed := 0
	bad := func(ci int, reason string) error {
		return ReasonErr(CodeInvalidEvalStream, reason, "case "+strconv.Itoa(ci))
	}
	for ci := range s.Header.CaseCount {
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
		return bad(s.Header.CaseCount, "line_after_cases")
	}
	if passed != s.Summary.PassedCaseCount {
		return ReasonErr(CodeInvalidEvalStream, "summary_mismatch", "summary")
	}
	return nil
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
