package main

import (
	"bytes"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/evalengine"
)

// Results over one document (issue 19). A local `adk eval run` in any
// format but jsonl keeps its samples in memory and renders one document
// at the end, bounded by --max-report-bytes (16 MiB). When the result
// would pass that bound, the run does not fail: it goes on as a streamed
// run, and the report is rendered from the stream. Decisions:
//
//   - The switch happens where the engine's report budget runs out
//     (eval_report_budget_exceeded, or eval_report_too_large at the end):
//     the samples finished so far are handed to a drop-samples run as
//     finished ones (evalengine.RunConfig.Finished), so no sample runs
//     twice, and from then on memory holds case aggregates only. A set
//     whose cases alone are over the budget (evalengine.ResultFixedBytes)
//     streams from the start. A run that fits is untouched: same path,
//     same bytes.
//   - The stream is the resume journal when the run keeps one (--output
//     FILE), else a temporary file, removed at the end. Its lines are
//     scrubbed of the inputs' secrets, and so is the report rendered from
//     it (scrubWriter: the same replacements as scrubReport, on a stream).
//   - markdown, junit, sarif and annotations are rendered case by case
//     from the stream (evalengine.RenderStream; annotations keeps its
//     contract's 10,000-case cap); html is one page of at most
//     --max-report-bytes, failed cases first. With --output FILE the
//     stream is kept beside it as FILE.jsonl (every case, for adk eval
//     report); stderr says so.
//   - json is one document by contract and cannot pass its bound: the
//     run writes the stream itself (the jsonl format) where the json
//     would have gone, and stderr says so and how to render it.
//   - With --baseline the comparison is made from the stream's case lines
//     (evalbaseline.go): memory O(cases), no sample; json and markdown
//     are then the comparison document, as in a run that fits.

// spillRef is a sample the first, in-memory run finished: the engine's
// own slot, which stays put until the engine returns.
type spillRef struct {
	ci int
	s  *evalengine.SampleResult
}

// evalSpill is a local run's way past one document's bound.
type evalSpill struct {
	refs []spillRef // what the in-memory run finished
	// From the switch on: the stream the samples go to.
	active  bool
	path    string
	temp    bool         // path is this run's temporary file
	journal *evalJournal // the stream is the journal (nil: file and sw)
	file    *os.File
	sw      *evalengine.StreamWriter
	werr    error // the first failed write to the temporary stream
}

// onSample wraps the run's OnSample to remember what it finished.
func (sp *evalSpill) onSample(next func(int, *evalengine.SampleResult)) func(int, *evalengine.SampleResult) {
	return func(ci int, s *evalengine.SampleResult) {
		sp.refs = append(sp.refs, spillRef{ci, s})
		if next != nil {
			next(ci, s)
		}
	}
}

// overBudget says whether err is the engine's refusal of one document.
func overBudget(err error) bool {
	switch evalengine.ErrorCode(err) {
	case evalengine.CodeReportBudgetExceeded, evalengine.CodeReportTooLarge:
		return true
	}
	return false
}

// start opens the stream and returns the config of the streamed run that
// continues rc: what rc had finished (a resumed journal's samples) and
// what the in-memory run finished are its finished samples.
func (sp *evalSpill) start(rc evalengine.RunConfig, j *evalJournal, set *evalengine.Set, samples int, digests map[string]string, secrets []string, elapsed time.Duration) (evalengine.RunConfig, error) {
	finished := make([]evalengine.StreamSample, 0, len(rc.Finished)+len(sp.refs))
	finished = append(finished, rc.Finished...)
	for _, r := range sp.refs {
		finished = append(finished, evalengine.StreamSample{CaseIndex: r.ci, Sample: *r.s})
	}
	sp.refs = nil
	sp.active = true
	if j != nil && j.sw != nil && !j.complete && !j.hasFailed() {
		// The journal already holds every finished sample.
		sp.journal, sp.path = j, j.path
		rc.OnSample = j.record
	} else {
		f, err := os.CreateTemp("", "adk-eval-*.jsonl")
		if err != nil {
			return rc, writeFailed(err)
		}
		sp.file, sp.path, sp.temp = f, f.Name(), true
		h := evalengine.NewStreamHeader(set, samples, digests)
		if sp.sw, err = evalengine.NewStreamWriter(f, &h, 0, 0); err != nil {
			return rc, &cliError{Code: codeReportWriteFailed, Reason: "stream", Err: err}
		}
		if len(secrets) > 0 {
			sp.sw.SetLineFilter(func(b []byte) []byte { return scrubReport(b, secrets) })
		}
		for i := range finished {
			sp.write(finished[i].CaseIndex, &finished[i].Sample)
		}
		rc.OnSample = sp.write
	}
	rc.Finished = finished
	rc.DropSamples = true
	// The run's deadline is the whole run's: what the first part used is
	// gone.
	rc.Options.TimeoutMS = max(1, rc.Options.TimeoutMS-int(elapsed.Milliseconds()))
	return rc, nil
}

func (sp *evalSpill) write(ci int, s *evalengine.SampleResult) {
	if sp.werr == nil {
		sp.werr = sp.sw.WriteSample(ci, s)
	}
}

// complete appends the summary and closes the stream.
func (sp *evalSpill) complete(result *evalengine.Result) error {
	if j := sp.journal; j != nil {
		if err := j.sw.WriteSummary(result); err != nil {
			return &cliError{Code: codeReportWriteFailed, Reason: "journal", Detail: j.path + ": " + err.Error(), Err: err}
		}
		failed := j.hasFailed()
		j.close()
		if failed {
			return &cliError{Code: codeReportWriteFailed, Reason: "journal", Detail: j.path + " is missing samples (see the warning above)"}
		}
		return nil
	}
	err := sp.werr
	if err == nil {
		err = sp.sw.WriteSummary(result)
	}
	if err == nil {
		err = sp.sw.Flush()
	}
	if cerr := sp.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &cliError{Code: codeReportWriteFailed, Reason: "stream", Detail: sp.path + ": " + err.Error(), Err: err}
	}
	return nil
}

// discard removes a temporary stream.
func (sp *evalSpill) discard() {
	if sp != nil && sp.temp {
		if sp.file != nil {
			_ = sp.file.Close()
		}
		_ = os.Remove(sp.path)
	}
}

// report completes the stream and renders the result from it (with the
// baseline comparison, if any: streamedRun.report).
func (sp *evalSpill) report(cmd *cobra.Command, f *evalRunFlags, result *evalengine.Result, opts evalengine.Options, baseline *evalengine.CompareSide, cmpOpts evalengine.CompareOptions, secrets []string) error {
	defer sp.discard()
	if err := sp.complete(result); err != nil {
		return err
	}
	sr := &streamedRun{path: sp.path, passed: result.Passed, kept: func(dst string) {
		sp.path, sp.temp = dst, false
		if sp.journal != nil {
			sp.journal.path, sp.journal.complete = dst, true
		}
	}}
	return sr.report(cmd, f, opts.MaxReportBytes, baseline, cmpOpts, secrets)
}

// htmlPageNote is what stderr adds for html: the page shows part.
func htmlPageNote(format string) string {
	if format == evalengine.FormatHTML {
		return " (html: one page, failed cases first; its note says how many it shows)"
	}
	return ""
}

// renderStreamFunc renders sf in format through the secret scrub, with
// the error codes of adk eval report.
func renderStreamFunc(sf *evalengine.StreamFile, cmp *evalengine.Comparison, format string, eo evalengine.ExportOptions, secrets []string) func(io.Writer) error {
	return func(w io.Writer) error {
		sw := newScrubWriter(w, secrets)
		err := evalengine.RenderStreamCompared(sw, sf, cmp, format, eo)
		if err == nil {
			return sw.Close()
		}
		switch evalengine.ErrorCode(err) {
		case evalengine.CodeInvalidEvalStream:
			return engineError(codeInvalidEvalReportInput, err)
		case "":
			return err // the output failed
		}
		return engineError(codeReportRenderFailed, err)
	}
}

// renderOverBound renders a result that fits one document but whose
// report in format does not (export_byte_limit_exceeded): from its
// jsonl form in memory, case by case, html as one bounded page.
func renderOverBound(cmd *cobra.Command, output string, r *evalengine.Result, cmp *evalengine.Comparison, format string, eo evalengine.ExportOptions, secrets []string) error {
	data, err := evalengine.Render(r, evalengine.FormatJSONL, evalengine.ExportOptions{StreamDigests: eo.StreamDigests})
	if err != nil {
		return engineError(codeReportRenderFailed, err)
	}
	sf, err := evalengine.OpenStreamFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return engineError(codeReportRenderFailed, err)
	}
	return emitStreamed(cmd, output, renderStreamFunc(sf, cmp, format, eo, secrets))
}

// scrubWriter is scrubReport on a stream: for each secret in order, its
// HTML-escaped spelling and then itself become [REDACTED], as chained
// writers. Each holds back the bytes that may start a match, so a secret
// split across writes is still caught; the output is the same bytes
// scrubReport gives on the whole.
type scrubWriter struct {
	w       io.Writer
	closers []*replaceWriter
}

func newScrubWriter(w io.Writer, secrets []string) *scrubWriter {
	sw := &scrubWriter{w: w}
	// Built from the last replacement to the first, so writes pass
	// through them in scrubReport's order.
	var olds []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		if e := htmlText(s); e != s {
			olds = append(olds, e)
		}
		olds = append(olds, s)
	}
	for i := len(olds) - 1; i >= 0; i-- {
		rw := &replaceWriter{w: sw.w, old: []byte(olds[i])}
		sw.w = rw
		sw.closers = append([]*replaceWriter{rw}, sw.closers...)
	}
	return sw
}

func (sw *scrubWriter) Write(p []byte) (int, error) { return sw.w.Write(p) }

// Close writes out what the replacements held back, first to last.
func (sw *scrubWriter) Close() error {
	for _, rw := range sw.closers {
		if err := rw.flush(); err != nil {
			return err
		}
	}
	return nil
}

var redacted = []byte("[REDACTED]")

// replaceWriter replaces every non-overlapping occurrence of old, left to
// right (bytes.ReplaceAll), in what passes through it.
type replaceWriter struct {
	w   io.Writer
	old []byte
	buf []byte
}

func (r *replaceWriter) Write(p []byte) (int, error) {
	r.buf = append(r.buf, p...)
	out := r.buf
	var err error
	emit := func(b []byte) {
		if err == nil && len(b) > 0 {
			_, err = r.w.Write(b)
		}
	}
	for {
		i := bytes.Index(out, r.old)
		if i < 0 {
			break
		}
		emit(out[:i])
		emit(redacted)
		out = out[i+len(r.old):]
	}
	// A match can only start in the last len(old)-1 bytes.
	keep := min(len(out), len(r.old)-1)
	emit(out[:len(out)-keep])
	n := copy(r.buf, out[len(out)-keep:])
	r.buf = r.buf[:n]
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (r *replaceWriter) flush() error {
	if len(r.buf) == 0 {
		return nil
	}
	_, err := r.w.Write(r.buf)
	r.buf = r.buf[:0]
	return err
}
