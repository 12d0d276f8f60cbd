package evalengine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Codes of a job request the coordinator's service answers with
// (CONTRACTS §6); coordinator/api names them CodeInvalidRequest and
// CodeRequestLimit.
const (
	CodeInvalidEvalRequest = "invalid_eval_request"
	CodeEvalRequestLimit   = "evaluation_request_limit_exceeded"
)

// requestError bounds the detail like the coordinator's wire errors do.
func requestError(code, detail string) *Error {
	if len(detail) > 512 {
		detail = detail[:512]
	}
	return &Error{Code: code, Detail: detail}
}

// Prepared is a job's set, metrics and normalized options, decoded the
// same way on the coordinator (validation, aggregation) and on workers
// (RunSample), so both sides run one definition of the job.
type Prepared struct {
	Set     *Set
	Metrics []Metric
	Options Options
}

// Prepare decodes a job's set (any format LoadSet reads),
// criteria file (empty: the default criteria) and options JSON (empty:
// the defaults; unknown keys refused), and checks the sample total.
func Prepare(set, criteria, options []byte) (*Prepared, error) {
	return PrepareWithin(set, criteria, options, 0)
}

// PrepareWithin is Prepare with the set's validation bounded by timeout
// (LoadOptions.ValidationTimeout; 0 is the size's default budget,
// SetValidationTimeout): a service that bounds the whole validation
// itself passes what is left of its own bound, so that the bound it was
// configured with is the one that holds.
func PrepareWithin(set, criteria, options []byte, timeout time.Duration) (*Prepared, error) {
	s, _, err := LoadSetWithOptions(set, LoadOptions{ValidationTimeout: timeout})
	if err != nil {
		return nil, err
	}
	metrics := DefaultCriteria()
	if len(criteria) > 0 {
		if metrics, err = ParseCriteria(criteria); err != nil {
			return nil, err
		}
	}
	opts := DefaultOptions()
	if len(options) > 0 {
		dec := json.NewDecoder(bytes.NewReader(options))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&opts); err != nil {
			return nil, requestError(CodeInvalidEvalRequest, fmt.Sprintf("options: %v", err))
		}
	}
	if opts, err = opts.Normalize(); err != nil {
		return nil, err
	}
	if total := len(s.Cases) * opts.Samples; total > MaxTotalSamples {
		return nil, requestError(CodeEvalRequestLimit, fmt.Sprintf("samples: %d > %d", total, MaxTotalSamples))
	}
	return &Prepared{Set: s, Metrics: metrics, Options: opts}, nil
}

// EncodeOptions writes normalized options as the JSON a job stores.
func EncodeOptions(o Options) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("encode options: %w", err)
	}
	return b, nil
}
