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
// its position (24 bytes a sample), never a decoded sample or case. This is
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
	var idx sampleIndex
	sc, err := scanStream(io.NewSectionReader(r, 0, size), &idx, scanHooks{})
	if err != nil {
		return nil, err
	}
	return &StreamFile{r: r, Header: sc.header, Summary: sc.summary, samples: idx.refs, caseStart: sc.caseStart, caseEnd: sc.caseEnd}, nil
}

// sampleTally is what a stream check keeps of the sample lines, so that
// each case line can be checked against its samples: OpenStreamFile's
// index (sampleIndex, 24 bytes a sample, which a renderer needs to read
// the samples back) or a comparison side's bits (sampleBits, one bit a
// sample and one byte a case).
type sampleTally interface {
	// start is called once with the checked header.
	start(h *StreamHeader)
	// add records a checked sample line; its error is the reason.
	add(ci, si int, off int64, n int, passed bool) error
	// seal is called once every sample came (at the first case line,
	// or at the end of a stream of no cases): duplicates and
	// completeness.
	seal(h *StreamHeader) error
	// passed is case ci's count of passed samples (after seal).
	passed(ci int) int
}

// streamScan is what scanStream found besides the tally.
type streamScan struct {
	header             StreamHeader
	summary            *Result
	caseStart, caseEnd int64
}

// scanHooks are what a caller of scanStream sees besides its tally; nil
// hooks are not called.
type scanHooks struct {
	// onHeader is called once with the checked header.
	onHeader func(h *StreamHeader)
	// onSample is called with every checked sample line that is not a
	// duplicate; the sample is only valid during the call.
	onSample func(ci int, s *scanSample) error
	// onCase is called with every checked case line.
	onCase func(c *scanCaseLine) error
}

// scanStream reads a stream once from start to end with the checks
// StreamFile documents, recording its samples in t and handing the
// checked lines to hooks.
func scanStream(r io.Reader, t sampleTally, hooks scanHooks) (*streamScan, error) {
	br := bufio.NewReaderSize(r, streamBufferBytes)
	sc := &streamScan{}
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
		s           scanSampleLine
		sample      scanSample
		dec         lineDecoder // one for every line: its buffers are kept
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
		if sc.summary != nil {
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
			if reason := decodeHeaderLine(line, lim, &sc.header); reason != "" {
				return nil, bad(n, reason)
			}
			h := &sc.header
			header = true
			t.start(h)
			if hooks.onHeader != nil {
				hooks.onHeader(h)
			}
			continue
		}
		if caseLines > 0 && head.Type == streamTypeSample {
			return nil, bad(n, "sample_after_cases")
		}
		switch head.Type {
		case streamTypeSample:
			// One sample decoded at a time, into the same value, as
			// the checks read it (streamscan.go).
			sample = scanSample{}
			s = scanSampleLine{Sample: &sample}
			if err := dec.decode(line, lim, &s); err != nil || s.Sample == nil {
				return nil, bad(n, "invalid_sample")
			}
			if err := s.Sample.check(&sc.header, s.CaseIndex); err != nil {
				return nil, bad(n, err.Error())
			}
			if err := t.add(s.CaseIndex, s.Sample.SampleIndex, lineOff, len(line), s.Sample.Passed); err != nil {
				return nil, bad(n, err.Error())
			}
			if hooks.onSample != nil {
				if err := hooks.onSample(s.CaseIndex, s.Sample); err != nil {
					return nil, err
				}
			}
		case streamTypeCase:
			c, err := decodeScanCaseLine(&dec, line, lim)
			if err != nil {
				return nil, bad(n, "invalid_case")
			}
			if c.CaseIndex != caseLines || c.CaseIndex >= sc.header.CaseCount {
				return nil, bad(n, "case_out_of_order")
			}
			if caseLines == 0 {
				sc.caseStart = lineOff
				if err := t.seal(&sc.header); err != nil {
					return nil, err
				}
			}
			// Every sample came before the first case line, so the
			// case's sample counts can be checked now.
			if c.Case.SampleCount != sc.header.SampleCount || c.Case.PassedSampleCount != t.passed(c.CaseIndex) {
				return nil, bad(n, "case_mismatch")
			}
			caseLines++
			if c.Case.Passed {
				passedCases++
			}
			if hooks.onCase != nil {
				if err := hooks.onCase(c); err != nil {
					return nil, err
				}
			}
		case streamTypeSummary:
			sum, ok := decodeSummaryLine(line, lim)
			switch {
			case !ok:
				return nil, bad(n, "invalid_summary")
			case caseLines != sc.header.CaseCount:
				return nil, bad(n, "missing_cases")
			case !sum.summarizes(&sc.header, passedCases):
				return nil, bad(n, "summary_mismatch")
			}
			sc.caseEnd = lineOff
			sc.summary = sum
		default:
			return nil, bad(n, "unknown_line_type")
		}
	}
	if !header {
		return nil, bad(1, "missing_header")
	}
	if sc.summary == nil {
		return nil, ReasonErr(CodeInvalidEvalStream, "incomplete", "no summary")
	}
	if sc.header.CaseCount == 0 {
		if err := t.seal(&sc.header); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// decodeHeaderLine decodes and checks a stream's header line into h; a
// refusal is its reason.
func decodeHeaderLine(line []byte, lim jsonlimit.Limits, h *StreamHeader) string {
	if err := jsonlimit.Unmarshal(line, lim, h); err != nil {
		return "invalid_header"
	}
	if h.Type != streamTypeHeader {
		return "missing_header"
	}
	if h.Format != StreamFormat || h.Version != StreamVersion {
		return "unsupported_stream_version"
	}
	if h.EvalSetID == "" || h.EvalSetVersion == "" || h.CaseCount < 0 || h.CaseCount > MaxCases || h.SampleCount < 1 || h.SampleCount > MaxSamplesPerCase {
		return "invalid_header"
	}
	return ""
}

// decodeSummaryLine decodes a stream's summary line (false: it is not
// one, reason invalid_summary).
func decodeSummaryLine(line []byte, lim jsonlimit.Limits) (*Result, bool) {
	var s streamSummary
	if err := jsonlimit.Unmarshal(line, lim, &s); err != nil || s.Type != streamTypeSummary || s.Result == nil || s.Result.Cases != nil {
		return nil, false
	}
	return s.Result, true
}

// summarizes says whether a stream's summary agrees with its header h and
// the number of its case lines that passed (else summary_mismatch).
func (sum *Result) summarizes(h *StreamHeader, passedCases int) bool {
	return sum.EvalSetID == h.EvalSetID && sum.EvalSetVersion == h.EvalSetVersion && sum.SampleCount == h.SampleCount &&
		sum.CaseCount == h.CaseCount && sum.PassedCaseCount == passedCases && sum.ResultSchemaVersion == ResultSchemaVersion
}

// sampleIndex is OpenStreamFile's tally: every sample line's position,
// sorted by (case, sample) once they all came.
type sampleIndex struct {
	refs []sampleRef
	S    int
}

func (x *sampleIndex) start(h *StreamHeader) { x.S = h.SampleCount }

func (x *sampleIndex) add(ci, si int, off int64, n int, passed bool) error {
	x.refs = append(x.refs, sampleRef{caseIndex: int32(ci), sampleIndex: int32(si), off: off, n: int32(n), passed: passed})
	return nil
}

// seal sorts the sample index by (case, sample) and checks that it holds
// every sample exactly once.
func (x *sampleIndex) seal(h *StreamHeader) error {
	refs := x.refs
	slices.SortFunc(refs, func(a, b sampleRef) int {
		if a.caseIndex != b.caseIndex {
			return int(a.caseIndex - b.caseIndex)
		}
		return int(a.sampleIndex - b.sampleIndex)
	})
	for i := 1; i < len(refs); i++ {
		if a, b := refs[i-1], refs[i]; a.caseIndex == b.caseIndex && a.sampleIndex == b.sampleIndex {
			return ReasonErr(CodeInvalidEvalStream, "duplicate_sample", "case "+strconv.Itoa(int(a.caseIndex)))
		}
	}
	if want := h.CaseCount * h.SampleCount; len(refs) != want {
		return ReasonErr(CodeInvalidEvalStream, "incomplete", strconv.Itoa(len(refs))+" of "+strconv.Itoa(want)+" samples")
	}
	return nil
}

func (x *sampleIndex) passed(ci int) int {
	n := 0
	for _, ref := range x.refs[ci*x.S : ci*x.S+x.S] {
		if ref.passed {
			n++
		}
	}
	return n
}

// sampleBits is a comparison side's tally (ReadStreamSide): one bit a
// (case, sample), so a duplicate is caught as it comes, and a count of
// passed samples a case (at most MaxSamplesPerCase, so one byte). It
// never holds a position: a side reads no sample back.
type sampleBits struct {
	seen   []uint64
	npass  []uint8
	S, got int
}

func (x *sampleBits) start(h *StreamHeader) {
	x.S = h.SampleCount
	x.seen = make([]uint64, (h.CaseCount*h.SampleCount+63)/64)
	x.npass = make([]uint8, h.CaseCount)
}

func (x *sampleBits) add(ci, si int, _ int64, _ int, passed bool) error {
	// checkSample has put ci and si in range.
	i := ci*x.S + si
	if x.seen[i/64]&(1<<(i%64)) != 0 {
		return errors.New("duplicate_sample")
	}
	x.seen[i/64] |= 1 << (i % 64)
	x.got++
	if passed {
		x.npass[ci]++
	}
	return nil
}

func (x *sampleBits) seal(h *StreamHeader) error {
	if want := h.CaseCount * h.SampleCount; x.got != want {
		return ReasonErr(CodeInvalidEvalStream, "incomplete", strconv.Itoa(x.got)+" of "+strconv.Itoa(want)+" samples")
	}
	x.seen = nil
	return nil
}

func (x *sampleBits) passed(ci int) int { return int(x.npass[ci]) }

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

// decodeScanCaseLine is decodeCaseLine as the stream checks read a case
// line (streamscan.go).
func decodeScanCaseLine(dec *lineDecoder, line []byte, lim jsonlimit.Limits) (*scanCaseLine, error) {
	var c scanCaseLine
	if err := dec.decode(line, lim, &c); err != nil {
		return nil, err
	}
	if c.Case == nil || c.Case.Samples.set {
		return nil, errors.New("invalid case line")
	}
	return &c, nil
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
