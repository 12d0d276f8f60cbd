package coordinator

import (
	"encoding/json"
	"sync"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// DefaultSampleCacheBytes bounds the memory the leader spends on its
// running jobs' decoded samples (sampleCache), estimated as
// decodedBytesPerJSONByte times the samples' JSON size.
const DefaultSampleCacheBytes = 128 << 20

// decodedBytesPerJSONByte estimates a decoded sample's heap from its JSON:
// the fleet benchmark's 10,000-task job (6.5 MB of samples) raised the
// leader's peak RSS by ~25 MiB.
const decodedBytesPerJSONByte = 4

// sampleCache keeps, on every node, each running job's task outcomes with
// their samples already decoded and encoded, filled after each committed
// `finish`. Completing a job then reads and decodes nothing: at 10,000
// tasks that was ~100-120 ms of the job's tail (a scan of the task
// records, then a JSON decode of every sample). The leader builds the
// result from it to digest it; every follower's FSM builds the same
// document from its own when the completion (which carries only the
// digest) is applied.
//
// The store stays the truth. An outcome missing here (this node restarted
// or restored a snapshot mid-job, or the job outgrew the byte bound) is
// read from the store. Outcomes are terminal and accepted once (the FSM
// fences them by assignment), so a cached outcome is exactly what the
// store holds.
type sampleCache struct {
	mu     sync.Mutex
	on     bool
	max    int64
	bytes  int64
	jobs   map[string]*cachedJob
	spoilt map[string]bool // jobs that outgrew the bound: never complete here
}

type cachedJob struct {
	outs  map[int]cachedOutcome
	bytes int64
}

// cachedOutcome is one accepted task outcome; sample is nil when the task
// is not done or its sample did not decode (completeJob makes it an error
// sample, as it does from the store). enc is json.Marshal of *sample: the
// result document splices it (evalengine.Result.MarshalJSONWith).
type cachedOutcome struct {
	state, tag string
	sample     *evalengine.SampleResult
	enc        []byte
}

func newSampleCache(max int64) *sampleCache {
	c := &sampleCache{max: max}
	c.enable()
	return c
}

// enable starts caching; disable stops and forgets all (tests).
func (c *sampleCache) enable() {
	c.mu.Lock()
	c.on, c.jobs, c.spoilt, c.bytes = c.max > 0, map[string]*cachedJob{}, map[string]bool{}, 0
	c.mu.Unlock()
}

func (c *sampleCache) disable() {
	c.mu.Lock()
	c.on, c.jobs, c.spoilt, c.bytes = false, nil, nil, 0
	c.mu.Unlock()
}

// finished records committed outcomes. It runs on the apply goroutine
// after the store commit; the decoding and the encoding of each sample
// happen here, spread over the job (~20 µs a sample).
func (c *sampleCache) finished(outs []evalstore.Outcome, accepted []bool) {
	c.mu.Lock()
	on := c.on
	c.mu.Unlock()
	if !on {
		return
	}
	type decoded struct {
		i int
		o cachedOutcome
	}
	ds := make([]decoded, 0, len(outs))
	for i, o := range outs {
		if i >= len(accepted) || !accepted[i] {
			continue
		}
		co := cachedOutcome{state: o.State, tag: o.Tag}
		if o.State == evalrecord.TaskDone {
			var s evalengine.SampleResult
			if json.Unmarshal(o.Sample, &s) == nil {
				co.sample = &s
				// A decoded value always encodes; were it not to, enc
				// stays nil and the document encodes the sample itself.
				if b, err := json.Marshal(&s); err == nil {
					co.enc = b
				}
			}
		}
		ds = append(ds, decoded{i, co})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on {
		return
	}
	for _, d := range ds {
		o := &outs[d.i]
		if c.spoilt[o.JobID] {
			continue
		}
		j := c.jobs[o.JobID]
		if j == nil {
			j = &cachedJob{outs: map[int]cachedOutcome{}}
			c.jobs[o.JobID] = j
		}
		size := int64(len(o.Sample))*decodedBytesPerJSONByte + int64(len(d.o.enc)) + 64
		if c.bytes+size > c.max {
			c.bytes -= j.bytes
			delete(c.jobs, o.JobID)
			c.spoilt[o.JobID] = true
			continue
		}
		j.outs[o.Index] = d.o
		j.bytes += size
		c.bytes += size
	}
}

// outcomes returns a copy of the job's cached outcomes by task index
// (those it has: the caller reads the others from the store), nil when it
// has none. The job stays cached until it ends.
func (c *sampleCache) outcomes(jobID string) map[int]cachedOutcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	if j == nil {
		return nil
	}
	out := make(map[int]cachedOutcome, len(j.outs))
	for i, o := range j.outs {
		out[i] = o
	}
	return out
}

// ended forgets a job that became terminal.
func (c *sampleCache) ended(jobID string) {
	c.mu.Lock()
	c.drop(jobID)
	c.mu.Unlock()
}

// reset forgets every job (recover, snapshot restore) but keeps caching.
func (c *sampleCache) reset() {
	c.mu.Lock()
	if c.on {
		c.jobs, c.spoilt, c.bytes = map[string]*cachedJob{}, map[string]bool{}, 0
	}
	c.mu.Unlock()
}

func (c *sampleCache) drop(jobID string) {
	if j := c.jobs[jobID]; j != nil {
		c.bytes -= j.bytes
		delete(c.jobs, jobID)
	}
	delete(c.spoilt, jobID)
}
