package evalstore

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/dgraph-io/badger/v4"
	"github.com/fadcedab/adk/store/evalrecord"
)

// A job's result records are its accepted outcomes in the order the log
// applied them (coordinator/DESIGN.md, "Results as records"). Finish
// keeps, per job, a sequence index (record seq → task index, under the
// task prefix with the top bit of the index set, so pruning a job's tasks
// prunes it too and Tasks stops before it) and a running SHA-256 over
// AppendRecord of each record. The digest of a completed job covers
// every record; a node recomputes it by walking the index.

// recordBit marks a record-index key among a job's task keys: task
// indexes stay below 2^31 (the set and sample bounds are far lower).
const recordBit = 1 << 31

func recordKey(job string, seq int64) []byte {
	return binary.BigEndian.AppendUint32(taskPrefix(job), uint32(recordBit|seq))
}

// AppendRecord appends the bytes the running hash covers for one record:
// the task index, its state, tag and sample, each length-prefixed, so
// two different records never hash alike.
func AppendRecord(b []byte, idx int, state, tag string, sample []byte) []byte {
	b = binary.AppendUvarint(b, uint64(idx))
	b = binary.AppendUvarint(b, uint64(len(state)))
	b = append(b, state...)
	b = binary.AppendUvarint(b, uint64(len(tag)))
	b = append(b, tag...)
	b = binary.AppendUvarint(b, uint64(len(sample)))
	return append(b, sample...)
}

// recordHasher resumes job j's running hash.
func recordHasher(j *evalrecord.Job) (hash.Hash, error) {
	h := sha256.New()
	if len(j.RecordsHash) > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(j.RecordsHash); err != nil {
			return nil, newErr(evalrecord.CodeInvalidStoreRecord, "records hash")
		}
	}
	return h, nil
}

// RecordsDigest is the hex SHA-256 over every record job j has so far.
func RecordsDigest(j *evalrecord.Job) (string, error) {
	h, err := recordHasher(j)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// jobRecords is one job's running hash while Finish appends to it.
type jobRecords struct {
	h   hash.Hash
	buf []byte
}

// appendRecord writes record j.Records (task t, just finished) and feeds
// the running hash.
func (tx *Tx) appendRecord(j *evalrecord.Job, r *jobRecords, t *evalrecord.Task) error {
	if j.Records >= recordBit {
		return errf(evalrecord.CodeInvalidStoreRecord, "job %s has %d records", j.JobID, j.Records)
	}
	var v [4]byte
	binary.BigEndian.PutUint32(v[:], uint32(t.Index))
	if err := tx.txn.Set(recordKey(j.JobID, j.Records), v[:]); err != nil {
		return err
	}
	r.buf = AppendRecord(r.buf[:0], t.Index, t.State, t.Tag, t.Sample)
	r.h.Write(r.buf)
	j.Records++
	j.RecordBytes += int64(len(t.Sample))
	return nil
}

// sealRecords stores the running hash's state in the job.
func sealRecords(j *evalrecord.Job, r *jobRecords) error {
	st, err := r.h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return err
	}
	j.RecordsHash = st
	return nil
}

// Records calls fn with each of job's records from seq on, in apply
// order, with the task it stands for, until fn returns false.
func (tx *Tx) Records(jobID string, from int64, fn func(seq int64, t *evalrecord.Task) (bool, error)) error {
	if from < 0 || from >= recordBit {
		return errf(evalrecord.CodeInvalidStoreRecord, "record %d", from)
	}
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: taskPrefix(jobID)})
	defer it.Close()
	for it.Seek(recordKey(jobID, from)); it.Valid(); it.Next() {
		k := it.Item().Key()
		seq := int64(binary.BigEndian.Uint32(k[len(k)-4:]) &^ recordBit)
		var idx uint32
		if err := it.Item().Value(func(b []byte) error {
			if len(b) != 4 {
				return newErr(evalrecord.CodeInvalidStoreRecord, "record index")
			}
			idx = binary.BigEndian.Uint32(b)
			return nil
		}); err != nil {
			return err
		}
		t, err := tx.Task(jobID, int(idx))
		if err != nil {
			return fmt.Errorf("record %d of job %s: %w", seq, jobID, err)
		}
		more, err := fn(seq, t)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// checkRecords checks a records completion p against job j's records.
func checkRecords(j *evalrecord.Job, p Patch) error {
	d, err := RecordsDigest(j)
	if err != nil {
		return err
	}
	if j.Records != p.ResultRecords || d != p.ResultDigest {
		return errf(evalrecord.CodeInvalidResult, "%d records with sha-256 %s, the log says %d, %s", j.Records, d, p.ResultRecords, p.ResultDigest)
	}
	return nil
}
