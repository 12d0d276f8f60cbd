package main

import (
	"bytes"
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

// reportStream renders a jsonl result. markdown, junit and sarif are
// written case by case (evalengine.RenderStream): the stream is read once
// to check and index it, then case by case, so its size is not bounded by
// the 16 MiB of a result document. The other formats are single documents
// of the whole result: they render when the stream fits the document
// bound, and are refused naming the formats that stream otherwise.
func reportStream(cmd *cobra.Command, path, format, output, suite string) error {
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
	opts := evalengine.ExportOptions{SuiteName: suite}
	if !slices.Contains(evalengine.StreamFormats(), format) {
		if info.Size() > maxSetFileBytes {
			// The typed refusal names the format and the alternatives.
			return engineError("", evalengine.RenderStream(io.Discard, nil, format, opts))
		}
		st, err := evalengine.ReadStream(io.LimitReader(f, maxSetFileBytes+1))
		if err != nil {
			return engineError(codeInvalidEvalReportInput, err)
		}
		r, err := evalengine.StreamToResult(st)
		if err != nil {
			return engineError(codeInvalidEvalReportInput, err)
		}
		rendered, err := evalengine.Render(r, format, opts)
		if err != nil {
			return engineError(codeReportRenderFailed, err)
		}
		return emitReport(reportWriter(cmd, output), output, rendered)
	}
	sf, err := evalengine.OpenStreamFile(f, info.Size())
	if err != nil {
		return engineError(codeInvalidEvalReportInput, err)
	}
	render := func(w io.Writer) error {
		if err := evalengine.RenderStream(w, sf, format, opts); err != nil {
			switch evalengine.ErrorCode(err) {
			case evalengine.CodeInvalidEvalStream:
				return engineError(codeInvalidEvalReportInput, err)
			case "":
				return err // the output failed
			}
			return engineError(codeReportRenderFailed, err)
		}
		return nil
	}
	return emitStreamed(cmd, output, render)
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
