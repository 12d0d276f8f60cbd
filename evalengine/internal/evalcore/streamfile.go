package evalcore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// StreamFile is a complete sample stream on a seekable input, indexed so
// that a renderer can walk it case by case without holding it: it keeps
// the header, the summary (a Result without cases) and, per sample line,
// its position (16 bytes a sample), never a decoded sample or case. This is
// how `adk eval report` renders a jsonl result of any size: samples are
// in finish order in the file, so the index is what puts them back into
// their cases without a second copy of the result.
//
// What it checks is ReadStream's per-line checks (the same per-line byte
// bound and JSON limits the writer uses, header first, known line types,
// samples in range with their deterministic ids and derived status, no
// sample twice, case lines in order, nothing after the summary), the
// stream's completeness (every sample, every case line, the summary), and
// per case what a case line can be checked against from its own samples
// (identity and sample counts) plus the run's case counts. Unlike
// StreamToResult it does not recompute metric averages and statistics over
// the whole run: that needs every sample at once.
type StreamFile struct {
	r       io.ReaderAt
	Header  StreamHeader
	Summary *Result // Cases is nil; CaseCount and the rest are the run's
	// samples are the sample lines sorted by (case, sample).
	samples   []sampleRef
	caseStart int64 // offset of the first case line
	caseEnd   int64 // offset of the summary line
	buf       []byte
}

type sampleRef struct {
	caseIndex, sampleIndex int32
	off                    int64
	n                      int32 // line length without '\n'
	passed                 bool
}

// OpenStreamFile reads r (size bytes) once from start to end and checks
// it, see StreamFile. Errors are invalid_eval_stream with the reason and
// "line N" as detail.
func OpenStreamFile(r io.ReaderAt, size int64) (*StreamFile, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), streamBufferBytes)
	f := &StreamFile{r: r}
	bad := func(line int, reason string) error {
		return ReasonErr(CodeInvalidEvalStream, reason, "line "+strconv.Itoa(line))
	}
	lim := jsonlimit.OwnDocumentLimits()
	lim.MaxBytes = MaxStreamLineBytes
	var (
		off         int64
		caseLines   int
		passedCases int
		header      bool
	)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if err == io.EOF {
			if len(line) > 0 {
				return nil, bad(n, "truncated_line")
			}
			break
		}
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				return nil, bad(n, "line_too_large")
			}
			return nil, &Error{Code: CodeInvalidEvalStream, Reason: "read_failed", Err: err}
		}
		lineOff := off
		off += int64(len(line)) + 1
		if f.Summary != nil {
			return nil, bad(n, "line_after_summary")
		}
		head, err := lineType(line)
		if err != nil {
			return nil, bad(n, "invalid_json")
		}
		if n == 1 {
			if head.Type != streamTypeHeader {
				return nil, bad(n, "missing_header")
			}
			if err := jsonlimit.Unmarshal(line, lim, &f.Header); err != nil {
				return nil, bad(n, "invalid_header")
			}
			h := &f.Header
			if h.Format != StreamFormat || h.Version != StreamVersion {
				return nil, bad(n, "unsupported_stream_version")
			}
			if h.EvalSetID == "" || h.EvalSetVersion == "" || h.CaseCount < 0 || h.CaseCount > MaxCases || h.SampleCount < 1 || h.SampleCount > MaxSamplesPerCase {
				return nil, bad(n, "invalid_header")
			}
			header = true
			continue
		}
		if caseLines > 0 && head.Type == streamTypeSample {
			return nil, bad(n, "sample_after_cases")
		}
		switch head.Type {
		case streamTypeSample:
			var s streamSample
			if err := jsonlimit.Unmarshal(line, lim, &s); err != nil || s.Sample == nil {
				return nil, bad(n, "invalid_sample")
			}
			if err := (&Stream{Header: f.Header}).checkSample(s.CaseIndex, s.Sample); err != nil {
				return nil, bad(n, err.Error())
			}
			f.samples = append(f.samples, sampleRef{caseIndex: int32(s.CaseIndex), sampleIndex: int32(s.Sample.SampleIndex), off: lineOff, n: int32(len(line)), passed: s.Sample.Passed})
		case streamTypeCase:
			c, err := decodeCaseLine(line, lim)
			if err != nil {
				return nil, bad(n, "invalid_case")
			}
			if c.CaseIndex != caseLines || c.CaseIndex >= f.Header.CaseCount {
				return nil, bad(n, "case_out_of_order")
			}
			if caseLines == 0 {
				f.caseStart = lineOff
				if err := f.indexSamples(); err != nil {
					return nil, err
				}
			}
			// Every sample came before the first case line, so the
			// case's sample counts can be checked now.
			S, passed := f.Header.SampleCount, 0
			for _, ref := range f.samples[c.CaseIndex*S : c.CaseIndex*S+S] {
				if ref.passed {
					passed++
				}
			}
			if c.Case.SampleCount != S || c.Case.PassedSampleCount != passed {
				return nil, bad(n, "case_mismatch")
			}
			caseLines++
			if c.Case.Passed {
				passedCases++
			}
		case streamTypeSummary:
			var s streamSummary
			if err := jsonlimit.Unmarshal(line, lim, &s); err != nil || s.Result == nil || s.Result.Cases != nil {
				return nil, bad(n, "invalid_summary")
			}
			if caseLines != f.Header.CaseCount {
				return nil, bad(n, "missing_cases")
			}
			h, sum := &f.Header, s.Result
			if sum.EvalSetID != h.EvalSetID || sum.EvalSetVersion != h.EvalSetVersion || sum.SampleCount != h.SampleCount ||
				sum.CaseCount != h.CaseCount || sum.PassedCaseCount != passedCases || sum.ResultSchemaVersion != ResultSchemaVersion {
				return nil, bad(n, "summary_mismatch")
			}
			f.caseEnd = lineOff
			f.Summary = sum
		default:
			return nil, bad(n, "unknown_line_type")
		}
	}
	if !header {
		return nil, bad(1, "missing_header")
	}
	if f.Summary == nil {
		return nil, ReasonErr(CodeInvalidEvalStream, "incomplete", "no summary")
	}
	if f.Header.CaseCount == 0 {
		if err := f.indexSamples(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// indexSamples sorts the sample index by (case, sample) and checks that
// it holds every sample exactly once.
func (f *StreamFile) indexSamples() error {
	slices.SortFunc(f.samples, func(a, b sampleRef) int {
		if a.caseIndex != b.caseIndex {
			return int(a.caseIndex - b.caseIndex)
		}
		return int(a.sampleIndex - b.sampleIndex)
	})
	for i := 1; i < len(f.samples); i++ {
		if a, b := f.samples[i-1], f.samples[i]; a.caseIndex == b.caseIndex && a.sampleIndex == b.sampleIndex {
			return ReasonErr(CodeInvalidEvalStream, "duplicate_sample", "case "+strconv.Itoa(int(a.caseIndex)))
		}
	}
	if want := f.Header.CaseCount * f.Header.SampleCount; len(f.samples) != want {
		return ReasonErr(CodeInvalidEvalStream, "incomplete", strconv.Itoa(len(f.samples))+" of "+strconv.Itoa(want)+" samples")
	}
	return nil
}

// lineType is a line's "type". The writer puts it first, so the common
// case is read from the prefix without scanning the line (the strict
// decode that follows scans it anyway); any other key order is decoded.
func lineType(line []byte) (struct{ Type string }, error) {
	for _, t := range [...]string{streamTypeSample, streamTypeCase, streamTypeSummary, streamTypeHeader} {
		if bytes.HasPrefix(line, []byte(`{"type":"`+t+`",`)) {
			return struct{ Type string }{t}, nil
		}
	}
	var head struct {
		Type string `json:"type"`
	}
	err := json.Unmarshal(line, &head)
	return struct{ Type string }{head.Type}, err
}

type caseLine struct {
	Type      string      `json:"type"`
	CaseIndex int         `json:"case_index"`
	Case      *CaseResult `json:"case"`
}

func decodeCaseLine(line []byte, lim jsonlimit.Limits) (*caseLine, error) {
	var c caseLine
	if err := jsonlimit.Unmarshal(line, lim, &c); err != nil {
		return nil, err
	}
	if c.Case == nil || c.Case.Samples != nil {
		return nil, errors.New("invalid case line")
	}
	return &c, nil
}

// Cases calls fn for every case in case order; the case is only valid
// during the call. When withSamples is nil or says so for the case, its
// samples (in sample order) are read and filled in, else Samples is nil.
// It holds one case at a time. A case whose line does not agree with its
// samples (case id, sample counts) is invalid_eval_stream case_mismatch.
func (f *StreamFile) Cases(withSamples func(*CaseResult) bool, fn func(ci int, c *CaseResult) error) error {
	lim := jsonlimit.OwnDocumentLimits()
	lim.MaxBytes = MaxStreamLineBytes
	br := bufio.NewReaderSize(io.NewSectionReader(f.r, f.caseStart, f.caseEnd-f.caseStart), streamBufferBytes)
	S := f.Header.SampleCount
	samples := make([]SampleResult, S)
	for ci := range f.Header.CaseCount {
		line, err := readLine(br)
		if err != nil {
			return &Error{Code: CodeInvalidEvalStream, Reason: "read_failed", Err: err}
		}
		cl, err := decodeCaseLine(line, lim)
		if err != nil || cl.CaseIndex != ci {
			return ReasonErr(CodeInvalidEvalStream, "invalid_case", "case "+strconv.Itoa(ci))
		}
		c := cl.Case
		if withSamples != nil && !withSamples(c) {
			if err := fn(ci, c); err != nil {
				return err
			}
			continue
		}
		passed := 0
		for si := range S {
			if err := f.readSample(&f.samples[ci*S+si], &samples[si]); err != nil {
				return err
			}
			if samples[si].CaseID != c.CaseID {
				return ReasonErr(CodeInvalidEvalStream, "case_mismatch", c.CaseID)
			}
			if samples[si].Passed {
				passed++
			}
		}
		if c.SampleCount != S || c.PassedSampleCount != passed {
			return ReasonErr(CodeInvalidEvalStream, "case_mismatch", c.CaseID)
		}
		c.Samples = samples
		if err := fn(ci, c); err != nil {
			return err
		}
		clear(samples)
	}
	return nil
}

func (f *StreamFile) readSample(ref *sampleRef, into *SampleResult) error {
	if cap(f.buf) < int(ref.n) {
		f.buf = make([]byte, ref.n)
	}
	b := f.buf[:ref.n]
	if _, err := f.r.ReadAt(b, ref.off); err != nil {
		return &Error{Code: CodeInvalidEvalStream, Reason: "read_failed", Err: err}
	}
	var s streamSample
	s.Sample = into
	lim := jsonlimit.OwnDocumentLimits()
	lim.MaxBytes = MaxStreamLineBytes
	if err := jsonlimit.Unmarshal(b, lim, &s); err != nil || s.Sample != into || s.CaseIndex != int(ref.caseIndex) || into.SampleIndex != int(ref.sampleIndex) {
		// The file changed under us between the index pass and now.
		return ReasonErr(CodeInvalidEvalStream, "invalid_sample", "offset "+strconv.FormatInt(ref.off, 10))
	}
	return nil
}
