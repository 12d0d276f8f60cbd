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
				return res, tx.pruneApply(scope, stage, keys, vals, o.Before, res)
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
		if err := tx.pruneApply(scope, stage, keys, vals, o.Before, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (tx *Tx) pruneApply(scope string, stage byte, keys, vals [][]byte, before int64, res *evalrecord.PruneResult) error {
	for i, k := range keys {
		switch stage {
		case 0:
			var b evalrecord.Baseline
			if err := msgpack.Unmarshal(vals[i], &b); err != nil {
				return err
			}
			if b.UpdatedAt >= before {
				continue
			}
			if err := tx.baselineRef(scope, b.JobID, -1); err != nil {
				return err
			}
			if err := tx.del(scope, k, int64(len(k)+len(vals[i])), "baselines"); err != nil {
				return err
			}
			res.BaselinesDeleted++
			res.BytesReclaimed += int64(len(k) + len(vals[i]))
		case 1:
			j, err := tx.GetJob(scope, string(k[len(scoped(pJob, scope)):]))
			if err != nil {
				return err
			}
			if !j.Phase.Terminal() || j.FinishedAt >= before || j.BaselineRefs > 0 {
				continue
			}
			if err := tx.deleteJob(j); err != nil {
				return err
			}
			res.JobsDeleted++
			res.BytesReclaimed += j.Bytes
		case 2:
			var s evalrecord.SetRecord
			if err := msgpack.Unmarshal(vals[i], &s); err != nil {
				return err
			}
			if s.CreatedAt >= before {
				continue
			}
			refs, err := tx.hasPrefix(setRefPrefix(scope, s.ID, s.Version))
			if err != nil || refs {
				return err
			}
			if err := tx.del(scope, k, int64(len(k)+len(vals[i])), "sets"); err != nil {
				return err
			}
			res.SetRevisionsDeleted++
			res.BytesReclaimed += int64(len(k) + len(vals[i]))
		}
	}
	return nil
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
	for _, k := range [][]byte{jobIndexKey(j.JobID), resultKey(j.JobID),
		append(setRefPrefix(j.Scope, j.EvalSetID, j.EvalSetVersion), j.JobID...)} {
		if err := tx.txn.Delete(k); err != nil {
			return err
		}
	}
	var tasks [][]byte
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: taskPrefix(j.JobID)})
	for it.Rewind(); it.Valid(); it.Next() {
		tasks = append(tasks, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range tasks {
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
