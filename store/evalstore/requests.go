package evalstore

import (
	"encoding/binary"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/fadcedab/adk/store/evalrecord"
)

// Submit request ids (coordinator/DESIGN.md "Request path"): a client
// names each submit with a random request id, and sends it again with
// the same id when no coordinator answered (one that took it died). The
// FSM records id -> job when it creates the job, in the same
// transaction, so every node (and every snapshot) knows it; a submit
// applied later with the same id and the same content answers that job
// instead of creating another, with other content it is
// eval_request_id_conflict. Ids are per scope, kept RequestTTLMS after
// their submit and at most Limits.MaxRequests in all (the oldest goes
// first); both are counted at the command's time, so every node forgets
// the same.
const (
	// RequestTTLMS is how long a request id is remembered: far past a
	// call's retries (a call lasts 30 s by default).
	RequestTTLMS = 60 * 60 * 1000
	// maxRequestExpiries bounds the expired ids one RecordRequest
	// deletes, so its transaction stays small; one submit adds one id,
	// so they never pile up.
	maxRequestExpiries = 256
)

// RequestRecord is what a request id names: the job its submit created
// and the digest of that submit's content.
type RequestRecord struct {
	JobID  string `msgpack:"job"`
	Digest string `msgpack:"digest"`
	At     int64  `msgpack:"at"` // the submit's command time (epoch ms)
}

// Request returns the record of a request id in scope that is still
// remembered at now (found false: none, or expired).
func (tx *Tx) Request(scope, id string, now int64) (rec RequestRecord, found bool, err error) {
	if err := ValidScope(scope); err != nil {
		return rec, false, err
	}
	found, err = getRecord(tx.txn, requestKey(scope, id), &rec)
	if err != nil || !found {
		return rec, false, err
	}
	return rec, now-rec.At <= RequestTTLMS, nil
}

// SubmittedJob answers a submit naming request id in scope with content
// digest, at now: the job an earlier submit with that id and digest
// created (nil when the id is unknown or expired), or
// eval_request_id_conflict when the id names a submit of other content.
// A remembered id whose job was pruned since is not_found.
func (tx *Tx) SubmittedJob(scope, id, digest string, now int64) (*evalrecord.Job, error) {
	rec, found, err := tx.Request(scope, id, now)
	if err != nil || !found {
		return nil, err
	}
	if rec.Digest != digest {
		return nil, errf(evalrecord.CodeRequestIDConflict, "submit.request_id: %q was used for a submit of other content (job %s); send a new id for a new request", id, rec.JobID)
	}
	j, err := tx.GetJob(scope, rec.JobID)
	if errors.Is(err, evalrecord.ErrNotFound) {
		return nil, errf(evalrecord.CodeNotFound, "submit.request_id: %q made job %s, since pruned", id, rec.JobID)
	}
	return j, err
}

// RecordRequest remembers that the submit of request id in scope, with
// content digest, created jobID at now. It first forgets the ids expired
// at now (at most maxRequestExpiries) and, at Limits.MaxRequests, the
// oldest ones.
func (tx *Tx) RecordRequest(scope, id, digest, jobID string, now int64) error {
	if err := ValidScope(scope); err != nil {
		return err
	}
	if !evalrecord.ValidRequestID(id) {
		return errf(evalrecord.CodeInvalidStoreRecord, "request id: %d..%d bytes of [A-Za-z0-9_-]", evalrecord.MinRequestIDBytes, evalrecord.MaxRequestIDBytes)
	}
	if _, err := tx.forgetRequests(now-RequestTTLMS, maxRequestExpiries); err != nil {
		return err
	}
	var old RequestRecord
	found, err := getRecord(tx.txn, requestKey(scope, id), &old)
	if err != nil {
		return err
	}
	if found {
		// Expired but not yet forgotten (SubmittedJob saw none).
		if err := tx.forgetRequest(requestAgeKey(old.At, scope, id)); err != nil {
			return err
		}
	}
	n, err := tx.counter("requests")
	if err != nil {
		return err
	}
	if over := int(n) - tx.lim.MaxRequests + 1; over > 0 {
		if _, err := tx.forgetRequests(1<<62, over); err != nil {
			return err
		}
	}
	v, err := encode(&RequestRecord{JobID: jobID, Digest: digest, At: now})
	if err != nil {
		return err
	}
	if err := tx.txn.Set(requestKey(scope, id), v); err != nil {
		return err
	}
	if err := tx.txn.Set(requestAgeKey(now, scope, id), nil); err != nil {
		return err
	}
	return tx.addCounter("requests", 1)
}

// forgetRequests deletes, oldest first, up to limit request ids recorded
// before the time before; it returns how many.
func (tx *Tx) forgetRequests(before int64, limit int) (int, error) {
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pReqAge}, PrefetchValues: false})
	var keys [][]byte
	for it.Rewind(); it.Valid() && len(keys) < limit; it.Next() {
		k := it.Item().Key()
		if len(k) < 9 || int64(binary.BigEndian.Uint64(k[1:9])) >= before {
			break
		}
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range keys {
		if err := tx.forgetRequest(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// forgetRequest deletes the request id whose age key is ageKey.
func (tx *Tx) forgetRequest(ageKey []byte) error {
	if len(ageKey) < 9 {
		return newErr(evalrecord.CodeInvalidStoreRecord, "request age key")
	}
	if err := tx.txn.Delete(ageKey); err != nil {
		return err
	}
	// r<scope16><id> is the age key without its time.
	if err := tx.txn.Delete(append([]byte{pRequest}, ageKey[9:]...)); err != nil {
		return err
	}
	return tx.addCounter("requests", -1)
}

// requestCount is how many request ids are remembered (its tests read it
// through export_test.go).
func (tx *Tx) requestCount() (int, error) {
	n, err := tx.counter("requests")
	return int(n), err
}
