package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/fadcedab/adk/coordinator/api"
	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

// A completed job's result document stays out of the Raft log: the
// completing transition carries its digest and size, and every node's FSM
// builds the document from the outcomes it already applied (the finish
// entries; a snapshot holds them too), checks it against the digest and
// stores it (coordinator/DESIGN.md, "Results outside the log").

// builtResult is one build of a job's result document.
type builtResult struct {
	doc []byte
	// failed is the code a job that cannot complete fails with (its set or
	// options no longer prepare, aggregation or encoding failed): the
	// leader then proposes failed instead; a follower that fails to build
	// what the leader built stops (resultMismatchError).
	failed string
	tm     completeTiming
}

// buildResult builds job j's result document as of finishedAt (epoch ms,
// the completing transition's): evalengine.Aggregate, the function a local
// run uses, over one sample per task; lost, timed-out or cancelled tasks
// become error samples with their tag. cached holds outcomes already
// decoded and encoded (sampleCache); the others are read from tx and
// decoded. Every node builds the same bytes from the same applied log,
// whatever its cache held: that is what lets the log carry only the
// digest.
func buildResult(tx *evalstore.Tx, j *evalrecord.Job, finishedAt int64, cached map[int]cachedOutcome) (builtResult, error) {
	var br builtResult
	tm := &br.tm
	mark := time.Now()
	lap := func(d *time.Duration) {
		t := time.Now()
		*d, mark = t.Sub(mark), t
	}
	set, err := tx.GetSet(j.Scope, j.EvalSetID, j.EvalSetVersion)
	if err != nil {
		return br, err
	}
	p, err := evalengine.Prepare(set.Body, j.Spec.Criteria, j.Spec.Options)
	if err != nil {
		br.failed = api.AsError(err).Code
		return br, nil
	}
	total := j.Progress.Total
	cases := len(p.Set.Cases)
	samples := make([]evalengine.SampleResult, total)
	enc := make([][]byte, total)
	// put makes task idx's outcome samples[idx]: its sample if it is done
	// and decoded as that (case, sample), else an error sample with its
	// tag. It reports which.
	put := func(idx int, state, tag string, s *evalengine.SampleResult) bool {
		if idx >= len(samples) {
			return false
		}
		var ok bool
		samples[idx], ok = outcomeSample(p, idx, state, tag, s)
		return ok
	}
	var missing []int
	for idx := range total {
		c, ok := cached[idx]
		if !ok {
			missing = append(missing, idx)
			continue
		}
		if put(idx, c.state, c.tag, c.sample) {
			// A cached sample used as is comes with its encoding: the
			// document splices it instead of encoding it again.
			enc[idx] = c.enc
		}
	}
	tm.cached = len(missing) == 0
	// The outcomes not cached are read from the store: point reads when
	// few are missing, one scan of the job's tasks otherwise.
	tasks := make([]*evalrecord.Task, 0, len(missing))
	if len(missing) > 0 && len(missing) < total/2 {
		for _, idx := range missing {
			t, err := tx.Task(j.JobID, idx)
			if errors.Is(err, evalrecord.ErrNotFound) {
				t = &evalrecord.Task{JobID: j.JobID, Index: idx, State: evalrecord.TaskFailed}
			} else if err != nil {
				return br, err
			}
			tasks = append(tasks, t)
		}
	} else if len(missing) > 0 {
		all, err := tx.Tasks(j.JobID)
		if err != nil {
			return br, err
		}
		seen := make([]bool, total)
		for i := range all {
			if t := &all[i]; t.Index >= 0 && t.Index < total && !seen[t.Index] {
				if _, ok := cached[t.Index]; !ok {
					seen[t.Index] = true
					tasks = append(tasks, t)
				}
			}
		}
		for _, idx := range missing {
			if !seen[idx] {
				tasks = append(tasks, &evalrecord.Task{JobID: j.JobID, Index: idx, State: evalrecord.TaskFailed})
			}
		}
	}
	lap(&tm.read)
	// The samples are decoded on every core: ~12 µs a sample on one core.
	parts := min(runtime.GOMAXPROCS(0), max(1, len(tasks)/256))
	var wg sync.WaitGroup
	for w := range parts {
		wg.Go(func() {
			for i := w; i < len(tasks); i += parts {
				t := tasks[i]
				var s evalengine.SampleResult
				sp := &s
				if t.State != evalrecord.TaskDone || json.Unmarshal(t.Sample, &s) != nil {
					sp = nil
				}
				put(t.Index, t.State, t.Tag, sp)
			}
		})
	}
	wg.Wait()
	lap(&tm.decode)
	dur := time.Duration(finishedAt-j.StartedAt) * time.Millisecond
	res, err := evalengine.Aggregate(p.Set, p.Metrics, p.Options, samples, dur)
	if err != nil {
		br.failed = api.AsError(err).Code
		return br, nil
	}
	markNotEvaluated(res, j)
	lap(&tm.aggregate)
	// Its own encoder, not json.Marshal: the latter would validate and
	// compact the several MiB it returns, for the same bytes.
	doc, err := res.MarshalJSONWith(func(ci, si int) []byte {
		if i := si*cases + ci; i < len(enc) { // api.TaskIndex's inverse
			return enc[i]
		}
		return nil
	})
	if err != nil {
		br.failed = "evaluation_result_encoding_failed"
		return br, nil
	}
	lap(&tm.encode)
	br.doc = doc
	return br, nil
}

// markNotEvaluated lists in res's metadata the cases job j's submit left
// out (evalrecord.JobSpec.NotEvaluated), as a local run lists them.
func markNotEvaluated(res *evalengine.Result, j *evalrecord.Job) {
	if len(j.Spec.NotEvaluated) == 0 {
		return
	}
	cases := make([][2]string, len(j.Spec.NotEvaluated))
	for i, c := range j.Spec.NotEvaluated {
		cases[i] = [2]string{c.CaseID, c.Reason}
	}
	evalengine.MarkNotEvaluatedCases(res, cases)
}

// outcomeSample is task idx's sample in the result: s if the task is
// done and s decoded as that (case, sample), else an error sample with
// the task's tag. It reports which.
func outcomeSample(p *evalengine.Prepared, idx int, state, tag string, s *evalengine.SampleResult) (evalengine.SampleResult, bool) {
	cases := len(p.Set.Cases)
	ci, si := api.TaskIndex(idx, cases)
	if state == evalrecord.TaskDone && s != nil && s.CaseID == p.Set.Cases[ci].ID && s.SampleIndex == si {
		return *s, true
	}
	if tag == "" {
		tag = evalengine.TagWorkerLost
		if state == evalrecord.TaskCancelled {
			tag = evalengine.TagCancelled
		}
	}
	return evalengine.ErrorSample(p.Set, ci, si, tag), false
}

// resultMismatchError is a follower's build of a completed job's result
// that does not match the digest and size in the log: a determinism bug,
// or coordinators of different builds. The node cannot hold the document
// every other node holds, so it stops (fail closed) rather than serve
// another or none; CodeResultDigestMismatch is its exit code.
type resultMismatchError struct {
	job          string
	want, got    string
	size, gotLen int64
	failed       string
	records      bool // a records completion: sizes count records
}

func (e *resultMismatchError) Error() string {
	if e.failed != "" {
		return fmt.Sprintf("job %s: this node cannot build the result the log completed (%s)", e.job, e.failed)
	}
	if e.records {
		return fmt.Sprintf("job %s: this node holds %d result records with sha-256 %s; the log says %d, %s", e.job, e.gotLen, e.got, e.size, e.want)
	}
	return fmt.Sprintf("job %s: this node built a %d-byte result with sha-256 %s; the log says %d bytes, %s", e.job, e.gotLen, e.got, e.size, e.want)
}

// prebuilt is the leader's own build of a result it is completing: its
// FSM stores these bytes instead of building them again.
type prebuilt struct {
	digest string
	doc    []byte
}

// offerResult hands the FSM the document the leader built for job; the
// FSM uses it once, if the applied entry has the same digest.
func (f *FSM) offerResult(job, digest string, doc []byte) {
	f.prebuiltMu.Lock()
	if f.prebuilt == nil {
		f.prebuilt = map[string]prebuilt{}
	}
	f.prebuilt[job] = prebuilt{digest: digest, doc: doc}
	f.prebuiltMu.Unlock()
}

// withdrawResult forgets what offerResult left (the proposal ended).
func (f *FSM) withdrawResult(job string) {
	f.prebuiltMu.Lock()
	delete(f.prebuilt, job)
	f.prebuiltMu.Unlock()
}

func (f *FSM) takePrebuilt(job string) (prebuilt, bool) {
	f.prebuiltMu.Lock()
	defer f.prebuiltMu.Unlock()
	p, ok := f.prebuilt[job]
	delete(f.prebuilt, job)
	return p, ok
}

// resultFor returns the document a completion entry c (digest only)
// stands for, built on this node, or nil when the job is not running any
// more (the transition then answers its error). A build that does not
// match the log is a *evalstore.StorageError wrapping a
// *resultMismatchError: the FSM stops and does not record the entry.
func (f *FSM) resultFor(tx *evalstore.Tx, c *transitionCmd) ([]byte, error) {
	j, err := tx.GetJob(c.Scope, c.JobID)
	if err != nil || j.Phase != evalrecord.PhaseRunning {
		return nil, nil
	}
	if p, ok := f.takePrebuilt(c.JobID); ok && p.digest == c.Patch.ResultDigest && int64(len(p.doc)) == c.Patch.ResultSize {
		return p.doc, nil
	}
	start := time.Now()
	br, err := buildResult(tx, j, c.Patch.FinishedAt, f.samples.outcomes(c.JobID))
	if err != nil {
		return nil, &evalstore.StorageError{Err: fmt.Errorf("build the result of job %s: %w", c.JobID, err)}
	}
	m := &resultMismatchError{job: c.JobID, want: c.Patch.ResultDigest, size: c.Patch.ResultSize, failed: br.failed, gotLen: int64(len(br.doc))}
	if br.failed == "" && m.gotLen == m.size {
		m.got = canonjson.DigestBytes(br.doc)
	}
	if m.got != m.want {
		return nil, &evalstore.StorageError{Err: m}
	}
	t := br.tm
	f.log.Info("result built", "job", c.JobID, "result_bytes", len(br.doc), "cached", t.cached,
		"read_ms", ms(t.read), "decode_ms", ms(t.decode), "aggregate_ms", ms(t.aggregate), "encode_ms", ms(t.encode),
		"total_ms", ms(time.Since(start)))
	return br.doc, nil
}

// checkRecords checks a records completion c (results as records) against
// this node's records of the job: a count or running hash that differs is
// a *evalstore.StorageError wrapping a *resultMismatchError, and the FSM
// stops, as for a document that does not match.
func (f *FSM) checkRecords(tx *evalstore.Tx, c *transitionCmd) error {
	j, err := tx.GetJob(c.Scope, c.JobID)
	if err != nil || j.Phase != evalrecord.PhaseRunning {
		return nil // the transition answers its error
	}
	d, err := evalstore.RecordsDigest(j)
	if err != nil {
		return &evalstore.StorageError{Err: err}
	}
	if j.Records != c.Patch.ResultRecords || d != c.Patch.ResultDigest {
		return &evalstore.StorageError{Err: &resultMismatchError{job: c.JobID, want: c.Patch.ResultDigest, got: d,
			size: c.Patch.ResultRecords, gotLen: j.Records, records: true}}
	}
	return nil
}
