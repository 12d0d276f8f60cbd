package devapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/fadcedab/adk/evalengine"
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

// compareSide resolves one side of a comparison: the inline document or
// exactly one reference (a job id or a baseline name) to a stored result
// of the call's scope.
func (s *Server) compareSide(c *call, field string, inline json.RawMessage,
	refs map[string]string, decode func(string, json.RawMessage) (*evalengine.Result, *Error)) (*evalengine.Result, *Error) {
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
		return decode(field, inline)
	}
	key := named[0]
	cl, scope, e := s.evalCall(c)
	if e != nil {
		return nil, e
	}
	var doc []byte
	var err error
	if key == "baseline_name" {
		name := refs[key]
		if len(name) > MaxPathParamBytes {
			return nil, errorf(http.StatusBadRequest, CodeInvalidReport, key+" must be 1.."+strconv.Itoa(MaxPathParamBytes)+" bytes").
				with(map[string]string{"reason": "invalid_baseline_name", "field": key})
		}
		b, gerr := cl.GetBaseline(c.r.Context(), scope, name)
		if gerr == nil {
			doc = b.Result
		}
		err = gerr
	} else {
		if !jobIDPattern.MatchString(refs[key]) {
			return nil, errorf(http.StatusBadRequest, CodeInvalidReport, key+" must be \"eval-\" and 32 lowercase hex digits").
				with(map[string]string{"reason": "invalid_job_id", "field": key})
		}
		doc, err = cl.Result(c.r.Context(), scope, refs[key])
	}
	if err != nil {
		return nil, serviceError(err)
	}
	return decode(key, doc)
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
		if !jobIDPattern.MatchString(id) {
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
	results := make([]*evalengine.Result, 0, len(b.JobIDs))
	total := 0
	for i, id := range b.JobIDs {
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
			return bad("job_ids["+strconv.Itoa(i)+"]", err.Error(), evalengine.ErrorCode(err))
		}
		results = append(results, r)
	}
	out, _, err := evalengine.StatsReport(results, opts)
	if err != nil {
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
	return s.writeRaw(w, http.StatusOK, "application/json; charset=utf-8", out, MaxResponseBytes)
}
