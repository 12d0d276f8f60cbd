package coordinator

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// Results as records (coordinator/DESIGN.md). A job completed since
// results stopped being one document stores none: its result is its
// records (evalstore.Finish appends one per accepted outcome, in apply
// order, with a running SHA-256 the completing entry carries), and a node
// serves it as the local run's JSON Lines stream:
//
//	line 0                 the header
//	lines 1..R             one sample line per record, in apply order
//	lines R+1..R+C         one case line per case, in case order
//	line R+C+1             the summary
//
// The sample lines come from the records one page at a time; the case
// lines and the summary are aggregated on the first read that reaches
// them, one case's samples at a time (evalengine.CaseAggregator), and
// the compact aggregate (not its rendered lines) is kept with the job's
// prepared set: each page renders only its own case lines, so reading a
// 100,000-case result aggregates its records once, not once per page. The
// single JSON document is built on read (buildResult) only where it fits
// its bound.

// Bounds of what a node keeps for reading results as records.
const (
	maxRecordJobs       = 4 // prepared sets (and aggregates) kept
	maxRecordDocBytes   = evalengine.MaxExportBytes
	maxRecordDocsCached = 32 << 20
)

// recordJob is what reading one records job needs: its prepared set,
// and once built its compact aggregate (what the case lines and the
// summary render from; O(cases), like the prepared set).
type recordJob struct {
	p      *evalengine.Prepared
	agg    *evalengine.Result
	doc    []byte
	docSum string
}

// recordCache keeps recordJobs for the last few jobs read.
type recordCache struct {
	mu   sync.Mutex
	jobs map[string]*recordJob
	lru  []string
	aggs atomic.Int64 // aggregates built (tests: once per job read)
	sets atomic.Int64 // sets prepared (tests)
}

func (c *recordCache) get(tx *evalstore.Tx, j *evalrecord.Job) (*recordJob, error) {
	c.mu.Lock()
	rj := c.jobs[j.JobID]
	c.mu.Unlock()
	if rj != nil {
		return rj, nil
	}
	set, err := tx.GetSet(j.Scope, j.EvalSetID, j.EvalSetVersion)
	if err != nil {
		return nil, err
	}
	p, err := evalengine.Prepare(set.Body, j.Spec.Criteria, j.Spec.Options)
	if err != nil {
		return nil, err
	}
	c.sets.Add(1)
	rj = &recordJob{p: p}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.jobs[j.JobID]; old != nil {
		return old, nil
	}
	if c.jobs == nil {
		c.jobs = map[string]*recordJob{}
	}
	c.jobs[j.JobID] = rj
	c.lru = append(c.lru, j.JobID)
	for len(c.lru) > maxRecordJobs {
		delete(c.jobs, c.lru[0])
		c.lru = c.lru[1:]
	}
	return rj, nil
}

// setTail keeps rj's tail if the cache has room for it.
func (c *recordCache) keep(rj *recordJob, agg *evalengine.Result, doc []byte, sum string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var docs int
	for _, o := range c.jobs {
		docs += len(o.doc)
	}
	if agg != nil {
		rj.agg = agg
	}
	if doc != nil && docs+len(doc) <= maxRecordDocsCached {
		rj.doc, rj.docSum = doc, sum
	}
}

// peek is job id's recordJob when the cache holds it.
func (c *recordCache) peek(id string) *recordJob {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobs[id]
}

func (c *recordCache) aggOf(rj *recordJob) *evalengine.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return rj.agg
}

func (c *recordCache) docOf(rj *recordJob) ([]byte, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return rj.doc, rj.docSum
}

// recordSample decodes task t's record into its sample in the result.
func recordSample(p *evalengine.Prepared, t *evalrecord.Task) evalengine.SampleResult {
	var s evalengine.SampleResult
	sp := &s
	if t.State != evalrecord.TaskDone || json.Unmarshal(t.Sample, &s) != nil {
		sp = nil
	}
	out, _ := outcomeSample(p, t.Index, t.State, t.Tag, sp)
	return out
}

// streamHeader is the header of job j's stream.
func streamHeader(p *evalengine.Prepared, j *evalrecord.Job) evalengine.StreamHeader {
	return evalengine.NewStreamHeader(p.Set, p.Options.Samples, map[string]string{
		"eval_set": j.Spec.SetDigest, "records": "sha256:" + j.ResultDigest,
	})
}

// buildAgg aggregates job j's case lines and summary from its records:
// case by case, each case's samples read by their task index.
func buildAgg(tx *evalstore.Tx, j *evalrecord.Job, p *evalengine.Prepared, stop <-chan struct{}) (*evalengine.Result, error) {
	agg, err := evalengine.NewCaseAggregator(p.Set, p.Metrics, p.Options)
	if err != nil {
		return nil, err
	}
	cases, per := len(p.Set.Cases), p.Options.Samples
	samples := make([]evalengine.SampleResult, per)
	for ci := range cases {
		if ci%1024 == 0 && stop != nil {
			select {
			case <-stop:
				return nil, errStopped
			default:
			}
		}
		for si := range per {
			idx := si*cases + ci // api.TaskIndex's inverse
			t, err := tx.Task(j.JobID, idx)
			if errors.Is(err, evalrecord.ErrNotFound) {
				t = &evalrecord.Task{JobID: j.JobID, Index: idx, State: evalrecord.TaskFailed}
			} else if err != nil {
				return nil, err
			}
			samples[si] = recordSample(p, t)
		}
		if err := agg.Add(samples); err != nil {
			return nil, err
		}
	}
	res, err := agg.Result(time.Duration(j.FinishedAt-j.StartedAt) * time.Millisecond)
	if err != nil {
		return nil, err
	}
	markNotEvaluated(res, j)
	return res, nil
}

// recordLines writes lines [from, ...) of job j's stream into a page of
// at most limit bytes and maxLines lines (0: no count; at least one
// line), and returns the next line. With the job's tail (t) the header,
// case lines and summary come from it; prep gives the prepared set
// (sample lines, and every line without a tail).
func (s *service) recordLines(tx *evalstore.Tx, j *evalrecord.Job, t *evalstore.TailHead, prep func() (*recordJob, error), from int64, limit int, maxLines int64) ([]byte, int64, error) {
	var page bytes.Buffer
	var line bytes.Buffer
	sw, err := evalengine.NewStreamWriter(&line, nil, 0, 0)
	if err != nil {
		return nil, 0, err
	}
	next := from
	// counted: the page has its maxLines lines.
	counted := func() bool { return maxLines > 0 && next-from >= maxLines }
	// add appends b unless the page is full.
	add := func(b []byte) bool {
		if page.Len() > 0 && page.Len()+len(b) > limit {
			return false
		}
		page.Write(b)
		return true
	}
	if next == 0 {
		if t != nil {
			page.Write(t.Header)
		} else {
			rj, err := prep()
			if err != nil {
				return nil, 0, err
			}
			h := streamHeader(rj.p, j)
			if _, err := evalengine.NewStreamWriter(&page, &h, 0, 0); err != nil {
				return nil, 0, err
			}
		}
		next = 1
	}
	full := false
	if next <= j.Records && !counted() {
		rj, err := prep()
		if err != nil {
			return nil, 0, err
		}
		cases := len(rj.p.Set.Cases)
		err = tx.Records(j.JobID, next-1, func(seq int64, t *evalrecord.Task) (bool, error) {
			if counted() {
				full = true
				return false, nil
			}
			smp := recordSample(rj.p, t)
			ci, _ := api.TaskIndex(t.Index, cases)
			if err := sw.WriteSample(ci, &smp); err != nil {
				return false, err
			}
			if err := sw.Flush(); err != nil {
				return false, err
			}
			ok := add(line.Bytes())
			line.Reset()
			if !ok {
				full = true
				return false, nil
			}
			next = seq + 2
			return true, nil
		})
		if err != nil {
			return nil, 0, err
		}
		if !full && !counted() && next <= j.Records {
			return nil, 0, api.Errorf(api.CodeResultDigestMismatch, "job %s: %d of %d records", j.JobID, next-1, j.Records)
		}
	}
	if full || counted() {
		return page.Bytes(), next, nil
	}
	var rj *recordJob
	if t == nil {
		if rj, err = prep(); err != nil {
			return nil, 0, err
		}
	}
	cl, err := s.caseLinesOf(tx, j, t, rj)
	if err != nil {
		return nil, 0, err
	}
	for k := next - 1 - j.Records; k <= int64(cl.cases()) && !counted(); k++ {
		b, err := cl.line(int(k))
		if err != nil {
			return nil, 0, err
		}
		if !add(b) {
			break
		}
		next++
	}
	return page.Bytes(), next, nil
}

// recordsResult answers one page of a records job's result: lines of its
// stream (Format jsonl), or bytes of its document, built here on read and
// only where it fits the document bound.
func (s *service) recordsResult(tx *evalstore.Tx, req *api.Request, j *evalrecord.Job) (*api.Reply, error) {
	if req.Offset < 0 || req.MaxBytes < 0 || req.Limit < 0 {
		return nil, api.Errorf(api.CodeInvalidRequest, "result offset %d / max_bytes %d / limit %d", req.Offset, req.MaxBytes, req.Limit)
	}
	limit := s.pageLimit(req.MaxBytes)
	if req.Format == api.ResultJSONL {
		t, err := s.tailOf(tx, j)
		if err != nil {
			return nil, err
		}
		var rj *recordJob
		prep := func() (*recordJob, error) {
			if rj != nil {
				return rj, nil
			}
			if err := s.verifyRecords(tx, j); err != nil {
				return nil, err
			}
			rj, err = s.records.get(tx, j)
			return rj, err
		}
		var cases int
		if t != nil {
			cases = t.Cases
		} else if _, err := prep(); err != nil {
			return nil, err
		} else {
			cases = len(rj.p.Set.Cases)
		}
		lines := 1 + j.Records + int64(cases) + 1
		if req.Offset >= lines {
			return nil, api.Errorf(api.CodeInvalidRequest, "result line %d outside a %d-line stream", req.Offset, lines)
		}
		page, next, err := s.recordLines(tx, j, t, prep, req.Offset, limit, int64(req.Limit))
		if err != nil {
			return nil, err
		}
		return &api.Reply{Result: page, NextOffset: next, ResultSize: lines, ResultDigest: j.ResultDigest, ResultFormat: api.ResultJSONL}, nil
	}
	if err := s.verifyRecords(tx, j); err != nil {
		return nil, err
	}
	rj, err := s.records.get(tx, j)
	if err != nil {
		return nil, err
	}
	doc, sum := s.records.docOf(rj)
	if doc == nil {
		if j.RecordBytes > maxRecordDocBytes {
			return nil, tooLarge(j)
		}
		br, err := buildResult(tx, j, j.FinishedAt, nil)
		if err != nil {
			return nil, err
		}
		if br.failed != "" {
			return nil, api.Errorf(br.failed, "job %s: the result does not build", j.JobID)
		}
		if len(br.doc) > maxRecordDocBytes {
			return nil, tooLarge(j)
		}
		doc, sum = br.doc, canonjson.DigestBytes(br.doc)
		s.records.keep(rj, nil, doc, sum)
	}
	if req.Offset > int64(len(doc)) {
		return nil, api.Errorf(api.CodeInvalidRequest, "result offset %d outside a %d-byte result", req.Offset, len(doc))
	}
	end := min(int64(len(doc)), req.Offset+int64(limit))
	return &api.Reply{Result: doc[req.Offset:end], NextOffset: end, ResultSize: int64(len(doc)), ResultDigest: sum}, nil
}

// resultSamples answers result_samples: the sample lines of the tasks
// req names of a completed records job, the same lines its stream has
// (recordSamples), so a reader of one case reads that case's samples
// only. The records are verified against the log's digest first, as
// for any read of the stream (once per node and job).
func (s *service) resultSamples(req *api.Request) *api.Reply {
	if n := len(req.Tasks); n < 1 || n > api.MaxResultTasks {
		return fail(api.Errorf(api.CodeInvalidRequest, "tasks: %d task indexes; a request names 1..%d", n, api.MaxResultTasks))
	}
	if req.MaxBytes < 0 {
		return fail(api.Errorf(api.CodeInvalidRequest, "max_bytes %d", req.MaxBytes))
	}
	return s.view(req, func(tx *evalstore.Tx) (*api.Reply, error) {
		j, err := completedRecordsJob(tx, req)
		if err != nil {
			return nil, err
		}
		sc, err := s.sampleCasesOf(tx, j)
		if err != nil {
			return nil, err
		}
		if err := checkTasks(req.Tasks, sc.cases*sc.samples); err != nil {
			return nil, err
		}
		page, n, err := recordSamples(tx, j, sc, req.Tasks, s.pageLimit(req.MaxBytes))
		if err != nil {
			return nil, err
		}
		lines := 1 + j.Records + int64(sc.cases) + 1
		return &api.Reply{Result: page, NextOffset: int64(n), ResultSize: lines, ResultDigest: j.ResultDigest, ResultFormat: api.ResultJSONL}, nil
	})
}

// sampleCases is what rendering a records job's sample lines needs of
// its set: the case count and samples per case, each case's id (a
// record's sample stands only for its own case), and for a sample that is
// not its record's (a lost task, a sample that does not decode or names
// another case or sample) the error sample the set gives. A node holding
// the job's prepared set takes all of it from there; otherwise, with the
// job's tail, the ids come from the tail's case lines (the case line of
// case i names the set's case i: the tail was rendered from an aggregate
// of this set) and the set is parsed only if an error sample is needed,
// so reading one case's samples does not parse a 100,000-case set.
type sampleCases struct {
	cases, samples int
	rj             *recordJob // the prepared set, once there
	tail           *tailLines // the job's tail, when rj is not there
	prep           func() (*recordJob, error)
}

// sampleCasesOf is job j's sampleCases: its prepared set when this node
// holds it, else its tail (when its counts are the job's), else its set
// prepared now.
func (s *service) sampleCasesOf(tx *evalstore.Tx, j *evalrecord.Job) (*sampleCases, error) {
	sc := &sampleCases{}
	sc.prep = func() (*recordJob, error) {
		if sc.rj != nil {
			return sc.rj, nil
		}
		if err := s.verifyRecords(tx, j); err != nil {
			return nil, err
		}
		rj, err := s.records.get(tx, j)
		if err != nil {
			return nil, err
		}
		sc.rj = rj
		return rj, nil
	}
	if rj := s.records.peek(j.JobID); rj == nil {
		t, err := s.tailOf(tx, j)
		if err != nil {
			return nil, err
		}
		if t != nil && t.Cases == j.Spec.Cases && j.Spec.Samples > 0 {
			sc.cases, sc.samples, sc.tail = t.Cases, j.Spec.Samples, &tailLines{tx: tx, h: t}
			return sc, nil
		}
	}
	rj, err := sc.prep()
	if err != nil {
		return nil, err
	}
	sc.cases, sc.samples = len(rj.p.Set.Cases), rj.p.Options.Samples
	return sc, nil
}

// sample is task t's sample in the result (recordSample).
func (sc *sampleCases) sample(t *evalrecord.Task) (evalengine.SampleResult, error) {
	if sc.rj == nil {
		ci, si := api.TaskIndex(t.Index, sc.cases)
		var smp evalengine.SampleResult
		if t.State == evalrecord.TaskDone && json.Unmarshal(t.Sample, &smp) == nil && smp.SampleIndex == si {
			id, err := sc.caseID(ci)
			if err != nil {
				return smp, err
			}
			if smp.CaseID == id {
				return smp, nil
			}
		}
	}
	rj, err := sc.prep()
	if err != nil {
		return evalengine.SampleResult{}, err
	}
	return recordSample(rj.p, t), nil
}

// caseID is the id of case ci, from its line in the tail.
func (sc *sampleCases) caseID(ci int) (string, error) {
	b, err := sc.tail.line(ci)
	if err != nil {
		return "", err
	}
	var line struct {
		CaseIndex int `json:"case_index"`
		Case      struct {
			CaseID string `json:"case_id"`
		} `json:"case"`
	}
	if err := json.Unmarshal(b, &line); err != nil || line.CaseIndex != ci || line.Case.CaseID == "" {
		return "", api.Errorf(api.CodeResultDigestMismatch, "job %s: its result tail's case line %d does not read", sc.tail.h.JobID, ci)
	}
	return line.Case.CaseID, nil
}

// completedRecordsJob is the job req names, in req's scope, when it is
// a completed records job (result_samples, result_cases); otherwise the
// answer result gives for that phase, or invalid_eval_request for a job
// completed as one document.
func completedRecordsJob(tx *evalstore.Tx, req *api.Request) (*evalrecord.Job, error) {
	j, err := tx.GetJob(req.Scope, req.JobID)
	if err != nil {
		return nil, err
	}
	switch {
	case j.Phase == evalrecord.PhaseCompleted && j.ResultFormat == evalrecord.ResultRecords:
		return j, nil
	case j.Phase == evalrecord.PhaseCompleted:
		return nil, api.Errorf(api.CodeInvalidRequest, "job %s completed before results were kept as records: read it as one document", j.JobID)
	case !j.Phase.Terminal():
		return nil, api.Errorf(api.CodeResultNotReady, "")
	default:
		return nil, &api.Error{Code: api.CodeJobTerminal, Phase: string(j.Phase), Reason: j.Reason}
	}
}

// resultCases answers result_cases: the case lines of rows
// req.Offset.. (req.Limit of them) of a completed records job's
// failures-first order, from its tail (or its aggregate), so a page of
// failed cases costs its rows, not the case lines before them. A reply
// holds whole lines up to the page size, at least one.
func (s *service) resultCases(req *api.Request) *api.Reply {
	switch {
	case req.Limit < 1 || req.Limit > api.MaxResultCases:
		return fail(api.Errorf(api.CodeInvalidRequest, "limit: %d rows; a request names 1..%d", req.Limit, api.MaxResultCases))
	case req.Offset < 0:
		return fail(api.Errorf(api.CodeInvalidRequest, "offset: %d is not a row", req.Offset))
	case req.MaxBytes < 0:
		return fail(api.Errorf(api.CodeInvalidRequest, "max_bytes %d", req.MaxBytes))
	}
	limit := s.pageLimit(req.MaxBytes)
	return s.view(req, func(tx *evalstore.Tx) (*api.Reply, error) { return s.casesPage(tx, req, limit) })
}

// casesPage is result_cases' answer: a page of at most limit bytes.
func (s *service) casesPage(tx *evalstore.Tx, req *api.Request, limit int) (*api.Reply, error) {
	j, err := completedRecordsJob(tx, req)
	if err != nil {
		return nil, err
	}
	t, err := s.tailOf(tx, j)
	if err != nil {
		return nil, err
	}
	var rj *recordJob
	if t == nil {
		if err := s.verifyRecords(tx, j); err != nil {
			return nil, err
		}
		if rj, err = s.records.get(tx, j); err != nil {
			return nil, err
		}
	}
	cl, err := s.caseLinesOf(tx, j, t, rj)
	if err != nil {
		return nil, err
	}
	n := cl.cases()
	if req.Offset >= int64(n) {
		return nil, api.Errorf(api.CodeInvalidRequest, "offset: row %d of a result of %d cases", req.Offset, n)
	}
	var page bytes.Buffer
	row, end := int(req.Offset), min(int(req.Offset)+req.Limit, n)
	for ; row < end; row++ {
		ci := 0
		if f := cl.failed(); row >= f {
			ci = cl.passedAt(row - f)
		} else {
			ci = cl.failedAt(row)
		}
		b, err := cl.line(ci)
		if err != nil {
			return nil, err
		}
		if page.Len() > 0 && page.Len()+len(b) > limit {
			break
		}
		page.Write(b)
	}
	lines := 1 + j.Records + int64(n) + 1
	return &api.Reply{Result: page.Bytes(), NextOffset: int64(row), ResultSize: lines, ResultDigest: j.ResultDigest, ResultFormat: api.ResultJSONL}, nil
}

// checkTasks checks the task indexes of a result_samples request against
// a job of total tasks.
func checkTasks(tasks []int, total int) error {
	for i, idx := range tasks {
		if idx < 0 || idx >= total {
			return api.Errorf(api.CodeInvalidRequest, "tasks[%d]: %d is not a task of the job (0..%d)", i, idx, total-1)
		}
	}
	return nil
}

// recordSamples writes the sample lines of tasks, in their order, into a
// page of at most limit bytes (at least one line), and returns how many
// it wrote. A task's line is the one its record has in the stream
// (recordLines): the task read by its index, as the records read it.
func recordSamples(tx *evalstore.Tx, j *evalrecord.Job, sc *sampleCases, tasks []int, limit int) ([]byte, int, error) {
	var page bytes.Buffer
	sw, err := evalengine.NewStreamWriter(&page, nil, 0, 0)
	if err != nil {
		return nil, 0, err
	}
	cases := sc.cases
	for n, idx := range tasks {
		t, err := tx.Task(j.JobID, idx)
		if errors.Is(err, evalrecord.ErrNotFound) {
			// Every task of a records job has its record: the store
			// does not hold what the log completed.
			return nil, 0, api.Errorf(api.CodeResultDigestMismatch, "job %s: task %d has no record", j.JobID, idx)
		} else if err != nil {
			return nil, 0, err
		}
		smp, err := sc.sample(t)
		if err != nil {
			return nil, 0, err
		}
		ci, _ := api.TaskIndex(idx, cases)
		before := page.Len()
		if err := sw.WriteSample(ci, &smp); err != nil {
			return nil, 0, err
		}
		if err := sw.Flush(); err != nil {
			return nil, 0, err
		}
		if n > 0 && page.Len() > limit {
			page.Truncate(before)
			return page.Bytes(), n, nil
		}
	}
	return page.Bytes(), len(tasks), nil
}

// tooLarge is the answer for a document over its bound: as locally, it
// names the jsonl way.
func tooLarge(j *evalrecord.Job) error {
	return api.Errorf(evalengine.CodeReportTooLarge, "job %s: %d samples over the %d-byte result document (read it as jsonl: adk eval run --cluster ... --format jsonl --output FILE, or adk eval report %s --format markdown|junit|sarif)",
		j.JobID, j.Records, maxRecordDocBytes, j.JobID)
}

// verifyRecords walks job j's records once per node and checks their
// running hash against the digest the log completed the job with: records
// that differ are never served.
func (s *service) verifyRecords(tx *evalstore.Tx, j *evalrecord.Job) error {
	key := "records\x00" + j.JobID
	s.digestMu.Lock()
	_, ok := s.digests[key]
	s.digestMu.Unlock()
	if ok {
		return nil
	}
	// A tail of these records stands for the walk (tailOf).
	if t, err := tx.TailHead(j.JobID); err == nil && tailMatches(t, j) {
		s.markVerified(j)
		return nil
	}
	h := sha256.New()
	var buf []byte
	var n int64
	if err := tx.Records(j.JobID, 0, func(_ int64, t *evalrecord.Task) (bool, error) {
		buf = evalstore.AppendRecord(buf[:0], t.Index, t.State, t.Tag, t.Sample)
		h.Write(buf)
		n++
		return true, nil
	}); err != nil {
		return err
	}
	if d := hex.EncodeToString(h.Sum(nil)); n != j.Records || d != j.ResultDigest {
		return api.Errorf(api.CodeResultDigestMismatch, "coordinator %s holds %d records of job %s with sha-256 %s; the log says %d, %s", s.n.cfg.ID, n, j.JobID, d, j.Records, j.ResultDigest)
	}
	s.markVerified(j)
	return nil
}

// markVerified records that job j's records were found to be the log's.
func (s *service) markVerified(j *evalrecord.Job) {
	s.digestMu.Lock()
	if len(s.digests) >= maxCachedDigests {
		clear(s.digests)
	}
	s.digests["records\x00"+j.JobID] = j.ResultDigest
	s.digestMu.Unlock()
}

// baselineDoc builds the document of a records job a baseline copies,
// inside the baseline entry's apply on every node (the same bytes
// everywhere: the build depends only on the log). It is bounded like
// any result document read.
func baselineDoc(tx *evalstore.Tx) func(*evalrecord.Job) ([]byte, error) {
	return func(j *evalrecord.Job) ([]byte, error) {
		if j.RecordBytes > maxRecordDocBytes {
			return nil, tooLarge(j)
		}
		br, err := buildResult(tx, j, j.FinishedAt, nil)
		if err != nil {
			return nil, &evalstore.StorageError{Err: err}
		}
		if br.failed != "" {
			return nil, api.Errorf(br.failed, "job %s: the result does not build", j.JobID)
		}
		if len(br.doc) > maxRecordDocBytes {
			return nil, tooLarge(j)
		}
		return br.doc, nil
	}
}

// WriteResultStream writes job jobID's result stream as this node serves
// it, every page from this node's own store (tests compare nodes with it;
// clients use the service, client.ResultStream).
func (n *Node) WriteResultStream(scope, jobID string, w io.Writer, pageBytes int) error {
	for next := int64(0); ; {
		rep := n.svc.result(&api.Request{Scope: scope, JobID: jobID, Offset: next, MaxBytes: pageBytes, Format: api.ResultJSONL})
		if rep.Err != nil {
			return rep.Err
		}
		if _, err := w.Write(rep.Result); err != nil {
			return err
		}
		if next = rep.NextOffset; next >= rep.ResultSize {
			return nil
		}
	}
}

// WriteResultSamples writes the sample lines of tasks of job jobID as
// this node serves them (result_samples), every page from this node's
// own store (tests compare nodes with it; clients use the service,
// client.ResultSamples).
func (n *Node) WriteResultSamples(scope, jobID string, tasks []int, w io.Writer, pageBytes int) error {
	for len(tasks) > 0 {
		rep := n.svc.resultSamples(&api.Request{Scope: scope, JobID: jobID, Tasks: tasks, MaxBytes: pageBytes})
		if rep.Err != nil {
			return rep.Err
		}
		if rep.NextOffset < 1 || rep.NextOffset > int64(len(tasks)) {
			return api.Errorf(api.CodeResultDigestMismatch, "a page answers %d of %d tasks", rep.NextOffset, len(tasks))
		}
		if _, err := w.Write(rep.Result); err != nil {
			return err
		}
		tasks = tasks[rep.NextOffset:]
	}
	return nil
}
