package coordinator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// Result tails (coordinator/DESIGN.md, "The result tail"). A records
// job's case lines and summary are a function of its records, which a
// node otherwise aggregates on its first read of the job (every sample
// decoded) after walking them for the digest check. Once a job completes,
// every node renders them in the background (tailBuilder) and stores them
// with the count and digest of the records they came from
// (evalstore.PutTail); a read then takes its header, case lines and
// summary from the tail and skips both the walk and the aggregate. A
// tail is used only while it names the job's records count and digest as
// the log completed them.

// Bounds of the tail machinery of one node.
const (
	maxTailHeads = 16 // tail heads kept decoded in memory
	maxTailQueue = 64 // jobs waiting for their tail; more are built on read
)

// caseLines is where a records job's case lines and summary come from:
// its stored tail, or its aggregate in memory.
type caseLines interface {
	cases() int
	// line is case line k (k < cases()) or the summary (k == cases()),
	// with its newline.
	line(k int) ([]byte, error)
	failed() int
	failedAt(rank int) int
	passedAt(rank int) int
}

// tailLines reads a stored tail, a chunk of case lines at a time.
type tailLines struct {
	tx    *evalstore.Tx
	h     *evalstore.TailHead
	chunk int
	data  []byte
}

func (t *tailLines) cases() int            { return t.h.Cases }
func (t *tailLines) failed() int           { return t.h.FailedCount() }
func (t *tailLines) failedAt(rank int) int { return t.h.FailedAt(rank) }
func (t *tailLines) passedAt(rank int) int { return t.h.PassedAt(rank) }

func (t *tailLines) line(k int) ([]byte, error) {
	if k == t.h.Cases {
		return t.h.Summary, nil
	}
	c := k / evalstore.TailChunkCases
	if t.data == nil || t.chunk != c {
		b, err := t.tx.TailChunk(t.h.JobID, c)
		if err != nil {
			return nil, err
		}
		t.data, t.chunk = b, c
	}
	rest := t.data
	for range k % evalstore.TailChunkCases {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return nil, api.Errorf(api.CodeResultDigestMismatch, "job %s: its result tail lacks case line %d", t.h.JobID, k)
		}
		rest = rest[i+1:]
	}
	i := bytes.IndexByte(rest, '\n')
	if i < 0 {
		return nil, api.Errorf(api.CodeResultDigestMismatch, "job %s: its result tail lacks case line %d", t.h.JobID, k)
	}
	return rest[:i+1], nil
}

// aggLines renders case lines from an aggregate, one at a time; its
// failed cases are listed as a tail lists them (ranks).
type aggLines struct {
	agg  *evalengine.Result
	rank evalstore.TailHead // Failed only
	buf  bytes.Buffer
	sw   *evalengine.StreamWriter
}

func newAggLines(agg *evalengine.Result) (*aggLines, error) {
	a := &aggLines{agg: agg}
	sw, err := evalengine.NewStreamWriter(&a.buf, nil, 0, 0)
	if err != nil {
		return nil, err
	}
	a.sw = sw
	for k := range agg.CaseLines() {
		if !agg.CasePassed(k) {
			a.rank.Failed = binary.BigEndian.AppendUint32(a.rank.Failed, uint32(k))
		}
	}
	return a, nil
}

func (a *aggLines) cases() int            { return a.agg.CaseLines() }
func (a *aggLines) failed() int           { return a.rank.FailedCount() }
func (a *aggLines) failedAt(rank int) int { return a.rank.FailedAt(rank) }
func (a *aggLines) passedAt(rank int) int { return a.rank.PassedAt(rank) }

func (a *aggLines) line(k int) ([]byte, error) {
	a.buf.Reset()
	var err error
	if k < a.agg.CaseLines() {
		err = a.sw.WriteCase(a.agg, k)
	} else {
		err = a.sw.WriteSummaryLine(a.agg)
	}
	if err == nil {
		err = a.sw.Flush()
	}
	return a.buf.Bytes(), err
}

// ResultTails says when a node builds the result tail of a completed
// records job (coordinator/DESIGN.md, "The result tail"): the operator's
// choice between CPU spent on every job and the first read's latency.
type ResultTails string

// The values of ResultTails (Config.ResultTails; the settings key
// coordinator.result_tails).
const (
	// TailsAtCompletion: every node builds a job's tail when it completes,
	// read or not (the default), so no read, on any node, aggregates it.
	TailsAtCompletion ResultTails = "completion"
	// TailsOnFirstRead: a node's first read of a job aggregates it (the
	// aggregate is kept for the last few jobs read) and asks for its tail,
	// which serves the later reads, also after a restart.
	TailsOnFirstRead ResultTails = "first_read"
	// TailsNever: no tail is built; reads aggregate the job as nodes did
	// before tails existed. A tail the store already holds (built earlier,
	// or carried by a snapshot) is still read while it matches.
	TailsNever ResultTails = "never"
)

// ResultTailsValues are the valid ResultTails, the default first.
var ResultTailsValues = []ResultTails{TailsAtCompletion, TailsOnFirstRead, TailsNever}

// ErrInvalidResultTails: Config.ResultTails is none of ResultTailsValues.
var ErrInvalidResultTails = errors.New("coordinator: result tails must be completion, first_read or never")

// resultTails is t, the default for empty, or ErrInvalidResultTails.
func resultTails(t ResultTails) (ResultTails, error) {
	switch t {
	case "":
		return TailsAtCompletion, nil
	case TailsAtCompletion, TailsOnFirstRead, TailsNever:
		return t, nil
	}
	return "", ErrInvalidResultTails
}

// tailCache keeps the last few tail heads decoded, and the queue of jobs
// whose tail the builder renders.
type tailCache struct {
	mu      sync.Mutex
	heads   map[string]*evalstore.TailHead
	pending map[string]bool // queued or being built
	queue   chan string
	// onRead: a read that finds no tail for its job asks for one
	// (TailsAtCompletion, TailsOnFirstRead).
	onRead bool
	built  atomic.Int64 // tails this node rendered and stored (tests)
	asked  atomic.Int64 // jobs queued for their tail (tests)
}

func newTailCache(policy ResultTails) *tailCache {
	return &tailCache{heads: map[string]*evalstore.TailHead{}, pending: map[string]bool{}, queue: make(chan string, maxTailQueue),
		onRead: policy != TailsNever}
}

// watch makes f tell c the jobs it completes as records when policy
// builds their tails at completion.
func (c *tailCache) watch(f *FSM, policy ResultTails) {
	if policy == TailsAtCompletion {
		f.onRecordsCompleted = c.enqueue
	}
}

// enqueue asks for job's tail once; a full queue drops it (the job's
// first read aggregates it then, and asks again).
func (c *tailCache) enqueue(jobID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[jobID] {
		return
	}
	select {
	case c.queue <- jobID:
		c.pending[jobID] = true
		c.asked.Add(1)
	default:
	}
}

// wanted is a read's request for job's tail, which it did not find
// (missing or stale): queued unless tails are never built.
func (c *tailCache) wanted(jobID string) {
	if c.onRead {
		c.enqueue(jobID)
	}
}

// done says job's tail is no longer queued or being built.
func (c *tailCache) done(jobID string) {
	c.mu.Lock()
	delete(c.pending, jobID)
	c.mu.Unlock()
}

// tailMatches says whether tail h was built from job j's records as the
// log completed them.
func tailMatches(h *evalstore.TailHead, j *evalrecord.Job) bool {
	return h.JobID == j.JobID && h.Records == j.Records && h.Digest == j.ResultDigest && j.ResultDigest != ""
}

// tailOf is job j's stored tail when it matches j (nil: none, or a stale
// one, which is rebuilt). A matching tail stands for the digest walk:
// its builder walked these records and found the log's digest, and a
// completed job's records are never written again.
func (s *service) tailOf(tx *evalstore.Tx, j *evalrecord.Job) (*evalstore.TailHead, error) {
	s.tails.mu.Lock()
	h := s.tails.heads[j.JobID]
	s.tails.mu.Unlock()
	if h != nil && tailMatches(h, j) {
		return h, nil
	}
	h, err := tx.TailHead(j.JobID)
	if errors.Is(err, evalrecord.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h.JobID = j.JobID
	if !tailMatches(h, j) {
		s.tails.wanted(j.JobID)
		return nil, nil
	}
	s.tails.mu.Lock()
	if len(s.tails.heads) >= maxTailHeads {
		clear(s.tails.heads)
	}
	s.tails.heads[j.JobID] = h
	s.tails.mu.Unlock()
	s.markVerified(j)
	return h, nil
}

// caseLinesOf is where job j's case lines come from: its tail (t), else
// its aggregate, built now if this node has none in memory (and its tail
// asked for, unless tails are never built).
func (s *service) caseLinesOf(tx *evalstore.Tx, j *evalrecord.Job, t *evalstore.TailHead, rj *recordJob) (caseLines, error) {
	if t != nil {
		return &tailLines{tx: tx, h: t}, nil
	}
	agg, err := s.aggregate(tx, j, rj)
	if err != nil {
		return nil, err
	}
	s.tails.wanted(j.JobID)
	return newAggLines(agg)
}

// aggregate is job j's aggregate from the cache, else built from its
// records and kept.
func (s *service) aggregate(tx *evalstore.Tx, j *evalrecord.Job, rj *recordJob) (*evalengine.Result, error) {
	if agg := s.records.aggOf(rj); agg != nil {
		return agg, nil
	}
	agg, err := buildAgg(tx, j, rj.p, nil)
	if err != nil {
		return nil, err
	}
	s.records.aggs.Add(1)
	s.records.keep(rj, agg, nil, "")
	return agg, nil
}

// errStopped: the service stopped during a tail's build.
var errStopped = errors.New("coordinator: stopped")

// runTailBuilder renders and stores the tails of the jobs queued, one at
// a time, until quit.
func (s *service) runTailBuilder() {
	for {
		select {
		case <-s.quit:
			return
		case id := <-s.tails.queue:
			start := time.Now()
			err := s.buildTail(id)
			s.tails.done(id)
			switch {
			case err == nil:
				s.n.log.Debug("result tail stored", "job", id, "ms", time.Since(start).Milliseconds())
			case !errors.Is(err, errStopped) && !errors.Is(err, evalstore.ErrTailTooLarge):
				s.n.log.Warn("result tail not stored; reads aggregate the job", "job", id, "err", err)
			}
		}
	}
}

// buildTail renders job id's tail from its verified records (the
// aggregate this node holds, else a new one) and stores it, unless the
// job is not a completed records job or its tail is there already.
func (s *service) buildTail(id string) error {
	return s.n.store.View(func(tx *evalstore.Tx) error {
		j, err := tx.JobByID(id)
		if errors.Is(err, evalrecord.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if j.Phase != evalrecord.PhaseCompleted || j.ResultFormat != evalrecord.ResultRecords {
			return nil
		}
		if h, err := tx.TailHead(id); err == nil && tailMatches(h, j) {
			return nil
		}
		if err := s.verifyRecords(tx, j); err != nil {
			return err
		}
		rj, err := s.records.get(tx, j)
		if err != nil {
			return err
		}
		// An aggregate this node holds is used; one built here is not
		// kept (the tail serves the reads), so building every completed
		// job's tail does not fill memory with aggregates.
		agg := s.records.aggOf(rj)
		if agg == nil {
			if agg, err = buildAgg(tx, j, rj.p, s.quit); err != nil {
				return err
			}
		}
		h, chunks, err := renderTail(j, rj, agg)
		if err != nil {
			return err
		}
		if err := s.n.store.PutTail(h, chunks); err != nil {
			return err
		}
		s.tails.built.Add(1)
		return nil
	})
}

// renderTail renders job j's tail from its aggregate: the bytes its
// stream has for the header, each case line and the summary.
func renderTail(j *evalrecord.Job, rj *recordJob, agg *evalengine.Result) (*evalstore.TailHead, [][]byte, error) {
	var head bytes.Buffer
	hd := streamHeader(rj.p, j)
	if _, err := evalengine.NewStreamWriter(&head, &hd, 0, 0); err != nil {
		return nil, nil, err
	}
	al, err := newAggLines(agg)
	if err != nil {
		return nil, nil, err
	}
	n := al.cases()
	h := &evalstore.TailHead{JobID: j.JobID, Records: j.Records, Digest: j.ResultDigest, Cases: n,
		Header: bytes.Clone(head.Bytes()), Failed: al.rank.Failed, Built: time.Now().UnixNano()}
	var chunks [][]byte
	var chunk []byte
	for k := 0; k <= n; k++ {
		b, err := al.line(k)
		if err != nil {
			return nil, nil, err
		}
		if k == n {
			h.Summary = bytes.Clone(b)
			break
		}
		chunk = append(chunk, b...)
		if (k+1)%evalstore.TailChunkCases == 0 || k == n-1 {
			chunks = append(chunks, chunk)
			chunk = nil
		}
	}
	return h, chunks, nil
}
