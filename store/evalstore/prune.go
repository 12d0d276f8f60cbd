package evalstore

import (
	"encoding/hex"
	"errors"
	"github.com/fadcedab/adk/store/evalrecord"

	"github.com/dgraph-io/badger/v4"
	"github.com/vmihailenco/msgpack/v5"
)

// Prune walks one scope: baselines (only with IncludeBaselines), then
// jobs, then set revisions, deleting what is older than Before and
// unprotected. Terminal jobs referenced by a baseline and set revisions
// referenced by a job are protected; a baseline deleted earlier in the
// same walk no longer protects its job. The cursor is opaque: hex of a
// stage byte and the last key scanned.
func (tx *Tx) Prune(scope string, o evalrecord.PruneOptions) (*evalrecord.PruneResult, error) {
	if err := ValidScope(scope); err != nil {
		return nil, err
	}
	limit := o.Limit
	if limit == 0 {
		limit = tx.lim.MaxPruneLimit
	}
	if o.Before <= 0 || limit < 1 || limit > tx.lim.MaxPruneLimit || limit > 10_000 || len(o.Cursor) > 2048 {
		return nil, newErr(evalrecord.CodeInvalidPruneOptions, "")
	}
	cur, err := hex.DecodeString(o.Cursor)
	if err != nil || (len(cur) > 0 && cur[0] > 2) {
		return nil, newErr(evalrecord.CodeInvalidPruneOptions, "cursor")
	}
	stage, after := byte(0), []byte(nil)
	if len(cur) > 0 {
		stage, after = cur[0], cur[1:]
	}
	if stage == 0 && !o.IncludeBaselines {
		stage, after = 1, nil
	}
	res := &evalrecord.PruneResult{}
	prefixes := [3][]byte{scoped(pBaseline, scope), scoped(pJob, scope), scoped(pSet, scope)}
	for ; stage < 3; stage, after = stage+1, nil {
		prefix := prefixes[stage]
		// Collect candidates first: deleting under an open iterator is fine in
		// Badger, but decoding after the walk keeps the loop simple.
		var keys [][]byte
		var vals [][]byte
		it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
		start := append(append([]byte{}, prefix...), after...)
		for it.Seek(start); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			if len(after) > 0 && string(k) == string(start) {
				continue
			}
			if res.Scanned == limit {
				it.Close()
				res.HasMore = true
				res.NextCursor = hex.EncodeToString(append([]byte{stage}, keys[len(keys)-1][len(prefix):]...))
				return res, tx.pruneApplyBounded(scope, stage, keys, vals, o.Before, res)
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				it.Close()
				return nil, err
			}
			keys, vals = append(keys, k), append(vals, v)
			res.Scanned++
		}
		it.Close()
		if err := tx.pruneApplyBounded(scope, stage, keys, vals, o.Before, res); err != nil {
			return nil, err
		}
		if res.HasMore {
			return res, nil
		}
	}
	return res, nil
}

// maxPruneTaskDeletes bounds the task keys (tasks and their records) one
// prune call deletes: a Badger transaction holds at most
// MaxBatchCount entries (15% of a memtable over ~96 B a node: ~26,000 at
// the eval store's 16 MiB), and a 100,000-task job has 200,000 such keys.
// A job with more is deleted over several calls (the cursor comes back to
// it); its job record goes last, so it stays listed until its tasks are
// gone (its result no longer reads whole in between: it is being deleted).
const maxPruneTaskDeletes = 8192

// errPruneBudget stops a prune call whose task-delete budget is spent.
var errPruneBudget = errors.New("prune budget spent")

// pruneApplyBounded is pruneApply stopped early when the task-delete
// budget is spent: the call answers HasMore with a cursor that scans the
// unfinished job again (its key less its last byte: before it, after every
// key already passed but the ones sharing that prefix, which are looked at
// again harmlessly).
func (tx *Tx) pruneApplyBounded(scope string, stage byte, keys, vals [][]byte, before int64, res *evalrecord.PruneResult) error {
	budget := maxPruneTaskDeletes
	tx.pruneBudget = &budget
	defer func() { tx.pruneBudget = nil }()
	i, err := tx.pruneApply(scope, stage, keys, vals, before, res)
	if !errors.Is(err, errPruneBudget) {
		return err
	}
	k := keys[i]
	res.HasMore = true
	res.NextCursor = hex.EncodeToString(append([]byte{stage}, k[len(scoped(pJob, scope)):len(k)-1]...))
	return nil
}

// pruneApply deletes what keys hold and returns the index it stopped at
// with its error (errPruneBudget: the task-delete budget is spent).
func (tx *Tx) pruneApply(scope string, stage byte, keys, vals [][]byte, before int64, res *evalrecord.PruneResult) (int, error) {
	for i, k := range keys {
		switch stage {
		case 0:
			var b evalrecord.Baseline
			if err := msgpack.Unmarshal(vals[i], &b); err != nil {
				return i, err
			}
			if b.UpdatedAt >= before {
				continue
			}
			if err := tx.baselineRef(scope, b.JobID, -1); err != nil {
				return i, err
			}
			if err := tx.del(scope, k, int64(len(k)+len(vals[i])), "baselines"); err != nil {
				return i, err
			}
			res.BaselinesDeleted++
			res.BytesReclaimed += int64(len(k) + len(vals[i]))
		case 1:
			j, err := tx.GetJob(scope, string(k[len(scoped(pJob, scope)):]))
			if err != nil {
				return i, err
			}
			if !j.Phase.Terminal() || j.FinishedAt >= before || j.BaselineRefs > 0 {
				continue
			}
			if err := tx.deleteJob(j); err != nil {
				return i, err
			}
			res.JobsDeleted++
			res.BytesReclaimed += j.Bytes
		case 2:
			var s evalrecord.SetRecord
			if err := msgpack.Unmarshal(vals[i], &s); err != nil {
				return i, err
			}
			if s.CreatedAt >= before {
				continue
			}
			refs, err := tx.hasPrefix(setRefPrefix(scope, s.ID, s.Version))
			if err != nil {
				return i, err
			}
			if refs {
				continue
			}
			if err := tx.del(scope, k, int64(len(k)+len(vals[i])), "sets"); err != nil {
				return i, err
			}
			res.SetRevisionsDeleted++
			res.BytesReclaimed += int64(len(k) + len(vals[i]))
		}
	}
	return len(keys), nil
}

func (tx *Tx) del(scope string, k []byte, bytes int64, counter string) error {
	if err := tx.txn.Delete(k); err != nil {
		return err
	}
	if err := tx.charge(scope, -bytes, true); err != nil {
		return err
	}
	return tx.addCounter(counter, -1)
}

func (tx *Tx) deleteJob(j *evalrecord.Job) error {
	// Tasks (and their records) first: a job too big for one call keeps
	// its other keys, so it stays whole to readers until its last call.
	var tasks [][]byte
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: taskPrefix(j.JobID)})
	for it.Rewind(); it.Valid(); it.Next() {
		if tx.pruneBudget != nil && len(tasks) == *tx.pruneBudget {
			break
		}
		tasks = append(tasks, it.Item().KeyCopy(nil))
	}
	more := it.Valid()
	it.Close()
	for _, k := range tasks {
		if err := tx.txn.Delete(k); err != nil {
			return err
		}
	}
	if tx.pruneBudget != nil {
		if *tx.pruneBudget -= len(tasks); more {
			return errPruneBudget
		}
	}
	for _, k := range [][]byte{jobIndexKey(j.JobID), resultKey(j.JobID),
		append(setRefPrefix(j.Scope, j.EvalSetID, j.EvalSetVersion), j.JobID...)} {
		if err := tx.txn.Delete(k); err != nil {
			return err
		}
	}
	return tx.del(j.Scope, jobKey(j.Scope, j.JobID), j.Bytes, "jobs")
}

func (tx *Tx) hasPrefix(p []byte) (bool, error) {
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: p})
	defer it.Close()
	it.Rewind()
	return it.Valid(), nil
}

func decodeInto(b []byte, v any) error {
	if err := msgpack.Unmarshal(b, v); err != nil {
		return errors.Join(newErr(evalrecord.CodeInvalidStoreRecord, ""), err)
	}
	return nil
}
