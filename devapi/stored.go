package devapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/iocount"
)

// PathStats is the statistics route: `adk eval stats` over stored jobs.
const PathStats = "/dev/v1/evaluation/stats"

// Bounds of the statistics route: the job ids one call may name, and the
// stored result bytes it may read for them (each result is at most
// 16 MiB; the sum keeps one call's memory bounded).
const (
	MaxStatsJobs        = 100
	MaxStatsResultBytes = 64 << 20
)

// compareSide resolves one side of a comparison to what the comparison
// reads of it (evalengine.CompareSide): the inline document, or exactly
// one reference (a job id or a baseline name) to a stored result of the
// call's scope, read by storedSide.
func (s *Server) compareSide(c *call, field string, inline json.RawMessage,
	refs map[string]string, decode func(string, json.RawMessage) (*evalengine.Result, *Error)) (*evalengine.CompareSide, *Error) {
	var named []string
	for k, v := range refs {
		if v != "" {
			named = append(named, k)
		}
	}
	sort.Strings(named)
	given := len(named)
	if len(inline) > 0 {
		given++
	}
	if given != 1 {
		valid := append([]string{field}, sortedKeys(refs)...)
		return nil, errorf(http.StatusBadRequest, CodeInvalidReport, field+": give exactly one of "+strings.Join(valid, ", ")).
			with(map[string]any{"reason": field + "_must_be_eval_result", "field": field, "valid": valid})
	}
	if len(inline) > 0 {
		r, e := decode(field, inline)
		if e != nil {
			return nil, e
		}
		return resultSide(field, r)
	}
	key := named[0]
	cl, scope, e := s.evalCall(c)
	if e != nil {
		return nil, e
	}
	jobID := refs[key]
	if key == "baseline_name" {
		name := refs[key]
		if len(name) > MaxPathParamBytes {
			return nil, errorf(http.StatusBadRequest, CodeInvalidReport, key+" must be 1.."+strconv.Itoa(MaxPathParamBytes)+" bytes").
				with(map[string]string{"reason": "invalid_baseline_name", "field": key})
		}
		// The row names the job whose result the baseline copied; a
		// baseline protects its job from pruning, so the job's result is
		// the baseline's (the same digest), and it reads in pages where
		// the baseline's copy would have to fit one reply.
		b, err := cl.BaselineRow(c.r.Context(), scope, name)
		if err != nil {
			return nil, serviceError(err)
		}
		jobID = b.JobID
	} else if !validJobID(jobID) {
		return nil, errorf(http.StatusBadRequest, CodeInvalidReport, key+" must be \"eval-\" and 32 lowercase hex digits").
			with(map[string]string{"reason": "invalid_job_id", "field": key})
	}
	return s.storedSide(c.r.Context(), cl, scope, key, jobID, decode)
}

// errSideRead stops a result stream whose reader has finished or failed.
var errSideRead = errors.New("compare side read ended")

// storedSide reads a stored result's side of a comparison. A job's result
// is read as its JSON Lines stream (readStoredStream) by
// evalengine.ReadStreamSide, so the side holds about 90 bytes a case, and
// the page in flight, whatever the result's size (past the 16 MiB a
// result document may have too). A job completed before results were
// kept as records has no stream: its document (at most 16 MiB) is read
// instead, decoded, and reduced to its side.
func (s *Server) storedSide(ctx context.Context, cl *client.Client, scope, key, jobID string,
	decode func(string, json.RawMessage) (*evalengine.Result, *Error)) (*evalengine.CompareSide, *Error) {
	var side *evalengine.CompareSide
	noStream, e, rerr := s.readStoredStream(ctx, cl, scope, jobID, func(r io.Reader) (err error) {
		side, err = evalengine.ReadStreamSide(r)
		return err
	})
	switch {
	case e != nil:
		return nil, e
	case noStream:
		doc, err := cl.Result(ctx, scope, jobID)
		if err != nil {
			return nil, serviceError(err)
		}
		r, e := decode(key, doc)
		if e != nil {
			return nil, e
		}
		return resultSide(key, r)
	case rerr != nil:
		return nil, invalidSide(key, rerr)
	}
	return side, nil
}

// readStoredStream gives read a job's JSON Lines stream
// (client.ResultStream, a page at a time through a pipe, from an owned
// goroutine; the pipe is closed both ways). noStream: the job was
// completed before results were kept as records and has none (read its
// document with client.Result). A stream's error (e) wins over read's,
// which is returned as readErr.
func (s *Server) readStoredStream(ctx context.Context, cl *client.Client, scope, jobID string,
	read func(io.Reader) error) (noStream bool, e *Error, readErr error) {
	return s.readStoredLines(ctx, cl, scope, jobID, 0, 0, "", read)
}

// readStoredLines is readStoredStream of lines [from, to) of the stream
// (client.ResultLines; to 0: to its end), whose digest must be digest
// when one is given (a reader that read other lines before).
func (s *Server) readStoredLines(ctx context.Context, cl *client.Client, scope, jobID string, from, to int64, digest string,
	read func(io.Reader) error) (noStream bool, e *Error, readErr error) {
	got := s.readStored(jobID, digest, func(w io.Writer) (string, error) {
		_, d, err := cl.ResultLines(ctx, scope, jobID, from, to, w, 0)
		return d, err
	}, read)
	switch {
	case got.fetchErr != nil && got.wrote == 0 && from == 0 && api.AsError(got.fetchErr).Code == api.CodeInvalidRequest:
		return true, nil, nil
	case got.fetchErr != nil:
		return false, serviceError(got.fetchErr), nil
	}
	return false, nil, got.readErr
}

// storedRead is what readStored did: the bytes read was given, fetch's
// error (nil when read stopped it) and read's.
type storedRead struct {
	wrote             int64
	fetchErr, readErr error
}

// readStored gives read what fetch writes of a job's stream (lines of
// it, or the sample lines of some tasks), through a pipe from an owned
// goroutine (the pipe is closed both ways), and counts it. fetch
// returns the stream's digest, which must be digest when one is given.
func (s *Server) readStored(jobID, digest string, fetch func(io.Writer) (string, error), read func(io.Reader) error) storedRead {
	pr, pw := io.Pipe()
	done := make(chan storedRead, 1)
	go func() {
		cw := iocount.Writer{W: pw}
		d, err := fetch(&cw)
		s.streamRead.Add(cw.N)
		if err == nil && digest != "" && d != digest {
			err = api.Errorf(api.CodeResultDigestMismatch, "job %s: result changed between reads", jobID)
		}
		pw.CloseWithError(err) // nil: the reader sees EOF
		done <- storedRead{wrote: cw.N, fetchErr: err}
	}()
	rerr := read(pr)
	pr.CloseWithError(errSideRead)
	got := <-done
	if errors.Is(got.fetchErr, errSideRead) {
		got.fetchErr = nil
	}
	got.readErr = rerr
	return got
}

// resultSide is a decoded result's side of a comparison.
func resultSide(field string, r *evalengine.Result) (*evalengine.CompareSide, *Error) {
	side, err := evalengine.ResultSide(r)
	if err != nil {
		return nil, invalidSide(field, err)
	}
	return side, nil
}

// invalidSide is the answer to a side that is not a valid result: the
// message names the field given and what is wrong.
func invalidSide(field string, err error) *Error {
	return errorf(http.StatusBadRequest, CodeInvalidReport, field+": "+err.Error()).
		with(map[string]string{"reason": field + "_must_be_eval_result", "field": field})
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// StatsBody is the body of POST /dev/v1/evaluation/stats: completed jobs
// of one eval set, oldest first, and the gate policy (adk eval stats'
// flags; omitted: 95 %, no tolerated drop, significance required).
type StatsBody struct {
	JobIDs  []string     `json:"job_ids"`
	Options *StatsParams `json:"options,omitempty"`
}

// StatsParams are the gate options of the statistics route.
type StatsParams struct {
	ConfidenceLevel     *float64 `json:"confidence_level,omitempty"`
	MaxMeanDrop         *float64 `json:"max_mean_drop,omitempty"`
	RequireSignificance *bool    `json:"require_significance,omitempty"`
}

// stats answers `adk eval stats` over stored results: each result's
// intervals and the gate of the last against the earlier ones pooled, on
// the pass rate and on every metric (evalengine.StatsReport, the JSON
// document the CLI prints with --format json).
func (s *Server) stats(w http.ResponseWriter, c *call) *Error {
	data, e := readBody(c.r)
	if e != nil {
		return e
	}
	var b StatsBody
	if e := decodeBody(data, &b, CodeInvalidReport); e != nil {
		return e
	}
	bad := func(field, msg, reason string) *Error {
		return errorf(http.StatusBadRequest, CodeInvalidReport, field+": "+msg).with(map[string]string{"reason": reason, "field": field})
	}
	if len(b.JobIDs) < 1 || len(b.JobIDs) > MaxStatsJobs {
		return bad("job_ids", "1.."+strconv.Itoa(MaxStatsJobs)+" job ids, oldest first", "invalid_job_ids")
	}
	for i, id := range b.JobIDs {
		if !validJobID(id) {
			return bad("job_ids["+strconv.Itoa(i)+"]", "must be \"eval-\" and 32 lowercase hex digits", "invalid_job_id")
		}
	}
	opts := evalengine.StatsOptions{Gate: evalengine.DefaultGateOptions(), Format: evalengine.FormatJSON, MaxBytes: MaxResponseBytes}
	if o := b.Options; o != nil {
		if o.ConfidenceLevel != nil {
			opts.Gate.ConfidenceLevel = *o.ConfidenceLevel
		}
		if o.MaxMeanDrop != nil {
			if *o.MaxMeanDrop < 0 || *o.MaxMeanDrop > 1 {
				return bad("options.max_mean_drop", "must be 0..1", "invalid_gate_options")
			}
			opts.Gate.MaxMeanDrop = *o.MaxMeanDrop
		}
		if o.RequireSignificance != nil {
			opts.Gate.RequireSignificance = *o.RequireSignificance
		}
	}
	cl, scope, e := s.evalCall(c)
	if e != nil {
		return e
	}
	sb, err := evalengine.NewStatsBuilder(len(b.JobIDs), opts)
	if err != nil {
		return bad("options", err.Error(), evalengine.ErrorCode(err))
	}
	// Each job's series is read from its stream (evalengine.ReadStreamSeries:
	// bytes a sample and a score, never a sample), so a result of any size
	// counts; a job without a stream is read as its document, and those
	// documents together are bounded by MaxStatsResultBytes.
	total := 0
	for i, id := range b.JobIDs {
		field := "job_ids[" + strconv.Itoa(i) + "]"
		var series *evalengine.StatsSeries
		noStream, e, rerr := s.readStoredStream(c.r.Context(), cl, scope, id, func(r io.Reader) (err error) {
			series, err = evalengine.ReadStreamSeries(r)
			return err
		})
		if e != nil {
			return e
		}
		if rerr != nil {
			return bad(field, rerr.Error(), evalengine.ErrorCode(rerr))
		}
		if noStream {
			doc, err := cl.Result(c.r.Context(), scope, id)
			if err != nil {
				return serviceError(err)
			}
			if total += len(doc); total > MaxStatsResultBytes {
				return errorf(http.StatusRequestEntityTooLarge, CodeResponseTooLarge,
					"the results named hold more than "+strconv.Itoa(MaxStatsResultBytes)+" bytes; name fewer jobs").
					with(map[string]any{"max_bytes": MaxStatsResultBytes, "field": "job_ids"})
			}
			r, err := evalengine.DecodeResult(doc)
			if err != nil {
				return bad(field, err.Error(), evalengine.ErrorCode(err))
			}
			if err := sb.AddResult(r); err != nil {
				return statsError(err, bad)
			}
		} else if err := sb.Add(series); err != nil {
			return statsError(err, bad)
		}
	}
	out, _, err := sb.Finish()
	if err != nil {
		return statsError(err, bad)
	}
	return s.writeRaw(w, http.StatusOK, "application/json; charset=utf-8", out, MaxResponseBytes)
}

// statsError is the answer to a statistics report that failed.
func statsError(err error, bad func(field, msg, reason string) *Error) *Error {
	var ee *evalengine.Error
	switch {
	case errors.As(err, &ee) && ee.Code == evalengine.CodeEvalSetMismatch:
		return errorf(http.StatusConflict, CodeSetMismatch, "the jobs evaluate different eval sets").
			with(map[string]string{"reason": evalengine.CodeEvalSetMismatch})
	case errors.As(err, &ee) && ee.Code == evalengine.CodeExportByteLimitExceeded:
		return errorf(http.StatusRequestEntityTooLarge, CodeResponseTooLarge, "the statistics are larger than 1 MiB; name fewer jobs").
			with(map[string]any{"max_bytes": MaxResponseBytes})
	}
	return bad("options", err.Error(), evalengine.ErrorCode(err))
}
