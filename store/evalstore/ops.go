package evalstore

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/fadcedab/adk/store/evalrecord"
	"reflect"

	"github.com/dgraph-io/badger/v4"
	"github.com/fadcedab/adk/internal/canonjson"
	"github.com/klauspost/compress/s2"
)

// --- counters and byte accounting ---

func (tx *Tx) counter(name string) (uint64, error) { return getUint(tx.txn, metaKey(name)) }

func (tx *Tx) addCounter(name string, delta int64) error {
	v, err := tx.counter(name)
	if err != nil {
		return err
	}
	nv := int64(v) + delta
	if nv < 0 {
		nv = 0
	}
	return putUint(tx.txn, metaKey(name), uint64(nv))
}

// Usage returns the bytes charged to scope and to the whole store.
func (tx *Tx) Usage(scope string) (scopeBytes, total int64, err error) {
	s, err := getUint(tx.txn, usageKey(scope))
	if err != nil {
		return 0, 0, err
	}
	t, err := tx.counter("total_bytes")
	return int64(s), int64(t), err
}

// charge adds delta bytes to scope and total. Growth is checked against
// the quotas unless exempt (terminal writes use the reserved headroom).
func (tx *Tx) charge(scope string, delta int64, exempt bool) error {
	s, t, err := tx.Usage(scope)
	if err != nil {
		return err
	}
	if delta > 0 && !exempt {
		if s+delta > tx.lim.MaxScopeBytes {
			return newErr(evalrecord.CodeScopeBytes, "")
		}
		if t+delta > tx.lim.MaxTotalBytes {
			return newErr(evalrecord.CodeTotalBytes, "")
		}
	}
	s, t = max(s+delta, 0), max(t+delta, 0)
	if err := putUint(tx.txn, usageKey(scope), uint64(s)); err != nil {
		return err
	}
	return putUint(tx.txn, metaKey("total_bytes"), uint64(t))
}

func (tx *Tx) checkRecord(n int) error {
	if int64(n) > tx.lim.MaxRecordBytes {
		return newErr(evalrecord.CodeRecordBytes, "")
	}
	return nil
}

// --- sets ---

// GetSet returns one set revision (with Body).
func (tx *Tx) GetSet(scope, id, version string) (*evalrecord.SetRecord, error) {
	var s evalrecord.SetRecord
	ok, err := getRecord(tx.txn, setKey(scope, id, version), &s)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, evalrecord.ErrNotFound
	}
	return &s, nil
}

// PutSet stores an immutable revision. The same id, version and digest is
// idempotent (created=false); another digest is eval_set_revision_conflict.
// The digest must be the SHA-256 of Body, which must be canonical JSON.
func (tx *Tx) PutSet(s evalrecord.SetRecord) (created bool, err error) {
	if err := ValidScope(s.Scope); err != nil {
		return false, err
	}
	if s.ID == "" || s.Version == "" || len(s.ID) > 0xffff || len(s.Version) > 0xffff {
		return false, newErr(evalrecord.CodeInvalidStoreRecord, "set id/version")
	}
	if canonjson.DigestBytes(s.Body) != s.Digest {
		return false, newErr(evalrecord.CodeInvalidStoreRecord, "set digest")
	}
	old, err := tx.GetSet(s.Scope, s.ID, s.Version)
	switch {
	case err == nil:
		if old.Digest != s.Digest {
			return false, evalrecord.ErrRevisionConflict
		}
		return false, nil
	case !errors.Is(err, evalrecord.ErrNotFound):
		return false, err
	}
	n, err := tx.counter("sets")
	if err != nil {
		return false, err
	}
	if int(n) >= tx.lim.MaxSets {
		return false, newErr(evalrecord.CodeSetCapacity, "")
	}
	k := setKey(s.Scope, s.ID, s.Version)
	v, err := encode(&s)
	if err != nil {
		return false, err
	}
	if err := tx.checkRecord(len(k) + len(v)); err != nil {
		return false, err
	}
	if err := tx.charge(s.Scope, int64(len(k)+len(v)), false); err != nil {
		return false, err
	}
	if err := tx.txn.Set(k, v); err != nil {
		return false, err
	}
	return true, tx.addCounter("sets", 1)
}

// SetCursor encodes the injective paging cursor of a set revision: hex of
// the 16-bit-length-prefixed id followed by the version.
func SetCursor(id, version string) string { return hex.EncodeToString(setSuffix(id, version)) }

func (tx *Tx) pageLimit(limit int) (int, error) {
	if limit == 0 {
		limit = tx.lim.MaxPageLimit
	}
	if limit < 1 || limit > tx.lim.MaxPageLimit || limit > 1000 {
		return 0, newErr(evalrecord.CodeInvalidPageOptions, "limit")
	}
	return limit, nil
}

// scan walks keys under prefix strictly after the cursor suffix, calling
// fn until it returns false or limit items were taken; it returns the
// next cursor (hex suffix of the last item) when more items remain.
func (tx *Tx) scan(prefix []byte, cursor string, maxCursor, limit int, fn func(k []byte, item *badger.Item) error) (string, error) {
	limit, err := tx.pageLimit(limit)
	if err != nil {
		return "", err
	}
	if len(cursor) > maxCursor {
		return "", newErr(evalrecord.CodeInvalidPageOptions, "cursor")
	}
	after, err := hex.DecodeString(cursor)
	if err != nil {
		return "", newErr(evalrecord.CodeInvalidPageOptions, "cursor")
	}
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
	defer it.Close()
	start := append(append([]byte{}, prefix...), after...)
	taken := 0
	var last []byte
	for it.Seek(start); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(after) > 0 && bytes.Equal(k, start) {
			continue
		}
		if taken == limit {
			return hex.EncodeToString(last), nil
		}
		if err := fn(k, it.Item()); err != nil {
			return "", err
		}
		last = append(last[:0], k[len(prefix):]...)
		taken++
	}
	return "", nil
}

// ListSets pages a scope's set revisions by (id, version), bodies omitted.
func (tx *Tx) ListSets(scope string, limit int, cursor string) (*evalrecord.Page[evalrecord.SetRecord], error) {
	if err := ValidScope(scope); err != nil {
		return nil, err
	}
	p := &evalrecord.Page[evalrecord.SetRecord]{Scope: scope, Items: []evalrecord.SetRecord{}}
	next, err := tx.scan(scoped(pSet, scope), cursor, 1032*2, limit, func(_ []byte, item *badger.Item) error {
		var s evalrecord.SetRecord
		if err := item.Value(func(b []byte) error { return decodeInto(b, &s) }); err != nil {
			return err
		}
		s.Body = nil
		p.Items = append(p.Items, s)
		return nil
	})
	p.NextCursor = next
	return p, err
}

// --- jobs ---

// GetJob returns a job of scope.
func (tx *Tx) GetJob(scope, id string) (*evalrecord.Job, error) {
	var j evalrecord.Job
	ok, err := getRecord(tx.txn, jobKey(scope, id), &j)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, evalrecord.ErrNotFound
	}
	return &j, nil
}

// JobByID finds a job without its scope (workers and the scheduler).
func (tx *Tx) JobByID(id string) (*evalrecord.Job, error) {
	item, err := tx.txn.Get(jobIndexKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, evalrecord.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	scope, err := item.ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	return tx.GetJob(string(scope), id)
}

func (tx *Tx) putJob(j *evalrecord.Job) error {
	v, err := encode(j)
	if err != nil {
		return err
	}
	return tx.txn.Set(jobKey(j.Scope, j.JobID), v)
}

// Admission is the service's admission policy for CreateEvaluation.
type Admission struct {
	MaxConcurrency int   // running jobs
	MaxQueue       int   // queued jobs
	MaxQueueBytes  int64 // bytes of queued jobs
}

// Counts are the service-level job counters.
type Counts struct {
	Active, Queued int
	QueuedBytes    int64
	Recovered      int
}

// Counts reads the job counters.
func (tx *Tx) Counts() (Counts, error) {
	var c Counts
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"active", nil}, {"queued", nil}, {"queued_bytes", &c.QueuedBytes}, {"recovered", nil}} {
		v, err := tx.counter(f.name)
		if err != nil {
			return c, err
		}
		switch f.name {
		case "active":
			c.Active = int(v)
		case "queued":
			c.Queued = int(v)
		case "queued_bytes":
			c.QueuedBytes = int64(v)
		case "recovered":
			c.Recovered = int(v)
		}
	}
	return c, nil
}

// CreateEvaluation atomically stores the set revision (idempotently) and
// the new job, and admits the job: running when fewer than MaxConcurrency
// are active, else queued when the queue has room, else
// evaluation_queue_full and nothing is stored. now is the command's time.
func (tx *Tx) CreateEvaluation(set evalrecord.SetRecord, j evalrecord.Job, adm Admission, now int64) (*evalrecord.Job, error) {
	if err := ValidScope(j.Scope); err != nil {
		return nil, err
	}
	if set.Scope != j.Scope || set.ID != j.EvalSetID || set.Version != j.EvalSetVersion {
		return nil, newErr(evalrecord.CodeJobSetMismatch, "")
	}
	if old, err := tx.JobByID(j.JobID); err == nil {
		// The same command applied twice (a proposer retried after losing
		// the reply of an apply that did commit) is the same job: the
		// job id is random per submit and now comes from the command.
		if old.CreatedAt == now && old.Scope == j.Scope && old.EvalSetID == j.EvalSetID &&
			old.EvalSetVersion == j.EvalSetVersion && reflect.DeepEqual(old.Spec, j.Spec) {
			return old, nil
		}
		return nil, evalrecord.ErrAlreadyExists
	} else if !errors.Is(err, evalrecord.ErrNotFound) {
		return nil, err
	}
	if _, err := tx.PutSet(set); err != nil {
		return nil, err
	}
	n, err := tx.counter("jobs")
	if err != nil {
		return nil, err
	}
	if int(n) >= tx.lim.MaxJobs {
		return nil, newErr(evalrecord.CodeJobCapacity, "")
	}
	c, err := tx.Counts()
	if err != nil {
		return nil, err
	}
	j.Revision, j.CreatedAt, j.UpdatedAt = 0, now, now
	j.StartedAt, j.FinishedAt, j.Reason = 0, 0, ""
	j.Progress = evalrecord.Progress{Total: j.Spec.Cases * j.Spec.Samples}
	seq, err := tx.counter("job_seq")
	if err != nil {
		return nil, err
	}
	j.Seq = seq + 1
	if err := putUint(tx.txn, metaKey("job_seq"), j.Seq); err != nil {
		return nil, err
	}
	v, err := encode(&j)
	if err != nil {
		return nil, err
	}
	k := jobKey(j.Scope, j.JobID)
	if err := tx.checkRecord(len(k) + len(v)); err != nil {
		return nil, err
	}
	j.Bytes = int64(len(k)+len(v)) + tx.lim.TerminalHeadroom
	switch {
	case c.Active < adm.MaxConcurrency:
		j.Phase, j.Revision, j.StartedAt = evalrecord.PhaseRunning, 1, now
		if err := tx.txn.Set(activeKey(j.JobID), nil); err != nil {
			return nil, err
		}
		if err := tx.addCounter("active", 1); err != nil {
			return nil, err
		}
	case c.Queued < adm.MaxQueue && c.QueuedBytes+j.Bytes <= adm.MaxQueueBytes:
		j.Phase = evalrecord.PhaseQueued
		if err := tx.txn.Set(queueKey(j.Seq, j.JobID), []byte(j.Scope)); err != nil {
			return nil, err
		}
		if err := tx.addCounter("queued", 1); err != nil {
			return nil, err
		}
		if err := tx.addCounter("queued_bytes", j.Bytes); err != nil {
			return nil, err
		}
	default:
		return nil, evalrecord.ErrQueueFull
	}
	if err := tx.charge(j.Scope, j.Bytes, false); err != nil {
		return nil, err
	}
	if err := tx.putJob(&j); err != nil {
		return nil, err
	}
	if err := tx.txn.Set(jobIndexKey(j.JobID), []byte(j.Scope)); err != nil {
		return nil, err
	}
	if err := tx.txn.Set(append(setRefPrefix(j.Scope, set.ID, set.Version), j.JobID...), nil); err != nil {
		return nil, err
	}
	return &j, tx.addCounter("jobs", 1)
}

// Patch carries the fields a transition sets (CONTRACTS §6): running needs
// StartedAt; completed needs Result and FinishedAt; failed, timed_out and
// cancelled need FinishedAt and Reason.
//
// A completion comes in one of two forms. Written by coordinators before
// results left the Raft log, Result alone: the store validates it and
// computes its digest. Now the log carries ResultDigest and ResultSize
// only, and each node's FSM builds the document itself and sets Result to
// bytes it has checked against both; the store records the log's digest.
// (Field names are the msgpack keys of the Raft entry: add, never rename.)
type Patch struct {
	StartedAt  int64
	FinishedAt int64
	Reason     string
	Result     []byte // result JSON
	// ResultDigest is the SHA-256 (hex) of the document and ResultSize
	// its length, as the leader built it; set on completions that carry
	// no Result through the log.
	ResultDigest string `msgpack:",omitempty"`
	ResultSize   int64  `msgpack:",omitempty"`
	// ResultRecords, on a completion of the third form (results as
	// records), is the number of result records the job holds and
	// ResultDigest their running hash (RecordsDigest): nothing is built
	// or stored at completion, the node checks both against its own.
	ResultRecords int64 `msgpack:",omitempty"`
}

// Transition moves a job from one of expected to `to`, compare-and-set:
// another current phase is stale_phase (or invalid_eval_job_transition
// when the graph forbids the move). Revision goes up by one.
func (tx *Tx) Transition(scope, id string, expected []evalrecord.Phase, to evalrecord.Phase, p Patch, now int64) (*evalrecord.Job, error) {
	j, err := tx.GetJob(scope, id)
	if err != nil {
		return nil, err
	}
	if !evalrecord.LegalTransition(j.Phase, to) {
		return nil, errf(evalrecord.CodeInvalidTransition, "%s to %s", j.Phase, to)
	}
	found := len(expected) == 0
	for _, e := range expected {
		found = found || e == j.Phase
	}
	if !found {
		return nil, errf(evalrecord.CodeStalePhase, "%s", j.Phase)
	}
	switch to {
	case evalrecord.PhaseRunning:
		if p.StartedAt == 0 {
			return nil, newErr(evalrecord.CodeInvalidPatch, "started_at")
		}
	case evalrecord.PhaseCompleted:
		if p.FinishedAt == 0 {
			return nil, newErr(evalrecord.CodeInvalidPatch, "finished_at")
		}
		if p.ResultRecords > 0 {
			if err := checkRecords(j, p); err != nil {
				return nil, err
			}
			break
		}
		if len(p.Result) == 0 {
			return nil, newErr(evalrecord.CodeInvalidResult, "")
		}
		switch {
		case p.ResultDigest != "":
			// Built by this node's FSM and checked against the log's
			// digest: its own encoder's output, valid by construction.
			if int64(len(p.Result)) != p.ResultSize {
				return nil, errf(evalrecord.CodeInvalidResult, "%d bytes, the log says %d", len(p.Result), p.ResultSize)
			}
		case !json.Valid(p.Result):
			// Revalidated as JSON; the size is bounded by the record quota.
			// (The generic jsonlimit node budget is too small for 10,000
			// samples.)
			return nil, newErr(evalrecord.CodeInvalidResult, "")
		}
	default:
		if p.FinishedAt == 0 || p.Reason == "" || len(p.Reason) > evalrecord.MaxReasonBytes {
			return nil, newErr(evalrecord.CodeInvalidPatch, "finished_at/reason")
		}
	}
	from := j.Phase
	j.Phase, j.Revision, j.UpdatedAt = to, j.Revision+1, now
	switch from {
	case evalrecord.PhaseQueued:
		if err := tx.txn.Delete(queueKey(j.Seq, j.JobID)); err != nil {
			return nil, err
		}
		if err := tx.addCounter("queued", -1); err != nil {
			return nil, err
		}
		if err := tx.addCounter("queued_bytes", -j.Bytes); err != nil {
			return nil, err
		}
	case evalrecord.PhaseRunning:
		if err := tx.txn.Delete(activeKey(j.JobID)); err != nil {
			return nil, err
		}
		if err := tx.addCounter("active", -1); err != nil {
			return nil, err
		}
	}
	if to == evalrecord.PhaseRunning {
		j.StartedAt = p.StartedAt
		if err := tx.txn.Set(activeKey(j.JobID), nil); err != nil {
			return nil, err
		}
		if err := tx.addCounter("active", 1); err != nil {
			return nil, err
		}
	} else {
		j.FinishedAt, j.Reason = p.FinishedAt, p.Reason
		// Give back the terminal headroom; charge the result.
		if err := tx.charge(j.Scope, -tx.lim.TerminalHeadroom, true); err != nil {
			return nil, err
		}
		j.Bytes -= tx.lim.TerminalHeadroom
		if to == evalrecord.PhaseCompleted && p.ResultRecords > 0 {
			j.ResultDigest, j.ResultFormat = p.ResultDigest, evalrecord.ResultRecords
		} else if to == evalrecord.PhaseCompleted {
			k := resultKey(j.JobID)
			if err := tx.checkRecord(len(k) + len(p.Result)); err != nil {
				return nil, err
			}
			if err := tx.charge(j.Scope, int64(len(k)+len(p.Result)), false); err != nil {
				return nil, err
			}
			j.Bytes += int64(len(k) + len(p.Result))
			j.ResultDigest = p.ResultDigest
			if j.ResultDigest == "" {
				j.ResultDigest = canonjson.DigestBytes(p.Result)
			}
			if err := tx.txn.Set(k, compressResult(p.Result)); err != nil {
				return nil, err
			}
		}
		// Every dispatched task has its outcome (each accepted outcome
		// deleted its assignment): nothing to drop, and no walk of the
		// assigned prefix, which holds the tombstones of every finished
		// task (~10,000 at the end of a 10,000-task job, on every node).
		if j.Progress.Dispatched > j.Progress.Done {
			if err := tx.dropAssignments(j.JobID); err != nil {
				return nil, err
			}
		}
	}
	return j, tx.putJob(j)
}

// Result returns a completed job's result JSON.
func (tx *Tx) Result(jobID string) ([]byte, error) {
	item, err := tx.txn.Get(resultKey(jobID))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, evalrecord.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var doc []byte
	err = item.Value(func(v []byte) (err error) {
		doc, err = decompressResult(v)
		return err
	})
	return doc, err
}

// A result is stored S2-compressed behind a 0xff byte, which no JSON
// document starts with (results stored before are plain JSON and read as
// such). A 10,000-sample result is ~8 MB of repetitive JSON and ~0.5 MB
// compressed: Badger's write of the value (a buffer grown and copied
// into the value log, page faults on fresh memory) was most of the
// completing entry's apply, 100-300 ms on a loaded machine. Quotas still
// charge the document's own size.
const resultS2 byte = 0xff

func compressResult(doc []byte) []byte {
	dst := make([]byte, 1+s2.MaxEncodedLen(len(doc)))
	dst[0] = resultS2
	return dst[:1+len(s2.Encode(dst[1:], doc))]
}

func decompressResult(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != resultS2 {
		return append([]byte(nil), v...), nil
	}
	n, err := s2.DecodedLen(v[1:])
	if err != nil || n > maxResultBytes {
		return nil, errors.Join(newErr(evalrecord.CodeInvalidStoreRecord, "compressed result"), err)
	}
	doc, err := s2.Decode(make([]byte, n), v[1:])
	if err != nil {
		return nil, errors.Join(newErr(evalrecord.CodeInvalidStoreRecord, "compressed result"), err)
	}
	return doc, nil
}

// maxResultBytes bounds a stored result's decompressed size (far above
// any record limit a store accepts).
const maxResultBytes = 1 << 30

// ListJobs pages a scope's jobs by job id.
func (tx *Tx) ListJobs(scope string, limit int, cursor string) (*evalrecord.Page[evalrecord.Job], error) {
	if err := ValidScope(scope); err != nil {
		return nil, err
	}
	p := &evalrecord.Page[evalrecord.Job]{Scope: scope, Items: []evalrecord.Job{}}
	next, err := tx.scan(scoped(pJob, scope), cursor, 512, limit, func(_ []byte, item *badger.Item) error {
		var j evalrecord.Job
		if err := item.Value(func(b []byte) error { return decodeInto(b, &j) }); err != nil {
			return err
		}
		p.Items = append(p.Items, j)
		return nil
	})
	p.NextCursor = next
	return p, err
}

// ActiveJobs returns every running job (scheduler), in admission order.
func (tx *Tx) ActiveJobs() ([]*evalrecord.Job, error) {
	var out []*evalrecord.Job
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pActive}})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		j, err := tx.JobByID(string(it.Item().Key()[1:]))
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	sortJobs(out)
	return out, nil
}

// QueuedJobs returns up to limit queued jobs in admission order.
func (tx *Tx) QueuedJobs(limit int) ([]*evalrecord.Job, error) {
	var out []*evalrecord.Job
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pQueue}})
	defer it.Close()
	for it.Rewind(); it.Valid() && len(out) < limit; it.Next() {
		k := it.Item().Key()
		scope, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		j, err := tx.GetJob(string(scope), string(k[9:]))
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// UpdateProgress rewrites a job's progress counters (not a transition).
func (tx *Tx) UpdateProgress(j *evalrecord.Job) error { return tx.putJob(j) }

// RecordRecovered adds n to the recovered-jobs counter.
func (tx *Tx) RecordRecovered(n int) error { return tx.addCounter("recovered", int64(n)) }

// --- baselines ---

// PutBaseline names a completed job's result in scope.
func (tx *Tx) PutBaseline(scope, name, jobID string, now int64) (*evalrecord.Baseline, error) {
	return tx.PutBaselineBuilt(scope, name, jobID, now, nil)
}

// PutBaselineBuilt is PutBaseline for a job whose result may be kept as
// records (no stored document): build makes its document, which the
// baseline copies with its own digest.
func (tx *Tx) PutBaselineBuilt(scope, name, jobID string, now int64, build func(*evalrecord.Job) ([]byte, error)) (*evalrecord.Baseline, error) {
	if err := ValidScope(scope); err != nil {
		return nil, err
	}
	if name == "" || len(name) > 256 {
		return nil, newErr(evalrecord.CodeInvalidBaselineName, "")
	}
	j, err := tx.GetJob(scope, jobID)
	if err != nil {
		return nil, err
	}
	if j.Phase != evalrecord.PhaseCompleted {
		return nil, evalrecord.ErrJobNotCompleted
	}
	var res []byte
	digest := j.ResultDigest
	if j.ResultFormat == evalrecord.ResultRecords {
		if build == nil {
			return nil, errf(evalrecord.CodeInvalidResult, "job %s keeps its result as records", jobID)
		}
		if res, err = build(j); err != nil {
			return nil, err
		}
		digest = canonjson.DigestBytes(res)
	} else if res, err = tx.Result(jobID); err != nil {
		return nil, err
	}
	old, err := tx.GetBaseline(scope, name)
	if err != nil && !errors.Is(err, evalrecord.ErrNotFound) {
		return nil, err
	}
	k := baselineKey(scope, name)
	b := evalrecord.Baseline{Scope: scope, Name: name, JobID: jobID, ResultDigest: digest, Result: res, UpdatedAt: now}
	v, err := encode(&b)
	if err != nil {
		return nil, err
	}
	if err := tx.checkRecord(len(k) + len(v)); err != nil {
		return nil, err
	}
	delta := int64(len(k) + len(v))
	if old != nil {
		ov, _ := encode(old)
		delta -= int64(len(k) + len(ov))
		if err := tx.baselineRef(scope, old.JobID, -1); err != nil {
			return nil, err
		}
	} else {
		n, err := tx.counter("baselines")
		if err != nil {
			return nil, err
		}
		if int(n) >= tx.lim.MaxBaselines {
			return nil, newErr(evalrecord.CodeBaselineCapacity, "")
		}
		if err := tx.addCounter("baselines", 1); err != nil {
			return nil, err
		}
	}
	if err := tx.charge(scope, delta, false); err != nil {
		return nil, err
	}
	if err := tx.baselineRef(scope, jobID, 1); err != nil {
		return nil, err
	}
	return &b, tx.txn.Set(k, v)
}

func (tx *Tx) baselineRef(scope, jobID string, d int) error {
	j, err := tx.GetJob(scope, jobID)
	if errors.Is(err, evalrecord.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	j.BaselineRefs = max(j.BaselineRefs+d, 0)
	return tx.putJob(j)
}

// baselineRow is a Baseline without its result: listing decodes only the
// row (msgpack skips the result field), so a page of baselines costs the
// rows, not up to MaxPageLimit stored result documents.
type baselineRow struct {
	Scope        string `msgpack:"scope"`
	Name         string `msgpack:"name"`
	JobID        string `msgpack:"job_id"`
	ResultDigest string `msgpack:"result_digest"`
	UpdatedAt    int64  `msgpack:"updated_at"`
}

// ListBaselines pages a scope's baselines by name, results omitted.
func (tx *Tx) ListBaselines(scope string, limit int, cursor string) (*evalrecord.Page[evalrecord.Baseline], error) {
	if err := ValidScope(scope); err != nil {
		return nil, err
	}
	p := &evalrecord.Page[evalrecord.Baseline]{Scope: scope, Items: []evalrecord.Baseline{}}
	// Names are at most 256 bytes: a cursor is at most 512 hex digits.
	next, err := tx.scan(scoped(pBaseline, scope), cursor, 512, limit, func(_ []byte, item *badger.Item) error {
		var r baselineRow
		if err := item.Value(func(b []byte) error { return decodeInto(b, &r) }); err != nil {
			return err
		}
		p.Items = append(p.Items, evalrecord.Baseline{Scope: r.Scope, Name: r.Name, JobID: r.JobID, ResultDigest: r.ResultDigest, UpdatedAt: r.UpdatedAt})
		return nil
	})
	p.NextCursor = next
	return p, err
}

// GetBaseline returns a named baseline of scope.
func (tx *Tx) GetBaseline(scope, name string) (*evalrecord.Baseline, error) {
	var b evalrecord.Baseline
	ok, err := getRecord(tx.txn, baselineKey(scope, name), &b)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, evalrecord.ErrNotFound
	}
	return &b, nil
}
