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
	return summaryPassed(jobID, last.last)
}

// summaryPassed is the verdict of a stream's summary line.
func summaryPassed(jobID string, line []byte) (bool, error) {
	var sum struct {
		Type   string `json:"type"`
		Result struct {
			Passed bool `json:"passed"`
		} `json:"result"`
	}
	if json.Unmarshal(line, &sum) != nil || sum.Type != "summary" {
		return false, &cliError{Code: codeInvalidEvalReportInput, Reason: "stream", Detail: "job " + jobID + ": the stream does not end with its summary"}
	}
	return sum.Result.Passed, nil
}

// resultOverBound says whether a completed job's result is over one
// document of maxBytes: the coordinator's answer to a one-byte page says
// the document's size without sending it, or that it is over the
// coordinator's own 16 MiB bound.
func resultOverBound(ctx context.Context, cl *client.Client, scope, jobID string, maxBytes int) (bool, error) {
	rep, err := cl.Call(ctx, api.OpResult, &api.Request{Scope: scope, JobID: jobID, MaxBytes: 1})
	if err != nil {
		if api.AsError(err).Code == evalengine.CodeReportTooLarge {
			return true, nil
		}
		return false, serviceError(err)
	}
	return rep.ResultSize > int64(maxBytes), nil
}

// fetchClusterStream fetches a completed job's result stream, page by
// page, into a temporary file in dir ("": the system's), the caller's to
// discard, and reads its verdict from the summary.
func fetchClusterStream(ctx context.Context, cl *client.Client, scope, jobID, dir string) (*streamedRun, error) {
	f, err := os.CreateTemp(dir, ".adk-result-*.jsonl")
	if err != nil {
		return nil, writeFailed(err)
	}
	sr := &streamedRun{path: f.Name(), temp: true}
	last := &lastLine{w: f}
	err = writeClusterStream(ctx, cl, scope, jobID, last)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = writeFailed(cerr)
	}
	if err == nil {
		sr.passed, err = summaryPassed(jobID, last.last)
	}
	if err != nil {
		sr.discard()
		var ce *cliError
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, writeFailed(err)
	}
	return sr, nil
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
	sr, err := fetchClusterStream(cmd.Context(), cl, cf.scope, jobID, "")
	if err != nil {
		return err
	}
	defer sr.discard()
	return reportStream(cmd, sr.path, format, output, suite, maxBytes)
}
