package evalstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/fadcedab/adk/store/evalrecord"
)

// Set uploads (coordinator/DESIGN.md, "Sets too large for one message"):
// a set too large for one NATS message and one Raft entry arrives in
// parts, each its own entry, stored under its upload until the submit
// that names the upload takes them (TakeUpload) and stores the set
// revision. Every bound is checked on apply, so every node keeps the same.
const (
	// MaxUploadBytes bounds the parts stored for all uploads in progress;
	// past it a part is refused (eval_set_upload_capacity_reached).
	MaxUploadBytes = 64 << 20
	// UploadTTLMS: an upload no part or submit touched for this long is
	// abandoned and deleted by the next part or submit applied.
	UploadTTLMS = 10 * 60 * 1000
)

// The bounds of one upload are evalrecord's (MaxSetPartBytes,
// MaxSetParts, MaxSetUploadBytes): clients check them before sending.
const (
	maxSetPartBytes   = evalrecord.MaxSetPartBytes
	maxSetParts       = evalrecord.MaxSetParts
	maxSetUploadBytes = evalrecord.MaxSetUploadBytes
)

// ValidUploadID checks an upload id: 32 lowercase hex digits.
func ValidUploadID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// UploadRecord is a set upload in progress.
type UploadRecord struct {
	Scope     string `msgpack:"scope"`
	Parts     int    `msgpack:"parts"`
	Size      int64  `msgpack:"size"`
	Digest    string `msgpack:"digest"` // SHA-256 hex of the whole set
	Received  int    `msgpack:"received"`
	Bytes     int64  `msgpack:"bytes"`
	TouchedAt int64  `msgpack:"touched_at"`
}

// SetPart is one part of an upload as a Raft entry carries it.
type SetPart struct {
	Upload string `msgpack:"upload"`
	Part   int    `msgpack:"part"`
	Parts  int    `msgpack:"parts"`
	Size   int64  `msgpack:"size"`
	Digest string `msgpack:"digest"`
	Data   []byte `msgpack:"data"`
}

// CheckSetPart validates a part on its own (the bounds and the shapes),
// before it is proposed and again on apply.
func CheckSetPart(p *SetPart) error {
	switch {
	case !ValidUploadID(p.Upload):
		return newErr(evalrecord.CodeInvalidSetUpload, "upload: 32 lowercase hex digits")
	case p.Parts < 1 || p.Parts > maxSetParts:
		return errf(evalrecord.CodeInvalidSetUpload, "parts: 1..%d, got %d", maxSetParts, p.Parts)
	case p.Part < 0 || p.Part >= p.Parts:
		return errf(evalrecord.CodeInvalidSetUpload, "part: 0..%d, got %d", p.Parts-1, p.Part)
	case p.Size < 1 || p.Size > maxSetUploadBytes:
		return errf(evalrecord.CodeInvalidSetUpload, "size: 1..%d bytes, got %d", maxSetUploadBytes, p.Size)
	case len(p.Data) < 1 || len(p.Data) > maxSetPartBytes:
		return errf(evalrecord.CodeInvalidSetUpload, "data: 1..%d bytes a part, got %d", maxSetPartBytes, len(p.Data))
	case len(p.Digest) != 64:
		return newErr(evalrecord.CodeInvalidSetUpload, "digest: SHA-256 hex of the whole set")
	}
	if _, err := hex.DecodeString(p.Digest); err != nil {
		return newErr(evalrecord.CodeInvalidSetUpload, "digest: SHA-256 hex of the whole set")
	}
	return nil
}

// PutSetPart stores one part of an upload in scope. The first part
// applied creates the upload; every later one must name the same parts,
// size and digest (and scope), and the parts together must not pass the
// size. A part stored again with the same bytes is a no-op (a retried
// proposal); other bytes are refused. Abandoned uploads are deleted first.
func (tx *Tx) PutSetPart(scope string, p *SetPart, now int64) (*UploadRecord, error) {
	if err := ValidScope(scope); err != nil {
		return nil, err
	}
	if err := CheckSetPart(p); err != nil {
		return nil, err
	}
	if err := tx.expireUploads(now); err != nil {
		return nil, err
	}
	var u UploadRecord
	found, err := getRecord(tx.txn, uploadKey(p.Upload), &u)
	if err != nil {
		return nil, err
	}
	if !found {
		if tx.uploads >= MaxUploads {
			return nil, errf(evalrecord.CodeUploadCapacity, "%d set uploads in progress, at most %d", tx.uploads, MaxUploads)
		}
		u = UploadRecord{Scope: scope, Parts: p.Parts, Size: p.Size, Digest: p.Digest}
	} else if u.Scope != scope || u.Parts != p.Parts || u.Size != p.Size || u.Digest != p.Digest {
		return nil, newErr(evalrecord.CodeInvalidSetUpload, "upload: another part of it named another scope, parts, size or digest")
	}
	k := partKey(p.Upload, p.Part)
	item, err := tx.txn.Get(k)
	switch {
	case err == nil:
		old, err := item.ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(old, p.Data) {
			return nil, errf(evalrecord.CodeInvalidSetUpload, "part: %d already holds other bytes", p.Part)
		}
		return &u, nil
	case err != badger.ErrKeyNotFound:
		return nil, err
	}
	if u.Bytes+int64(len(p.Data)) > u.Size {
		return nil, errf(evalrecord.CodeInvalidSetUpload, "size: the parts pass the upload's %d bytes", u.Size)
	}
	total, err := tx.counter("upload_bytes")
	if err != nil {
		return nil, err
	}
	if int64(total)+int64(len(p.Data)) > MaxUploadBytes {
		return nil, errf(evalrecord.CodeUploadCapacity, "%d bytes of set uploads in progress, at most %d", total, MaxUploadBytes)
	}
	if err := tx.txn.Set(k, p.Data); err != nil {
		return nil, err
	}
	u.Received++
	u.Bytes += int64(len(p.Data))
	u.TouchedAt = now
	if err := tx.putUpload(p.Upload, &u); err != nil {
		return nil, err
	}
	if err := tx.addCounter("upload_bytes", int64(len(p.Data))); err != nil {
		return nil, err
	}
	return &u, nil
}

func (tx *Tx) putUpload(id string, u *UploadRecord) error {
	v, err := encode(u)
	if err != nil {
		return err
	}
	return tx.txn.Set(uploadKey(id), v)
}

// Upload returns the assembled bytes of a complete upload in scope,
// checked against its size and digest (read only: the validating node
// reads it before the submit is proposed).
func (tx *Tx) Upload(scope, id string) ([]byte, *UploadRecord, error) {
	if !ValidUploadID(id) {
		return nil, nil, newErr(evalrecord.CodeInvalidSetUpload, "set_upload: 32 lowercase hex digits")
	}
	var u UploadRecord
	found, err := getRecord(tx.txn, uploadKey(id), &u)
	if err != nil {
		return nil, nil, err
	}
	if !found || u.Scope != scope {
		return nil, nil, newErr(evalrecord.CodeInvalidSetUpload, "set_upload: no such upload in this scope (expired after "+strconv.Itoa(UploadTTLMS/60000)+" minutes untouched, or already submitted)")
	}
	if u.Received != u.Parts || u.Bytes != u.Size {
		return nil, nil, errf(evalrecord.CodeInvalidSetUpload, "set_upload: %d of %d parts, %d of %d bytes", u.Received, u.Parts, u.Bytes, u.Size)
	}
	buf := make([]byte, 0, u.Size)
	for i := 0; i < u.Parts; i++ {
		item, err := tx.txn.Get(partKey(id, i))
		if err != nil {
			return nil, nil, errf(evalrecord.CodeInvalidSetUpload, "set_upload: part %d: %v", i, err)
		}
		if err := item.Value(func(v []byte) error { buf = append(buf, v...); return nil }); err != nil {
			return nil, nil, err
		}
	}
	if sum := sha256.Sum256(buf); hex.EncodeToString(sum[:]) != u.Digest {
		return nil, nil, errf(evalrecord.CodeInvalidSetUpload, "digest: the parts' SHA-256 is %x, the upload named %s", sum, u.Digest)
	}
	return buf, &u, nil
}

// UploadSize is the declared size of an upload in scope (0: none).
func (tx *Tx) UploadSize(scope, id string) int64 {
	var u UploadRecord
	if !ValidUploadID(id) {
		return 0
	}
	if found, err := getRecord(tx.txn, uploadKey(id), &u); err != nil || !found || u.Scope != scope {
		return 0
	}
	return u.Size
}

// TakeUpload is Upload, and deletes the upload: a submit applying it
// stores the bytes as its set revision.
func (tx *Tx) TakeUpload(scope, id string, now int64) ([]byte, error) {
	if err := tx.expireUploads(now); err != nil {
		return nil, err
	}
	b, u, err := tx.Upload(scope, id)
	if err != nil {
		return nil, err
	}
	return b, tx.deleteUpload(id, u)
}

func (tx *Tx) deleteUpload(id string, u *UploadRecord) error {
	for i := 0; i < u.Parts; i++ {
		if err := tx.txn.Delete(partKey(id, i)); err != nil {
			return err
		}
	}
	if err := tx.txn.Delete(uploadKey(id)); err != nil {
		return err
	}
	return tx.addCounter("upload_bytes", -u.Bytes)
}

// MaxUploads bounds the set uploads in progress at once.
const MaxUploads = 64

// expireUploads deletes the uploads untouched for UploadTTLMS at now (the
// command's time, so every node deletes the same) and refuses a new one
// past MaxUploads (counted by PutSetPart through uploadCount).
func (tx *Tx) expireUploads(now int64) error {
	type stale struct {
		id string
		u  UploadRecord
	}
	var old []stale
	n := 0
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pUpload}, PrefetchValues: false})
	for it.Rewind(); it.Valid(); it.Next() {
		id, _, ok := splitPart(it.Item().Key()[1:])
		if !ok {
			it.Close()
			return newErr(evalrecord.CodeInvalidStoreRecord, "upload key")
		}
		var u UploadRecord
		if err := it.Item().Value(func(v []byte) error { return decodeInto(v, &u) }); err != nil {
			it.Close()
			return err
		}
		if now-u.TouchedAt > UploadTTLMS {
			old = append(old, stale{id, u})
			continue
		}
		n++
	}
	it.Close()
	for _, s := range old {
		if err := tx.deleteUpload(s.id, &s.u); err != nil {
			return err
		}
	}
	tx.uploads = n
	return nil
}
