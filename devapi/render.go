package devapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/fadcedab/adk/evalengine"
)

// RenderBody is the body of POST /dev/v1/evaluation/render.
type RenderBody struct {
	Report  json.RawMessage `json:"report"`
	Format  string          `json:"format"`
	Options *RenderOptions  `json:"options,omitempty"`
}

// RenderOptions are the render route's options.
type RenderOptions struct {
	MaxOutputBytes *int    `json:"max_output_bytes,omitempty"`
	SuiteName      *string `json:"suite_name,omitempty"`
}

// CompareBody is the body of POST /dev/v1/evaluation/compare. Each side
// is either a result document posted inline (bound by the 64 KiB body)
// or a stored one named by reference, which has no such bound: the
// baseline as baseline, baseline_job_id or baseline_name, the current
// result as current or current_job_id (exactly one of each).
type CompareBody struct {
	Baseline      json.RawMessage `json:"baseline,omitempty"`
	Current       json.RawMessage `json:"current,omitempty"`
	BaselineJobID string          `json:"baseline_job_id,omitempty"`
	BaselineName  string          `json:"baseline_name,omitempty"`
	CurrentJobID  string          `json:"current_job_id,omitempty"`
	Options       *CompareOpts    `json:"options,omitempty"`
}

// CompareOpts are the compare route's options.
type CompareOpts struct {
	MaxPassRateDrop  *float64           `json:"max_pass_rate_drop,omitempty"`
	MetricTolerances map[string]float64 `json:"metric_tolerances,omitempty"`
	MaxOutputBytes   *int               `json:"max_output_bytes,omitempty"`
}

func reportErr(code string, err error) *Error {
	reason := evalengine.ErrorCode(err)
	return errorf(http.StatusBadRequest, CodeInvalidReport, err.Error()).with(map[string]string{"reason": reason, "tag": code})
}

func outputLimit(p *int, ceiling int) (int, *Error) {
	if p == nil {
		return ceiling, nil
	}
	if *p < 1 || *p > ceiling {
		return 0, errorf(http.StatusBadRequest, CodeInvalidReport, "options.max_output_bytes must be 1.."+strconv.Itoa(ceiling)).
			with(map[string]string{"reason": "invalid_output_limit", "field": "options.max_output_bytes"})
	}
	return *p, nil
}

// decodeReportValue classifies a posted report: a comparison (it says
// report_type) or a result.
func decodeReportValue(raw json.RawMessage) (any, *Error) {
	if !isObject(raw) {
		return nil, errorf(http.StatusBadRequest, CodeInvalidReport, "report must be a result or comparison JSON object").
			with(map[string]string{"reason": "invalid_json_map", "field": "report"})
	}
	if bytes.Contains(raw, []byte(`"report_type"`)) {
		c, err := evalengine.DecodeComparison(raw)
		if err != nil {
			return nil, reportErr("invalid_baseline_comparison", err)
		}
		return c, nil
	}
	r, err := evalengine.DecodeResult(raw)
	if err != nil {
		return nil, reportErr("invalid_eval_result", err)
	}
	return r, nil
}

func (s *Server) renderOutput(w http.ResponseWriter, v any, format string, opts evalengine.ExportOptions) *Error {
	out, err := evalengine.Render(v, format, opts)
	if err != nil {
		var ee *evalengine.Error
		if errors.As(err, &ee) && ee.Code == evalengine.CodeExportByteLimitExceeded {
			return errorf(http.StatusBadRequest, CodeInvalidReport, "the output is larger than "+strconv.Itoa(opts.MaxBytes)+" bytes").
				with(map[string]any{"reason": "output_limit_exceeded", "max_bytes": opts.MaxBytes})
		}
		return reportErr("render_failed", err)
	}
	return s.writeRaw(w, http.StatusOK, ContentType(format), out, opts.MaxBytes)
}

func (s *Server) render(w http.ResponseWriter, c *call) *Error {
	data, e := readBody(c.r)
	if e != nil {
		return e
	}
	var b RenderBody
	if e := decodeBody(data, &b, CodeInvalidReport); e != nil {
		return e
	}
	if !isAllowed(b.Format, evalengine.Formats()) {
		return errorf(http.StatusBadRequest, CodeInvalidReport, "format must be one of json, markdown, junit, sarif, annotations").
			with(map[string]any{"reason": "invalid_format", "field": "format", "valid": evalengine.Formats()})
	}
	v, e := decodeReportValue(b.Report)
	if e != nil {
		return e
	}
	opts := evalengine.ExportOptions{}
	var limit *int
	if b.Options != nil {
		limit = b.Options.MaxOutputBytes
		if b.Options.SuiteName != nil {
			if *b.Options.SuiteName == "" {
				return errorf(http.StatusBadRequest, CodeInvalidReport, "options.suite_name must be 1..256 bytes of UTF-8").
					with(map[string]string{"reason": "invalid_options", "field": "options.suite_name"})
			}
			opts.SuiteName = *b.Options.SuiteName
		}
	}
	if opts.MaxBytes, e = outputLimit(limit, MaxResponseBytes); e != nil {
		return e
	}
	return s.renderOutput(w, v, b.Format, opts)
}

func (s *Server) compare(w http.ResponseWriter, c *call) *Error {
	data, e := readBody(c.r)
	if e != nil {
		return e
	}
	var b CompareBody
	if e := decodeBody(data, &b, CodeInvalidReport); e != nil {
		return e
	}
	decode := func(field string, raw json.RawMessage) (*evalengine.Result, *Error) {
		if !isObject(raw) {
			return nil, errorf(http.StatusBadRequest, CodeInvalidReport, field+" must be an eval result JSON object").
				with(map[string]string{"reason": field + "_must_be_eval_result", "field": field})
		}
		r, err := evalengine.DecodeResult(raw)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, CodeInvalidReport, field+": "+err.Error()).
				with(map[string]string{"reason": field + "_must_be_eval_result", "field": field})
		}
		return r, nil
	}
	base, e := s.compareSide(c, "baseline", b.Baseline, map[string]string{"baseline_job_id": b.BaselineJobID, "baseline_name": b.BaselineName}, decode)
	if e != nil {
		return e
	}
	cur, e := s.compareSide(c, "current", b.Current, map[string]string{"current_job_id": b.CurrentJobID}, decode)
	if e != nil {
		return e
	}
	var opts evalengine.CompareOptions
	var limit *int
	if b.Options != nil {
		if b.Options.MaxPassRateDrop != nil {
			opts.MaxPassRateDrop = *b.Options.MaxPassRateDrop
		}
		opts.MetricTolerances = b.Options.MetricTolerances
		limit = b.Options.MaxOutputBytes
	}
	max, e := outputLimit(limit, MaxResponseBytes)
	if e != nil {
		return e
	}
	cmp, err := evalengine.CompareSides(base, cur, opts)
	if err != nil {
		if evalengine.ErrorCode(err) == evalengine.CodeEvalSetMismatch {
			return errorf(http.StatusConflict, CodeSetMismatch, "baseline and current evaluate different sets").
				with(map[string]string{"reason": evalengine.CodeEvalSetMismatch})
		}
		return errorf(http.StatusBadRequest, CodeInvalidReport, err.Error()).
			with(map[string]string{"reason": "invalid_comparison_options"})
	}
	if limit != nil {
		// The caller's bound: the document whole or the typed refusal.
		return s.renderOutput(w, cmp, evalengine.FormatJSON, evalengine.ExportOptions{MaxBytes: max})
	}
	return s.writeComparison(w, cmp)
}

// writeComparison sends a comparison's JSON document of any size
// (DESIGN.md "Comparisons of any size"): up to MaxResponseBytes it is
// one body with its content-length, as every answer; past it the same
// document streams (chunked), a case row at a time, instead of the
// output_limit_exceeded it was.
func (s *Server) writeComparison(w http.ResponseWriter, cmp *evalengine.Comparison) *Error {
	sw := &spillWriter{w: w, contentType: ContentType(evalengine.FormatJSON), limit: MaxResponseBytes}
	if _, err := evalengine.WriteComparison(sw, cmp, evalengine.FormatJSON, evalengine.ExportOptions{}); err != nil {
		if sw.streaming {
			// w failed (the client went away); the status is sent.
			return nil
		}
		return reportErr("render_failed", err)
	}
	return sw.finish(s)
}
