package devapi

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/coordinator/client"
	"github.com/fadcedab/adk/evalengine"
)

// ContentTypeJSONL is the content type of a result's JSON Lines stream
// (GET .../report?format=jsonl).
const ContentTypeJSONL = "application/jsonl; charset=utf-8"

// tooLargeForDocument says whether err is the coordinator refusing to
// build a job's result document: its samples are over 16 MiB, and only
// its JSON Lines stream holds it (DESIGN.md "Stored results of any size").
func tooLargeForDocument(err error) bool {
	return err != nil && api.AsError(err).Code == evalengine.CodeReportTooLarge
}

// Bounds of the report spool (Options.ReportSpoolBytes). The default is
// the eval store's default byte quota of all results together (1 GiB):
// four reports at once of the largest result one scope holds by default
// (256 MiB), and never more disk than the cluster keeps of results. The
// minimum leaves room for the spool's 1 MiB write buffer.
const (
	DefaultReportSpoolBytes = 1 << 30
	MinReportSpoolBytes     = 1 << 20
	MaxReportSpoolBytes     = 1 << 40
)

// Errors of a spool write past the budget: the spools of other reports
// hold the rest (retry later), or this report's alone passes it.
var (
	errSpoolFull  = errors.New("report spool full")
	errSpoolLimit = errors.New("report stream over the spool bound")
)

// spoolBudget is the bytes the report spools of every request hold
// together, at most limit.
type spoolBudget struct {
	limit int64
	used  atomic.Int64
}

// take reserves n bytes, or nothing and false when that passes the limit.
func (b *spoolBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// spoolWriter writes one report's spool file within the budget; release
// gives back what it took.
type spoolWriter struct {
	w    io.Writer
	b    *spoolBudget
	held int64
}

func (s *spoolWriter) Write(p []byte) (int, error) {
	n := int64(len(p))
	if !s.b.take(n) {
		if s.held+n > s.b.limit {
			return 0, errSpoolLimit
		}
		return 0, errSpoolFull
	}
	s.held += n
	return s.w.Write(p)
}

func (s *spoolWriter) release() { s.b.used.Add(-s.held) }

// errOverMaxBytes stops a report written into a caller's max_bytes.
var errOverMaxBytes = errors.New("report over max_bytes")

// cappedWriter holds at most limit bytes; more is errOverMaxBytes.
type cappedWriter struct {
	buf   []byte
	limit int
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if len(c.buf)+len(p) > c.limit {
		return 0, errOverMaxBytes
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// streamedReport sends the report of a job whose result is over one
// document, from its JSON Lines stream: jsonl is the stream itself;
// markdown, junit, sarif, annotations and html are evalengine.RenderStream
// of it, spooled to a temporary file (RenderStream reads a StreamFile, a
// ReaderAt) that is removed before the answer ends; json is refused,
// naming jsonl. Without max_bytes, at the default report ceiling (bounded
// false), the answer is held up
// to MaxResponseBytes and sent with its content-length, and past it
// streams (chunked); with it, or under an operator's lower
// MaxReportBytes, the answer is held up to that bound and over it is 413
// response_limit_exceeded, as for a result document.
//
// noStream, when set, is the answer for a job that has no stream (one
// completed as a document, whose report is rendered from it and came
// here only for being over the ceiling).
func (s *Server) streamedReport(ctx context.Context, w http.ResponseWriter, cl *client.Client, scope, id, format string,
	opts evalengine.ExportOptions, bounded bool, noStream *Error) *Error {
	if format == evalengine.FormatJSON {
		return errorf(http.StatusRequestEntityTooLarge, CodeResponseTooLarge,
			"the result's samples are over one 16 MiB JSON document: format=jsonl sends its JSON Lines form; format=markdown, junit, sarif, annotations or html render it").
			with(map[string]any{"reason": evalengine.CodeReportTooLarge, "parameter": "format", "valid": []string{evalengine.FormatJSONL}})
	}
	var sink io.Writer
	var capped *cappedWriter
	spill := &spillWriter{w: w, contentType: ContentType(format), limit: MaxResponseBytes}
	if bounded {
		capped = &cappedWriter{limit: opts.MaxBytes}
		sink = capped
	} else {
		sink = spill
	}
	var streamed int64 // lines of the stream read
	render := func() (err error) {
		if format == evalengine.FormatJSONL {
			streamed, err = cl.ResultStream(ctx, scope, id, sink, 0)
			return err
		}
		f, err := os.CreateTemp("", "adk-devapi-report-*.jsonl")
		if err != nil {
			return err
		}
		sw := &spoolWriter{w: f, b: s.spool}
		defer sw.release() // runs last: once the file is removed
		defer os.Remove(f.Name())
		defer f.Close()
		bw := bufio.NewWriterSize(sw, 1<<20)
		if streamed, err = cl.ResultStream(ctx, scope, id, bw, 0); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		size, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return err
		}
		sf, err := evalengine.OpenStreamFile(f, size)
		if err != nil {
			return err
		}
		return evalengine.RenderStream(sink, sf, format, opts)
	}
	err := render()
	if err != nil && !bounded && spill.streaming {
		// The status and part of the body are sent: end the answer
		// without its last chunk, so the client sees it cut short.
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		var ee *evalengine.Error
		var ae *api.Error
		switch {
		case noStream != nil && streamed == 0 && errors.As(err, &ae) && ae.Code == api.CodeInvalidRequest:
			return noStream
		case errors.Is(err, errSpoolFull):
			e := errorf(http.StatusTooManyRequests, CodeCapacityReached, "the reports being rendered hold the gateway's report spool ("+
				strconv.FormatInt(s.spool.limit, 10)+" bytes); retry later, or ask format=jsonl, which is not spooled").
				with(map[string]any{"reason": "report_spool_full", "max_spool_bytes": s.spool.limit})
			e.Header = map[string]string{"retry-after": "1"}
			return e
		case errors.Is(err, errSpoolLimit):
			return errorf(http.StatusServiceUnavailable, CodeServiceUnavailable, "the result's stream is larger than the gateway's report spool ("+
				strconv.FormatInt(s.spool.limit, 10)+" bytes, the operator's report_spool_bytes); format=jsonl sends it unspooled").
				with(map[string]any{"reason": "report_spool_limit", "max_spool_bytes": s.spool.limit})
		case errors.Is(err, errOverMaxBytes):
			return errorf(http.StatusRequestEntityTooLarge, CodeResponseTooLarge, "the report is larger than "+strconv.Itoa(opts.MaxBytes)+" bytes").
				with(map[string]any{"max_bytes": opts.MaxBytes, "reason": evalengine.CodeExportByteLimitExceeded})
		case errors.As(err, &ae):
			return serviceError(err)
		case errors.As(err, &ee):
			return errorf(http.StatusBadRequest, CodeInvalidReport, err.Error()).with(map[string]string{"reason": ee.Code})
		}
		// The temporary file failed (the disk is full): the gateway's
		// trouble, not the request's.
		return errorf(http.StatusServiceUnavailable, CodeServiceUnavailable, "the result could not be spooled for its report").
			with(map[string]string{"reason": "report_spool_failed"})
	}
	if bounded {
		return s.writeRaw(w, http.StatusOK, ContentType(format), capped.buf, opts.MaxBytes)
	}
	return spill.finish(s)
}
