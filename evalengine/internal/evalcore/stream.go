package evalcore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/fadcedab/adk/internal/jsonlimit"
)

// The sample stream is the one JSON Lines format of a run's samples: the
// resume journal `adk eval run` keeps beside --output, and the `jsonl`
// report format. Every line is one JSON object with a "type":
//
//	{"type":"header","format":"adk-eval-stream","version":1,
//	 "eval_set_id":…,"eval_set_version":…,"case_count":N,"sample_count":S,
//	 "digests":{"config":…,"eval_set":…,"criteria":…,"options":…}}
//	{"type":"sample","case_index":I,"sample":{…SampleResult…}}   (any order)
//	{"type":"case","case_index":I,"case":{…CaseResult, "samples": null…}}
//	{"type":"summary","result":{…Result with "cases": null…}}
//
// The header comes first and once; sample lines follow in the order the
// samples finished; when the run completed, one case line per case (in
// case order) and the summary close it. Case aggregates and the summary
// are the result document minus the samples, split so that no line grows
// with the set (a 100,000-case summary would not fit one line). A reader
// rebuilds the full result by putting each sample back into its case
// (ReadStream, StreamToResult). Digests are opaque strings the writer
// chooses ("sha256:" + hex in `adk eval run`); they say which inputs the
// samples belong to. A line is at most MaxStreamLineBytes.
const (
	StreamFormat        = "adk-eval-stream"
	StreamVersion       = 1
	MaxStreamLineBytes  = 16 << 20
	streamTypeHeader    = "header"
	streamTypeSample    = "sample"
	streamTypeSummary   = "summary"
	streamTypeCase      = "case"
	streamFlushInterval = 100 * time.Millisecond
	streamBufferBytes   = 64 << 10
)

// Stream error code: a stream that is not one (bad line, wrong header,
// sample out of range, summary not matching the samples).
const CodeInvalidEvalStream = "invalid_eval_stream"

// StreamHeader is a stream's first line.
type StreamHeader struct {
	Type           string            `json:"type"`
	Format         string            `json:"format"`
	Version        int               `json:"version"`
	EvalSetID      string            `json:"eval_set_id"`
	EvalSetVersion string            `json:"eval_set_version"`
	CaseCount      int               `json:"case_count"`
	SampleCount    int               `json:"sample_count"`
	Digests        map[string]string `json:"digests"`
}

// NewStreamHeader is the header of a run of set with samples per case.
func NewStreamHeader(set *Set, samples int, digests map[string]string) StreamHeader {
	if digests == nil {
		digests = map[string]string{}
	}
	return StreamHeader{
		Type: streamTypeHeader, Format: StreamFormat, Version: StreamVersion,
		EvalSetID: set.ID, EvalSetVersion: set.Version,
		CaseCount: len(set.Cases), SampleCount: samples, Digests: digests,
	}
}

// streamSample is a sample line.
type streamSample struct {
	Type      string        `json:"type"`
	CaseIndex int           `json:"case_index"`
	Sample    *SampleResult `json:"sample"`
}

// streamSummary is the summary line.
type streamSummary struct {
	Type   string  `json:"type"`
	Result *Result `json:"result"`
}

// StreamWriter appends a stream to w. Lines are buffered and written out
// in batches: when 64 KiB are pending, when 100 ms passed since the last
// write-out, and on Flush. A crash loses at most the last batch (those
// samples run again on resume). A stream into a *bytes.Buffer is not
// batched: each line goes into it whole as it is written. It stops
// writing, and reports ErrStreamFull from then on, once the bytes written
// would pass maxBytes (> 0), so a journal is bounded. Safe for concurrent
// use.
type StreamWriter struct {
	mu sync.Mutex
	w  *bufio.Writer // nil when mem is set
	// mem is the stream's destination when it is memory: a page of a
	// stored result (the coordinator renders a page's lines through
	// several writers), which batching would only copy, and whose 64 KiB
	// buffer per writer was most of what a page allocated.
	mem       *bytes.Buffer
	lastFlush time.Time
	written   int64
	maxBytes  int64
	err       error
	line      bytes.Buffer
	// lineEnc encodes into line; it is made at the first line.
	lineEnc *json.Encoder
	filter  func([]byte) []byte
}

// SetLineFilter makes every later line pass through f before it is
// written (the CLI scrubs credentials with it); f must keep the line one
// JSON object ending in a newline.
func (sw *StreamWriter) SetLineFilter(f func([]byte) []byte) {
	sw.mu.Lock()
	sw.filter = f
	sw.mu.Unlock()
}

// ErrStreamFull is returned once a StreamWriter reached its byte bound.
var ErrStreamFull = errors.New("evalengine: sample stream reached its byte bound")

// NewStreamWriter starts a stream on w. With header set, it writes the
// header line first (a new stream); without, it appends to an existing
// one (a resumed journal). already is the size of what w already holds.
func NewStreamWriter(w io.Writer, header *StreamHeader, already, maxBytes int64) (*StreamWriter, error) {
	sw := &StreamWriter{lastFlush: time.Now(), written: already, maxBytes: maxBytes}
	if b, ok := w.(*bytes.Buffer); ok {
		sw.mem = b
	} else {
		sw.w = bufio.NewWriterSize(w, streamBufferBytes)
	}
	if header != nil {
		if err := sw.writeLine(header, true); err != nil {
			return nil, err
		}
	}
	return sw, nil
}

// WriteSample appends one finished sample of case caseIndex.
func (sw *StreamWriter) WriteSample(caseIndex int, s *SampleResult) error {
	return sw.writeLine(&streamSample{Type: streamTypeSample, CaseIndex: caseIndex, Sample: s}, false)
}

// WriteSummary appends the case lines and the summary line (r without
// its samples) and writes everything out.
func (sw *StreamWriter) WriteSummary(r *Result) error {
	for i := range r.CaseLines() {
		if err := sw.WriteCase(r, i); err != nil {
			return err
		}
	}
	return sw.WriteSummaryLine(r)
}

// CaseLines is the number of case lines WriteSummary writes for r.
func (r *Result) CaseLines() int {
	if r.summary != nil && r.Cases == nil {
		return len(r.summary.cases)
	}
	return len(r.Cases)
}

// CasePassed says whether r's case i (0 <= i < r.CaseLines()) passed,
// without building its case line: a reader of a result's failed cases
// lists them from a compact aggregate in O(cases) of booleans.
func (r *Result) CasePassed(i int) bool {
	if r.Cases != nil {
		return r.Cases[i].Passed
	}
	return r.summary.cases[i].passed
}

// WriteCase appends r's case line i (0 <= i < r.CaseLines()), the bytes
// WriteSummary writes for it, so a reader pages through a large result's
// case lines without rendering all of them. It only reads r: concurrent
// WriteCase calls on one r are safe.
func (sw *StreamWriter) WriteCase(r *Result, i int) error {
	if i < 0 || i >= r.CaseLines() {
		return NewErr(CodeInvalidSampleResults, "case line "+strconv.Itoa(i))
	}
	var c CaseResult
	if r.Cases != nil {
		c = r.Cases[i]
		c.Samples = nil
	} else {
		// A dropped-samples run: each case's line is built from its
		// compact aggregate only now, one at a time.
		c = r.summary.caseResult(&r.summary.cases[i])
	}
	return sw.writeLine(&struct {
		Type      string      `json:"type"`
		CaseIndex int         `json:"case_index"`
		Case      *CaseResult `json:"case"`
	}{streamTypeCase, i, &c}, false)
}

// WriteSummaryLine appends r's summary line, the stream's last, and
// writes everything out.
func (sw *StreamWriter) WriteSummaryLine(r *Result) error {
	sum := *r
	sum.Cases = nil
	type plain Result
	return sw.writeLine(&struct {
		Type   string `json:"type"`
		Result *plain `json:"result"`
	}{streamTypeSummary, (*plain)(&sum)}, true)
}

// Flush writes out every pending line.
func (sw *StreamWriter) Flush() error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return sw.err
	}
	if sw.w != nil {
		sw.err = sw.w.Flush()
	}
	sw.lastFlush = time.Now()
	return sw.err
}

// Written is the stream's size in bytes so far, pending lines included.
func (sw *StreamWriter) Written() int64 {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.written
}

func (sw *StreamWriter) writeLine(v any, flush bool) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return sw.err
	}
	sw.line.Reset()
	if err := lineEncoder(&sw.lineEnc, &sw.line).Encode(v); err != nil { // Encode ends the line with '\n'
		return err
	}
	line := sw.line.Bytes()
	if sw.filter != nil {
		line = sw.filter(line)
	}
	n := int64(len(line))
	if n > MaxStreamLineBytes {
		return ReasonErr(CodeInvalidEvalStream, "line_too_large", strconv.FormatInt(n, 10))
	}
	if sw.maxBytes > 0 && sw.written+n > sw.maxBytes {
		// Keep what is there whole: no partial line is ever written.
		if sw.w != nil {
			if err := sw.w.Flush(); err != nil {
				sw.err = err
				return err
			}
		}
		sw.err = ErrStreamFull
		return sw.err
	}
	if sw.mem != nil {
		sw.mem.Write(line)
		sw.written += n
		return nil
	}
	if _, err := sw.w.Write(line); err != nil {
		sw.err = err
		return err
	}
	sw.written += n
	if flush || sw.w.Buffered() >= streamBufferBytes/2 || time.Since(sw.lastFlush) >= streamFlushInterval {
		if err := sw.w.Flush(); err != nil {
			sw.err = err
			return err
		}
		sw.lastFlush = time.Now()
	}
	return nil
}

// lineEncoder returns *enc, a stream's line encoder into w, made at the
// first call: an Encoder keeps nothing of a line between Encode calls
// (only a write error, which a bytes.Buffer never returns).
func lineEncoder(enc **json.Encoder, w io.Writer) *json.Encoder {
	if *enc == nil {
		*enc = json.NewEncoder(w)
		(*enc).SetEscapeHTML(false)
	}
	return *enc
}

// StreamSample is one decoded sample line.
type StreamSample struct {
	CaseIndex int
	Sample    SampleResult
}

// Stream is a decoded sample stream.
type Stream struct {
	Header  StreamHeader
	Samples []StreamSample // in file order, each (case, sample) at most once
	// Summary is the summary line's result (samples nil), if present.
	Summary *Result
	// Truncated is set when the last line had no newline (a writer that
	// died mid-line); that line is ignored.
	Truncated bool
	// Size is the byte length of the whole lines read.
	Size int64
}

// ReadStream decodes a stream strictly: the header first, every line
// bounded and of a known type, samples in range with their deterministic
// ids and their derived fields (status, passed) consistent, no sample
// twice, nothing after the summary. It never trusts a line beyond that:
// StreamToResult re-aggregates the samples and compares the summary.
func ReadStream(r io.Reader) (*Stream, error) {
	br := bufio.NewReaderSize(r, streamBufferBytes)
	st := &Stream{}
	bad := func(line int, reason string) error {
		return ReasonErr(CodeInvalidEvalStream, reason, "line "+strconv.Itoa(line))
	}
	lim := jsonlimit.OwnDocumentLimits()
	lim.MaxBytes = MaxStreamLineBytes
	var seen map[[2]int]bool
	var cases []CaseResult
	for n := 1; ; n++ {
		line, err := readLine(br)
		if err == io.EOF {
			if len(line) > 0 {
				st.Truncated = true
			}
			break
		}
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				return nil, bad(n, "line_too_large")
			}
			return nil, &Error{Code: CodeInvalidEvalStream, Reason: "read_failed", Err: err}
		}
		st.Size += int64(len(line)) + 1
		if st.Summary != nil {
			return nil, bad(n, "line_after_summary")
		}
		if cases != nil && !bytes.HasPrefix(line, []byte(`{"type":"case"`)) && !bytes.HasPrefix(line, []byte(`{"type":"summary"`)) {
			return nil, bad(n, "sample_after_cases")
		}
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &head) != nil {
			return nil, bad(n, "invalid_json")
		}
		if n == 1 {
			if head.Type != streamTypeHeader {
				return nil, bad(n, "missing_header")
			}
			if err := jsonlimit.Unmarshal(line, lim, &st.Header); err != nil {
				return nil, bad(n, "invalid_header")
			}
			h := &st.Header
			if h.Format != StreamFormat || h.Version != StreamVersion {
				return nil, bad(n, "unsupported_stream_version")
			}
			if h.EvalSetID == "" || h.EvalSetVersion == "" || h.CaseCount < 0 || h.SampleCount < 1 || h.SampleCount > MaxSamplesPerCase {
				return nil, bad(n, "invalid_header")
			}
			seen = make(map[[2]int]bool)
			continue
		}
		switch head.Type {
		case streamTypeSample:
			var s streamSample
			if err := jsonlimit.Unmarshal(line, lim, &s); err != nil || s.Sample == nil {
				return nil, bad(n, "invalid_sample")
			}
			if err := st.checkSample(s.CaseIndex, s.Sample); err != nil {
				return nil, bad(n, err.Error())
			}
			key := [2]int{s.CaseIndex, s.Sample.SampleIndex}
			if seen[key] {
				return nil, bad(n, "duplicate_sample")
			}
			seen[key] = true
			st.Samples = append(st.Samples, StreamSample{CaseIndex: s.CaseIndex, Sample: *s.Sample})
		case streamTypeCase:
			var c struct {
				Type      string      `json:"type"`
				CaseIndex int         `json:"case_index"`
				Case      *CaseResult `json:"case"`
			}
			if err := jsonlimit.Unmarshal(line, lim, &c); err != nil || c.Case == nil || c.Case.Samples != nil {
				return nil, bad(n, "invalid_case")
			}
			if c.CaseIndex != len(cases) || c.CaseIndex >= st.Header.CaseCount {
				return nil, bad(n, "case_out_of_order")
			}
			cases = append(cases, *c.Case)
		case streamTypeSummary:
			var s streamSummary
			if err := jsonlimit.Unmarshal(line, lim, &s); err != nil || s.Result == nil || s.Result.Cases != nil {
				return nil, bad(n, "invalid_summary")
			}
			if len(cases) != st.Header.CaseCount {
				return nil, bad(n, "missing_cases")
			}
			s.Result.Cases = cases
			if cases == nil {
				s.Result.Cases = []CaseResult{}
			}
			st.Summary = s.Result
		default:
			return nil, bad(n, "unknown_line_type")
		}
	}
	if seen == nil {
		return nil, bad(1, "missing_header")
	}
	return st, nil
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its '\n', bounded; io.EOF with
// the partial tail when the input ends without one.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > MaxStreamLineBytes+1 {
			return nil, errLineTooLong
		}
		switch err {
		case nil:
			if buf == nil {
				return frag[:len(frag)-1], nil
			}
			buf = append(buf, frag...)
			return buf[:len(buf)-1], nil
		case bufio.ErrBufferFull:
			buf = append(buf, frag...)
		default:
			buf = append(buf, frag...)
			return buf, err
		}
	}
}

// checkSample checks a sample line against the header: index range, the
// deterministic sample id, and its derived status.
func (st *Stream) checkSample(ci int, s *SampleResult) error {
	return checkStreamSample(&st.Header, ci, s)
}

// checkStreamSample is checkSample against header h.
func checkStreamSample(h *StreamHeader, ci int, s *SampleResult) error {
	if ci < 0 || ci >= h.CaseCount || s.SampleIndex < 0 || s.SampleIndex >= h.SampleCount {
		return errors.New("sample_out_of_range")
	}
	if s.CaseID == "" || s.SampleID != SampleID(h.EvalSetID, h.EvalSetVersion, s.CaseID, s.SampleIndex) {
		return errors.New("sample_identity")
	}
	status, passed := s.Status, s.Passed
	if s.Turns == nil || s.Trajectory == nil || s.Criteria == nil || s.Metadata == nil {
		return errors.New("invalid_sample")
	}
	if s.Error != "" && status != SampleStatusError || s.Error == "" && status == SampleStatusError {
		return errors.New("sample_status")
	}
	c := *s
	finishSample(&c)
	if c.Status != status || c.Passed != passed {
		return errors.New("sample_status")
	}
	return nil
}

// StreamToResult rebuilds the full result document from a complete
// stream (every sample and the summary): the samples are aggregated again
// and must give the summary exactly, else invalid_eval_stream
// (inconsistent). The result is held in memory whole.
func StreamToResult(st *Stream) (*Result, error) {
	if st.Summary == nil {
		return nil, ReasonErr(CodeInvalidEvalStream, "incomplete", "no summary")
	}
	sum := st.Summary
	h := &st.Header
	if sum.EvalSetID != h.EvalSetID || sum.EvalSetVersion != h.EvalSetVersion || len(sum.Cases) != h.CaseCount || sum.SampleCount != h.SampleCount {
		return nil, ReasonErr(CodeInvalidEvalStream, "summary_mismatch", "")
	}
	if len(st.Samples) != h.CaseCount*h.SampleCount {
		return nil, ReasonErr(CodeInvalidEvalStream, "incomplete", strconv.Itoa(len(st.Samples))+" of "+strconv.Itoa(h.CaseCount*h.SampleCount)+" samples")
	}
	byCase := make([][]SampleResult, h.CaseCount)
	for i := range byCase {
		byCase[i] = make([]SampleResult, h.SampleCount)
	}
	for _, s := range st.Samples {
		byCase[s.CaseIndex][s.Sample.SampleIndex] = s.Sample
	}
	full := *sum
	full.Cases = make([]CaseResult, len(sum.Cases))
	for ci := range sum.Cases {
		full.Cases[ci] = sum.Cases[ci]
		full.Cases[ci].Samples = byCase[ci]
		for si := range byCase[ci] {
			if byCase[ci][si].CaseID != sum.Cases[ci].CaseID {
				return nil, ReasonErr(CodeInvalidEvalStream, "sample_identity", sum.Cases[ci].CaseID)
			}
		}
	}
	if err := verifyStreamResult(&full); err != nil {
		return nil, err
	}
	return full.markChecked(), nil
}

// verifyStreamResult is DecodeResult's recomputation without the 16 MiB
// document bound: the generic form of the result's own encoding is what
// verifyResult compares against.
func verifyStreamResult(r *Result) error {
	type plain Result
	enc, err := json.Marshal((*plain)(r))
	if err != nil {
		return ReasonErr(CodeInvalidEvalStream, "not_json", "")
	}
	dec := json.NewDecoder(bytes.NewReader(enc))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return ReasonErr(CodeInvalidEvalStream, "not_json", "")
	}
	if err := verifyResultN(r, doc, len(r.Cases)); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return &Error{Code: CodeInvalidEvalStream, Reason: e.Reason, Detail: e.Detail, Err: err}
		}
		return err
	}
	return nil
}

// StreamResult renders a whole result as a stream, samples in case order.
func StreamResult(r *Result, digests map[string]string) ([]byte, error) {
	if digests == nil {
		digests = map[string]string{}
	}
	var buf bytes.Buffer
	h := StreamHeader{Type: streamTypeHeader, Format: StreamFormat, Version: StreamVersion,
		EvalSetID: r.EvalSetID, EvalSetVersion: r.EvalSetVersion, CaseCount: len(r.Cases), SampleCount: r.SampleCount,
		Digests: digests}
	sw, err := NewStreamWriter(&buf, &h, 0, 0)
	if err != nil {
		return nil, err
	}
	for ci := range r.Cases {
		for si := range r.Cases[ci].Samples {
			if err := sw.WriteSample(ci, &r.Cases[ci].Samples[si]); err != nil {
				return nil, err
			}
		}
	}
	if err := sw.WriteSummary(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
