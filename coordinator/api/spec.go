package api

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/fadcedab/adk/evalengine"
)

// Prepared is a job's set, metrics and normalized options, decoded the
// same way on the coordinator (validation, aggregation) and on workers
// (RunSample), so both sides run one definition of the job.
type Prepared struct {
	Set     *evalengine.Set
	Metrics []evalengine.Metric
	Options evalengine.Options
}

// Prepare decodes a job's set (any format evalengine.LoadSet reads),
// criteria file (empty: the default criteria) and options JSON (empty:
// the defaults; unknown keys refused), and checks the sample total.
func Prepare(set, criteria, options []byte) (*Prepared, error) {
	s, _, err := evalengine.LoadSet(set)
	if err != nil {
		return nil, err
	}
	metrics := evalengine.DefaultCriteria()
	if len(criteria) > 0 {
		if metrics, err = evalengine.ParseCriteria(criteria); err != nil {
			return nil, err
		}
	}
	opts := evalengine.DefaultOptions()
	if len(options) > 0 {
		dec := json.NewDecoder(bytes.NewReader(options))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&opts); err != nil {
			return nil, Errorf(CodeInvalidRequest, "options: %v", err)
		}
	}
	if opts, err = opts.Normalize(); err != nil {
		return nil, err
	}
	if total := len(s.Cases) * opts.Samples; total > evalengine.MaxTotalSamples {
		return nil, Errorf(CodeRequestLimit, "samples: %d > %d", total, evalengine.MaxTotalSamples)
	}
	return &Prepared{Set: s, Metrics: metrics, Options: opts}, nil
}

// TaskIndex maps a task index to its (case, sample): sample-major order,
// like the local engine's scheduler (sample 0 of every case first).
func TaskIndex(idx, cases int) (caseIdx, sample int) { return idx % cases, idx / cases }

// EncodeOptions writes normalized options as the JSON a job stores.
func EncodeOptions(o evalengine.Options) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("encode options: %w", err)
	}
	return b, nil
}
