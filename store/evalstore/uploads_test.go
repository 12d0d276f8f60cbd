package evalstore_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/fadcedab/adk/store/evalrecord"
	"github.com/fadcedab/adk/store/evalstore"
)

func parts(id string, body []byte, size int) []evalstore.SetPart {
	sum := sha256.Sum256(body)
	n := (len(body) + size - 1) / size
	var ps []evalstore.SetPart
	for i := 0; i < n; i++ {
		ps = append(ps, evalstore.SetPart{Upload: id, Part: i, Parts: n, Size: int64(len(body)), Digest: hex.EncodeToString(sum[:]),
			Data: body[i*size : min((i+1)*size, len(body))]})
	}
	return ps
}

const up1 = "0123456789abcdef0123456789abcdef"

// TestStore_SetUploadAssemblesAndIsBounded: parts stored out of order and
// one stored twice assemble into the set, once, under the upload's
// digest; every bound and mismatch is a typed error naming its field and
// stores nothing; an upload untouched past its TTL is gone.
func TestStore_SetUploadAssemblesAndIsBounded(t *testing.T) {
	s := open(t, evalstore.Limits{})
	body := bytes.Repeat([]byte("0123456789"), 1000)
	ps := parts(up1, body, 3000) // 4 parts
	idx := uint64(0)
	put := func(scope string, p evalstore.SetPart, now int64) error {
		idx++
		return update(t, s, idx, func(tx *evalstore.Tx) error { _, err := tx.PutSetPart(scope, &p, now); return err })
	}
	for _, i := range []int{2, 0, 3, 0} {
		if err := put("app", ps[i], 100); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
	}
	_ = s.View(func(tx *evalstore.Tx) error {
		if _, _, err := tx.Upload("app", up1); evalrecord.Code(err) != evalrecord.CodeInvalidSetUpload || !strings.Contains(err.Error(), "3 of 4 parts") {
			t.Fatalf("incomplete upload: %v", err)
		}
		return nil
	})
	bad := []struct {
		name, scope, code, field string
		mut                      func(p *evalstore.SetPart)
	}{
		{"other bytes for a stored part", "app", evalrecord.CodeInvalidSetUpload, "part: 0", func(p *evalstore.SetPart) { p.Part = 0; p.Data = []byte("x") }},
		{"another digest", "app", evalrecord.CodeInvalidSetUpload, "upload:", func(p *evalstore.SetPart) { p.Digest = strings.Repeat("0", 64) }},
		{"another scope", "other", evalrecord.CodeInvalidSetUpload, "upload:", func(p *evalstore.SetPart) {}},
		{"part too big", "app", evalrecord.CodeInvalidSetUpload, "data:", func(p *evalstore.SetPart) { p.Data = make([]byte, evalrecord.MaxSetPartBytes+1) }},
		{"too many parts", "app", evalrecord.CodeInvalidSetUpload, "parts:", func(p *evalstore.SetPart) { p.Parts = evalrecord.MaxSetParts + 1 }},
		{"set too big", "app", evalrecord.CodeInvalidSetUpload, "size:", func(p *evalstore.SetPart) { p.Size = evalrecord.MaxSetUploadBytes + 1 }},
		{"bad id", "app", evalrecord.CodeInvalidSetUpload, "upload:", func(p *evalstore.SetPart) { p.Upload = "UPPER" }},
		{"part out of range", "app", evalrecord.CodeInvalidSetUpload, "part:", func(p *evalstore.SetPart) { p.Part = 4 }},
	}
	for _, b := range bad {
		p := ps[1]
		b.mut(&p)
		if err := put(b.scope, p, 100); evalrecord.Code(err) != b.code || !strings.Contains(err.Error(), b.field) {
			t.Fatalf("%s: %v, want %s naming %q", b.name, err, b.code, b.field)
		}
	}
	if err := put("app", ps[1], 100); err != nil {
		t.Fatal(err)
	}
	idx++
	var got []byte
	if err := update(t, s, idx, func(tx *evalstore.Tx) (err error) { got, err = tx.TakeUpload("app", up1, 101); return err }); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("take: %d bytes, %v", len(got), err)
	}
	idx++
	if err := update(t, s, idx, func(tx *evalstore.Tx) (err error) { _, err = tx.TakeUpload("app", up1, 101); return err }); evalrecord.Code(err) != evalrecord.CodeInvalidSetUpload {
		t.Fatalf("taken twice: %v", err)
	}

	// A digest that does not match the parts is refused when taken.
	ps2 := parts("11111111111111111111111111111111", body, 6000)
	for i := range ps2 {
		ps2[i].Digest = strings.Repeat("ab", 32)
		if err := put("app", ps2[i], 200); err != nil {
			t.Fatal(err)
		}
	}
	idx++
	if err := update(t, s, idx, func(tx *evalstore.Tx) (err error) {
		_, err = tx.TakeUpload("app", "11111111111111111111111111111111", 201)
		return err
	}); evalrecord.Code(err) != evalrecord.CodeInvalidSetUpload || !strings.Contains(err.Error(), "digest:") {
		t.Fatalf("digest mismatch: %v", err)
	}
	// Abandoned: untouched past the TTL, deleted by the next part applied.
	if err := put("app", parts("22222222222222222222222222222222", body, 6000)[0], 200+evalstore.UploadTTLMS+1); err != nil {
		t.Fatal(err)
	}
	_ = s.View(func(tx *evalstore.Tx) error {
		if _, _, err := tx.Upload("app", "11111111111111111111111111111111"); evalrecord.Code(err) != evalrecord.CodeInvalidSetUpload || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("abandoned upload: %v", err)
		}
		return nil
	})
	// At most MaxUploads in progress: one more is refused, typed.
	small := []byte("{}")
	for i := 1; i < evalstore.MaxUploads; i++ {
		id := hex.EncodeToString([]byte{byte(i)}) + strings.Repeat("3", 30)
		if err := put("app", parts(id, small, 10)[0], 300); err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	if err := put("app", parts(strings.Repeat("4", 32), small, 10)[0], 300); evalrecord.Code(err) != evalrecord.CodeUploadCapacity {
		t.Fatalf("upload past MaxUploads: %v", err)
	}
}
