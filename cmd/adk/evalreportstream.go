package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/evalengine"
)

// isStreamFile says whether path starts like a sample stream (the jsonl
// result `adk eval run --format jsonl` writes): its header line.
func isStreamFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 32)
	n, _ := io.ReadFull(f, head)
	return bytes.HasPrefix(bytes.TrimLeft(head[:n], " \t\r\n"), []byte(`{"type":"header"`))
}

// caseByCaseFormats are the formats a jsonl result always renders in
// case by case: their bytes are the document renderer's at any size.
var caseByCaseFormats = []string{evalengine.FormatMarkdown, evalengine.FormatJUnit, evalengine.FormatSARIF}

// reportStream renders a jsonl result. markdown, junit and sarif are
// written case by case (evalengine.RenderStream): the stream is read once
// to check and index it, then case by case, so its size is not bounded by
// the 16 MiB of a result document. html, annotations and json render
// from the whole result, rebuilt and re-checked, when the stream fits
// maxBytes; past it, annotations is written case by case, html as one
// page of at most maxBytes (failed cases first), and json, a single
// document by contract, is the jsonl itself, with a line on stderr.
func reportStream(cmd *cobra.Command, path, format, output, suite string, maxBytes int) error {
	f, err := os.Open(path)
	if err != nil {
		return unreadable("result", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return unreadable("result", path, err)
	}
	if !info.Mode().IsRegular() {
		return &cliError{Code: codeFileUnreadable, Reason: "result", Detail: path + ": a jsonl result must be a regular file"}
	}
	opts := evalengine.ExportOptions{SuiteName: suite, MaxBytes: maxBytes}
	if !slices.Contains(caseByCaseFormats, format) && info.Size() <= int64(maxBytes) {
		st, err := evalengine.ReadStream(io.LimitReader(f, int64(maxBytes)+1))
		if err != nil {
			return engineError(codeInvalidEvalReportInput, err)
		}
		r, err := evalengine.StreamToResult(st)
		if err != nil {
			return engineError(codeInvalidEvalReportInput, err)
		}
		rendered, err := evalengine.Render(r, format, opts)
		if evalengine.ErrorCode(err) != evalengine.CodeExportByteLimitExceeded {
			if err != nil {
				return engineError(codeReportRenderFailed, err)
			}
			return emitReport(reportWriter(cmd, output), output, rendered)
		}
		// This report of it is over the bound: from the stream below.
	}
	sf, err := evalengine.OpenStreamFile(f, info.Size())
	if err != nil {
		return engineError(codeInvalidEvalReportInput, err)
	}
	if format == evalengine.FormatJSON || format == evalengine.FormatJSONL {
		// One JSON document cannot hold it: the checked stream is its
		// JSON form.
		err := emitStreamed(cmd, output, func(w io.Writer) error {
			_, err := io.Copy(w, io.NewSectionReader(f, 0, info.Size()))
			return err
		})
		if err == nil && format == evalengine.FormatJSON {
			fmt.Fprintf(cmd.ErrOrStderr(), "adk: the result is over one %d-byte JSON document: the output is its JSON Lines form (the jsonl format, as the input); render it with --format markdown|junit|sarif|annotations|html\n", maxBytes)
		}
		return err
	}
	if err := emitStreamed(cmd, output, renderStreamFunc(sf, nil, format, opts, nil)); err != nil {
		return err
	}
	if format == evalengine.FormatHTML || format == evalengine.FormatAnnotations {
		fmt.Fprintf(cmd.ErrOrStderr(), "adk: the result is over one %d-byte document: the %s report was rendered case by case%s\n", maxBytes, format, htmlPageNote(format))
	}
	return nil
}

// checkReportBytes checks --max-report-bytes of adk eval report.
func checkReportBytes(n int) error {
	if n < 1 || n > evalengine.MaxExportBytes {
		return &cliError{Code: codeInvalidPositiveInt, Reason: "max_report_bytes", Detail: fmt.Sprintf("--max-report-bytes wants an integer 1..%d, got %d", evalengine.MaxExportBytes, n)}
	}
	return nil
}

// cliCode is the code of a CLI error ("" for any other).
func cliCode(err error) string {
	var ce *cliError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

// emitStreamed writes a streamed report (render) to output, or stdout.
func emitStreamed(cmd *cobra.Command, output string, render func(io.Writer) error) error {
	stdout := reportWriter(cmd, output)
	if output == "" || output == "-" {
		if err := render(stdout); err != nil {
			if _, ok := err.(*cliError); ok {
				return err
			}
			return &cliError{Code: codeReportWriteFailed, Reason: "stdout", Err: err}
		}
		return nil
	}
	// The file is written first, then copied to stdout from the file, so
	// stdout and the file hold the same bytes and stdout gets nothing when
	// the file fails.
	return writeAtomicFunc(output, render, func(tmp *os.File) error {
		if stdout == io.Discard {
			return nil
		}
		if _, err := io.Copy(stdout, tmp); err != nil {
			return &cliError{Code: codeReportWriteFailed, Reason: "stdout", Err: err}
		}
		return nil
	})
}
