package worker

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/observability"
)

// errNoPrincipal refuses a signal of a job whose owner the worker does not
// know (or whose scope cannot name a principal): it is dropped and
// counted, never published under another principal.
var errNoPrincipal = errors.New("worker: signal of a job without a trace principal")

// jobSignals is the worker tracer's async sink. Every signal carries its
// job's id (adk.eval.job_id, set from the task on the sample's span); the
// principal it is published under is the job's scope as the coordinator's
// job spec names it. The task, the agent and the worker's configuration
// never choose it, so a job's traces land only under its owner.
type jobSignals struct {
	pool   *bus.PublisherPool      // nil: no fleet publishing
	export observability.AsyncSink // nil: no direct OTLP export

	principals sync.Map // job id → *jobPublisher
	// last is the job a signal was last routed for: a worker's runners
	// mostly run one job's tasks, so most of a task's five records skip
	// the map (hashing the job id is most of the routing's cost).
	last    atomic.Pointer[jobPublisher]
	noOwner atomic.Uint64
}

// jobPublisher is a job's principal and, once its first signal asked for
// it, that principal's publisher: a task's five signals then cost one
// load of jobSignals.last each (a map load when another job's signal came
// between), not a turn through the pool's lock.
type jobPublisher struct {
	jobID     string
	principal string
	once      sync.Once
	pub       *bus.Publisher
	err       error
}

// own records the principal of a job (its scope). A scope that is not a
// subject token cannot name a signal subject: such a job is not traced
// into the store (its signals count as no_principal).
func (j *jobSignals) own(jobID, scope string) {
	if j == nil || bus.ValidToken(scope) != nil {
		return
	}
	j.principals.Store(jobID, &jobPublisher{jobID: jobID, principal: scope})
}

func (j *jobSignals) forget(jobID string) {
	if j != nil {
		j.principals.Delete(jobID)
		if last := j.last.Load(); last != nil && last.jobID == jobID {
			j.last.CompareAndSwap(last, nil)
		}
	}
}

var (
	_ observability.AsyncSink          = (*jobSignals)(nil)
	_ observability.RecycledRecordSink = (*jobSignals)(nil)
)

// Enqueue implements observability.AsyncSink: the path when the worker
// also exports to OTLP, which needs the Signal values.
func (j *jobSignals) Enqueue(s observability.Signal) error {
	if j.export != nil {
		_ = j.export.Enqueue(s) // its own drops are its own counters
	}
	if j.pool == nil {
		return nil
	}
	pub, err := j.publisher(observability.SignalJobID(s))
	if err != nil {
		return err
	}
	return pub.Enqueue(s)
}

// EnqueueSignalJSON implements observability.RecordSink: the tracer's
// own record of a signal of job jobID, published as it is.
func (j *jobSignals) EnqueueSignalJSON(jobID string, data []byte) error {
	if j.pool == nil {
		return nil
	}
	pub, err := j.publisher(jobID)
	if err != nil {
		return err
	}
	return pub.EnqueueRecord(bus.RecordObservability, data)
}

// EnqueueSignalRecord implements observability.RecycledRecordSink: the
// job's publisher releases the record once its batch is encoded.
func (j *jobSignals) EnqueueSignalRecord(jobID string, r observability.Record) error {
	if j.pool == nil {
		r.Release()
		return nil
	}
	pub, err := j.publisher(jobID)
	if err != nil {
		return err
	}
	return pub.EnqueueSignalRecord(jobID, r)
}

// publisher is the publisher of the job's principal.
func (j *jobSignals) publisher(jobID string) (*bus.Publisher, error) {
	jp := j.last.Load()
	if jp == nil || jp.jobID != jobID {
		v, ok := j.principals.Load(jobID)
		if !ok {
			j.noOwner.Add(1)
			return nil, errNoPrincipal
		}
		jp = v.(*jobPublisher)
		j.last.Store(jp)
		if v, ok := j.principals.Load(jobID); !ok || v != jp {
			// forgotten (or owned again) meanwhile: the cache must not
			// outlive the map's entry.
			j.last.CompareAndSwap(jp, nil)
		}
	}
	jp.once.Do(func() { jp.pub, jp.err = j.pool.Publisher(jp.principal) })
	return jp.pub, jp.err
}
