package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
)

// writeClusterStream writes a completed cluster job's result to w as the
// JSON Lines stream a local `--format jsonl` run writes. A job whose
// result is kept as records comes page by page, of any size; a job
// completed as one document (by an earlier build) is converted from it.
func writeClusterStream(ctx context.Context, cl *client.Client, scope, jobID string, w io.Writer) error {
	_, err := cl.ResultStream(ctx, scope, jobID, w, 0)
	if err == nil || api.AsError(err).Code != api.CodeInvalidRequest {
		return serviceError(err)
	}
	// Refused on its first page, before anything was written.
	data, err := cl.Result(ctx, scope, jobID)
	if err != nil {
		return serviceError(err)
	}
	r, err := evalengine.DecodeResult(data)
	if err != nil {
		return engineError(codeInvalidEvalReportInput, err)
	}
	out, err := evalengine.Render(r, evalengine.FormatJSONL, evalengine.ExportOptions{})
	if err != nil {
		return engineError(codeReportRenderFailed, err)
	}
	_, err = w.Write(out)
	return err
}

// lastLine keeps the last line written through it.
type lastLine struct {
	w    io.Writer
	last []byte
}

func (l *lastLine) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if i := bytes.LastIndexByte(bytes.TrimRight(p[:n], "\n"), '\n'); i >= 0 {
		l.last = append(l.last[:0], p[i+1:n]...)
	} else {
		l.last = append(l.last, p[:n]...)
	}
	return n, err
}

// streamClusterResult writes job's result stream to output (or stdout) and
// reports whether the run passed, from the stream's summary line.
func streamClusterResult(ctx context.Context, cmd *cobra.Command, cl *client.Client, scope, jobID, output string) (bool, error) {
	var last *lastLine
	err := emitStreamed(cmd, output, func(w io.Writer) error {
		last = &lastLine{w: w}
		return writeClusterStream(ctx, cl, scope, jobID, last)
	})
	if err != nil {
		return false, err
	}
	var sum struct {
		Type   string `json:"type"`
		Result struct {
			Passed bool `json:"passed"`
		} `json:"result"`
	}
	if json.Unmarshal(last.last, &sum) != nil || sum.Type != "summary" {
		return false, &cliError{Code: codeInvalidEvalReportInput, Reason: "stream", Detail: "job " + jobID + ": the stream does not end with its summary"}
	}
	return sum.Result.Passed, nil
}

// reportClusterStream renders a cluster job's result as markdown, junit or
// sarif through the streaming renderer: the stream is fetched page by
// page into a temporary file, which `adk eval report FILE` then renders
// case by case, so no size is too large.
func reportClusterStream(cmd *cobra.Command, cf *clusterFlags, jobID, format, output, suite string, maxBytes int) error {
	cl, done, err := cf.client()
	if err != nil {
		return err
	}
	defer done()
	f, err := os.CreateTemp("", "adk-result-*.jsonl")
	if err != nil {
		return writeFailed(err)
	}
	defer os.Remove(f.Name())
	err = writeClusterStream(cmd.Context(), cl, cf.scope, jobID, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = writeFailed(cerr)
	}
	if err != nil {
		var ce *cliError
		if errors.As(err, &ce) {
			return err
		}
		return writeFailed(err)
	}
	return reportStream(cmd, f.Name(), format, output, suite, maxBytes)
}
