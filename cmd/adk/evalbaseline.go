package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/evalengine"
)

// Baselines and results of any size (issue 19). A comparison reads of
// each side its summary and, per case, its id, status, verdict and a
// trajectory digest (evalengine.CompareSide), so either side may be a
// result document (at most 16 MiB) or a JSON Lines result of any size,
// read once, case line by case line, keeping no sample and no sample
// index (evalengine.ReadStreamSide): memory is O(cases) small records.
// `adk eval run --baseline`, `adk eval compare` and a run whose own
// result streams past one document (evalspill.go, a cluster job's past
// the bound) all compare this way, and the comparison is the same
// document for the same results.

// loadSide reads a saved result as one side of a comparison: a JSON Lines
// result (its header line says so) of any size, or a result document.
// name is the flag or argument it came from (baseline, current); wrap is
// the code a bad input is reported under.
func loadSide(name, path, wrap string) (*evalengine.CompareSide, error) {
	if isStreamFile(path) {
		return streamSideOf(name, path, wrap)
	}
	var r *evalengine.Result
	var err error
	if wrap == codeInvalidBaseline {
		r, err = loadBaseline(path)
	} else {
		r, err = loadResult(name, path, wrap)
	}
	if err != nil {
		return nil, err
	}
	s, err := evalengine.ResultSide(r)
	if err != nil {
		return nil, engineError(wrap, err)
	}
	return s, nil
}

// streamSideOf reads a JSON Lines result file as a comparison side: one
// pass that checks it and keeps the side, never a sample's position.
func streamSideOf(name, path, wrap string) (*evalengine.CompareSide, error) {
	f, err := openRegularStream(name, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := evalengine.ReadStreamSide(f)
	if err != nil {
		return nil, sideError(wrap, path, err)
	}
	return s, nil
}

// openRegularStream opens a JSON Lines result file, which must be a
// regular file (it is read to its end).
func openRegularStream(name, path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unreadable(name, path, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, unreadable(name, path, err)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, &cliError{Code: codeFileUnreadable, Reason: name, Detail: path + ": a jsonl result must be a regular file"}
	}
	return f, nil
}

// sideError is a bad comparison input: {wrap, engine code: reason} naming
// the file.
func sideError(wrap, path string, err error) error {
	reason := evalengine.ErrorCode(err)
	if r := evalengine.ErrorReason(err); r != "" {
		reason += ": " + r
	}
	detail := path
	var ee *evalengine.Error
	if errors.As(err, &ee) && ee.Detail != "" {
		detail += ": " + ee.Detail
	}
	return &cliError{Code: wrap, Reason: reason, Detail: detail, Err: err}
}

// streamedRun is a run's result past one document: its complete JSON
// Lines stream in a file. A local run's spill (evalspill.go) and a
// cluster job's stream (clusterRunner) end here.
type streamedRun struct {
	path string
	// temp says path is this run's temporary file, removed at the end
	// unless it was kept as FILE.jsonl.
	temp bool
	// passed is the result's own verdict (its summary's).
	passed bool
	// kept, when set, is told the stream's new path once it is kept
	// beside --output.
	kept func(dst string)
}

// discard removes a temporary stream.
func (sr *streamedRun) discard() {
	if sr.temp {
		_ = os.Remove(sr.path)
	}
}

// report renders the streamed result in f.format to --output and stdout,
// with the comparison against baseline (nil: none), and gives the
// verdict: the result's own ANDed with the comparison's. Decisions:
//
//   - markdown, junit, sarif, annotations and html are rendered from the
//     stream case by case (html: one page of at most bound bytes, with
//     the comparison on it as in a run that fits, its rows paged,
//     regressions first, when they do not all fit); with --output FILE
//     the stream is kept as FILE.jsonl.
//   - json (without a baseline) and jsonl are the stream itself: a JSON
//     document cannot hold it.
//   - With a baseline, json and markdown are the comparison document, as
//     in a run that fits; its current side is read from the stream's case
//     lines (O(cases) memory), never from the samples. The document is
//     written a case row at a time (emitComparison), whole even past the
//     bound.
func (sr *streamedRun) report(cmd *cobra.Command, f *evalRunFlags, bound int, baseline *evalengine.CompareSide, cmpOpts evalengine.CompareOptions, secrets []string) error {
	defer sr.discard()
	stderr := cmd.ErrOrStderr()
	toFile := f.output != "" && f.output != "-"
	passed := sr.passed
	isStream := f.format == evalengine.FormatJSONL || (f.format == evalengine.FormatJSON && baseline == nil)
	kept := ""
	if toFile && !isStream {
		// Every case stays readable beside the report (html shows a page).
		dst := f.output + ".jsonl"
		if err := os.Rename(sr.path, dst); err == nil {
			sr.path, sr.temp, kept = dst, false, dst
			if sr.kept != nil {
				sr.kept(dst)
			}
		}
	}
	var sf *evalengine.StreamFile
	var cmp *evalengine.Comparison
	// json and markdown with a baseline are the comparison alone, and
	// jsonl is the stream: no report reads a sample back, so the current
	// side is read without a sample index.
	sideOnly := isStream || f.format == evalengine.FormatJSON || f.format == evalengine.FormatMarkdown
	if !isStream || baseline != nil {
		in, err := os.Open(sr.path)
		if err != nil {
			return unreadable("stream", sr.path, err)
		}
		defer in.Close()
		var cur *evalengine.CompareSide
		if baseline != nil && sideOnly {
			if cur, err = evalengine.ReadStreamSide(in); err != nil {
				return engineError(codeReportRenderFailed, err)
			}
		} else {
			info, err := in.Stat()
			if err != nil {
				return unreadable("stream", sr.path, err)
			}
			if sf, err = evalengine.OpenStreamFile(in, info.Size()); err != nil {
				return engineError(codeReportRenderFailed, err)
			}
			if baseline != nil {
				if cur, err = evalengine.StreamSide(sf); err != nil {
					return engineError(codeReportRenderFailed, err)
				}
			}
		}
		if baseline != nil {
			if cmp, err = evalengine.CompareSides(baseline, cur, cmpOpts); err != nil {
				return engineError(codeComparisonFailed, err)
			}
			passed = passed && cmp.Passed
		}
	}
	verdict := func() error {
		if !passed {
			return &exitCodeError{Code: exitFailed}
		}
		return nil
	}
	note := "not kept (run with --output FILE to keep it)"
	if kept != "" {
		note = "kept as " + kept + " (adk eval report " + kept + " --format ...)"
	}
	switch {
	case isStream:
		err := emitStreamed(cmd, f.output, func(w io.Writer) error {
			in, err := os.Open(sr.path)
			if err != nil {
				return err
			}
			defer in.Close()
			_, err = io.Copy(w, in)
			return err
		})
		if err != nil {
			return err
		}
		if f.format == evalengine.FormatJSON {
			where := "stdout holds"
			if toFile {
				where = f.output + " holds"
			}
			fmt.Fprintf(stderr, "adk: the result is over one %d-byte JSON document: %s it as JSON Lines (--format jsonl: a header, one line per sample, one per case, the summary); render it with adk eval report FILE --format markdown|junit|sarif|annotations|html\n", bound, where)
		}
		return verdict()
	case cmp != nil && (f.format == evalengine.FormatJSON || f.format == evalengine.FormatMarkdown):
		eo := evalengine.ExportOptions{SuiteName: f.suiteName, MaxBytes: bound}
		err := emitComparison(cmd, f.output, bound, codeReportRenderFailed, secrets, func(w io.Writer) (int64, error) {
			return evalengine.WriteComparison(w, cmp, f.format, eo)
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "adk: the result is over one %d-byte document: the baseline comparison was made from its JSON Lines stream's case lines; the stream was %s\n", bound, note)
		return verdict()
	}
	eo := evalengine.ExportOptions{SuiteName: f.suiteName, MaxBytes: bound}
	if err := emitStreamed(cmd, f.output, renderStreamFunc(sf, cmp, f.format, eo, secrets)); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "adk: the result is over one %d-byte document: the %s report was rendered case by case from its JSON Lines stream%s; the stream was %s\n", bound, f.format, htmlPageNote(f.format), note)
	return verdict()
}

// emitComparison writes a comparison's json or markdown report (write,
// evalengine.WriteComparison or WriteCompareSidesReport) to output and
// stdout a case row at a time, through the secret scrub. A comparison has
// a row per baseline case, so at 100,000 cases with long ids it can pass
// one document's bound: it is then the same document, written whole
// (stderr says so), never export_byte_limit_exceeded; under the bound it
// is the bytes of the one document, as before. A bad comparison or
// option is {code, engine reason}.
func emitComparison(cmd *cobra.Command, output string, bound int, code string, secrets []string, write func(io.Writer) (int64, error)) error {
	if bound == 0 {
		bound = evalengine.MaxExportBytes
	}
	var n int64
	err := emitStreamed(cmd, output, func(w io.Writer) error {
		sw := newScrubWriter(w, secrets)
		var err error
		if n, err = write(sw); err != nil {
			if evalengine.ErrorCode(err) != "" {
				return engineError(code, err)
			}
			return err // the output failed
		}
		return sw.Close()
	})
	if err != nil {
		return err
	}
	if n > int64(bound) {
		fmt.Fprintf(cmd.ErrOrStderr(), "adk: the comparison is over one %d-byte document (%d bytes): it was written whole, a case row at a time\n", bound, n)
	}
	return nil
}
