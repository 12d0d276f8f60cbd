package evalcore

import (
	"strconv"
	"time"
)

// CaseAggregator aggregates a run case by case, in case order, keeping
// each case compactly (the dropped-samples run's aggregate): the fleet
// builds a result's case lines and summary from its stored records with
// it, one case's samples at a time, in memory that grows with the cases
// and not with the samples. Its Result equals Aggregate's over the same
// samples, without them; StreamWriter.WriteSummary writes its case lines.
type CaseAggregator struct {
	a    *runAgg
	set  *Set
	next int
}

// NewCaseAggregator starts aggregating a run of set with metrics and
// opts, as Aggregate would.
func NewCaseAggregator(set *Set, metrics []Metric, opts Options) (*CaseAggregator, error) {
	if err := set.check(); err != nil {
		return nil, err
	}
	opts, err := opts.Normalize()
	if err != nil {
		return nil, err
	}
	if err := ValidateMetrics(metrics); err != nil {
		return nil, err
	}
	h := headerOf(set, opts, 0)
	return &CaseAggregator{a: newCompactRunAgg(h, descsOf(metrics), len(set.Cases)), set: set}, nil
}

// Add aggregates the next case from its samples, ordered by sample
// index; each must be that case's sample with its deterministic id (as
// Aggregate requires).
func (c *CaseAggregator) Add(samples []SampleResult) error {
	ci := c.next
	if ci >= len(c.set.Cases) || len(samples) != c.a.h.samples {
		return NewErr(CodeInvalidSampleResults, "case "+strconv.Itoa(ci))
	}
	id := c.set.Cases[ci].ID
	for si := range samples {
		s := &samples[si]
		if s.CaseID != id || s.SampleIndex != si || s.SampleID != SampleID(c.set.ID, c.set.Version, id, si) {
			return NewErr(CodeInvalidSampleResults, id+"#"+strconv.Itoa(si))
		}
	}
	c.a.addCase(ci, samples)
	c.next++
	return nil
}

// Result finishes the aggregate once every case was added: the result
// without samples, whose case lines StreamWriter.WriteSummary writes.
func (c *CaseAggregator) Result(duration time.Duration) (*Result, error) {
	if c.next != len(c.set.Cases) {
		return nil, NewErr(CodeInvalidSampleResults, "want "+strconv.Itoa(len(c.set.Cases))+" cases, got "+strconv.Itoa(c.next))
	}
	return c.a.finish(duration.Milliseconds()), nil
}
