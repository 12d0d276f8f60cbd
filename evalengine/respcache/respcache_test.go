package respcache

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// fakeProvider answers "answer to <last text>" and counts calls; fail and
// refuse make it error or refuse.
type fakeProvider struct {
	calls  atomic.Int64
	fail   bool
	refuse bool
}

func (p *fakeProvider) Name() string { return "fake" }

func (p *fakeProvider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	p.calls.Add(1)
	if p.fail {
		return nil, &model.Error{Provider: "fake", Class: model.ClassServer, Code: "boom"}
	}
	text := req.Messages[len(req.Messages)-1].Text()
	if p.refuse {
		return &model.Response{Message: model.Message{Role: model.RoleModel, Parts: []model.Part{{Text: "no"}}}, FinishReason: "content_filter"}, nil
	}
	return &model.Response{Message: model.Message{Role: model.RoleModel, Parts: []model.Part{{Text: "answer to " + text}}}, FinishReason: "stop"}, nil
}

func req(text string) *model.Request {
	return &model.Request{Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Text: text}}}}}
}

func mustOpen(t *testing.T, dir, mode string, maxBytes int64) *Cache {
	t.Helper()
	c, err := Open(Config{Dir: dir, Mode: mode, MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ask(t *testing.T, p model.Provider, text string) string {
	t.Helper()
	r, err := p.Generate(context.Background(), req(text))
	if err != nil {
		t.Fatal(err)
	}
	return r.Message.Text()
}

func TestCache_HitMissAndModes(t *testing.T) {
	dir := t.TempDir()
	fp := &fakeProvider{}
	c := mustOpen(t, dir, ModeReadWrite, 0)
	p0, p1 := c.Wrap(fp, "m", 0), c.Wrap(fp, "m", 1)
	// p0 twice (a miss, then a hit), then p1: sample 1 is its own draw.
	for _, p := range []model.Provider{p0, p0, p1} {
		if got := ask(t, p, "a"); got != "answer to a" {
			t.Fatalf("answer %q", got)
		}
	}
	if fp.calls.Load() != 2 { // sample 1 is its own draw
		t.Fatalf("calls %d, want 2", fp.calls.Load())
	}
	if s := c.Stats(); s.Hits != 1 || s.Misses != 2 || s.Writes != 2 {
		t.Fatalf("stats %+v", s)
	}
	// Another model is another key.
	ask(t, c.Wrap(fp, "m2", 0), "a")
	if fp.calls.Load() != 3 {
		t.Fatal("model name is not in the key")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// Persisted: read mode answers from disk and stores nothing.
	c = mustOpen(t, dir, ModeRead, 0)
	ask(t, c.Wrap(fp, "m", 0), "a")
	ask(t, c.Wrap(fp, "m", 0), "b")
	ask(t, c.Wrap(fp, "m", 0), "b")
	if fp.calls.Load() != 5 || c.Stats().Hits != 1 || c.Stats().Writes != 0 {
		t.Fatalf("read mode: calls %d stats %+v", fp.calls.Load(), c.Stats())
	}
	_ = c.Close()

	// Write mode always calls and stores.
	c = mustOpen(t, dir, ModeWrite, 0)
	ask(t, c.Wrap(fp, "m", 0), "a")
	ask(t, c.Wrap(fp, "m", 0), "b")
	if fp.calls.Load() != 7 || c.Stats().Hits != 0 || c.Stats().Writes != 2 {
		t.Fatalf("write mode: calls %d stats %+v", fp.calls.Load(), c.Stats())
	}
	_ = c.Close()
	c = mustOpen(t, dir, ModeRead, 0)
	ask(t, c.Wrap(fp, "m", 0), "b")
	if fp.calls.Load() != 7 {
		t.Fatal("write mode did not store")
	}
	_ = c.Close()

	if c, err := Open(Config{Dir: dir, Mode: ModeOff}); c != nil || err != nil {
		t.Fatalf("off: %v %v", c, err)
	}
	var e *Error
	if _, err := Open(Config{Dir: dir, Mode: "sometimes"}); !errors.As(err, &e) || e.Code != CodeInvalidMode {
		t.Fatalf("bad mode: %v", err)
	}
}

func TestCache_ErrorsAndRefusalsNeverCached(t *testing.T) {
	c := mustOpen(t, t.TempDir(), ModeReadWrite, 0)
	defer c.Close()
	fp := &fakeProvider{fail: true}
	p := c.Wrap(fp, "m", 0)
	for range 2 {
		if _, err := p.Generate(context.Background(), req("a")); err == nil {
			t.Fatal("error swallowed")
		}
	}
	fp.fail, fp.refuse = false, true
	for range 2 {
		if r, err := p.Generate(context.Background(), req("a")); err != nil || r.FinishReason != "content_filter" {
			t.Fatal(r, err)
		}
	}
	if fp.calls.Load() != 4 || c.Stats().Writes != 0 || c.Stats().Hits != 0 {
		t.Fatalf("calls %d stats %+v", fp.calls.Load(), c.Stats())
	}
}

// TestCache_CorruptValueIsAMiss stores a value that fails its checks
// (another key's answer, flipped payload): a miss, never that answer.
func TestCache_CorruptValueIsAMiss(t *testing.T) {
	c := mustOpen(t, t.TempDir(), ModeReadWrite, 0)
	defer c.Close()
	fp := &fakeProvider{}
	p := c.Wrap(fp, "m", 0)
	ask(t, p, "a")
	ask(t, p, "b")
	ka, _ := Key("fake", "m", req("a"), 0)
	kb, _ := Key("fake", "m", req("b"), 0)
	// Swap: a's slot now holds b's (valid) entry, b's slot garbage.
	var vb []byte
	_ = c.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(entryKey(kb))
		if err == nil {
			vb, err = it.ValueCopy(nil)
		}
		return err
	})
	flipped := append([]byte{}, vb...)
	flipped[len(flipped)/2] ^= 0x20
	if err := c.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(entryKey(ka), vb); err != nil {
			return err
		}
		return txn.Set(entryKey(kb), flipped)
	}); err != nil {
		t.Fatal(err)
	}
	if got := ask(t, p, "a"); got != "answer to a" {
		t.Fatalf("answered %q from another key's entry", got)
	}
	if got := ask(t, p, "b"); got != "answer to b" {
		t.Fatalf("answered %q from a corrupted entry", got)
	}
	if s := c.Stats(); s.Corrupt != 2 || fp.calls.Load() != 4 {
		t.Fatalf("stats %+v calls %d", s, fp.calls.Load())
	}
}

// TestCache_CorruptDirectory overwrites every file of a cache directory:
// Open is a typed error, or the cache opens and answers nothing wrong.
func TestCache_CorruptDirectory(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, ModeReadWrite, 0)
	fp := &fakeProvider{}
	for _, q := range []string{"a", "b", "c"} {
		ask(t, c.Wrap(fp, "m", 0), q)
	}
	_ = c.Close()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		for i := range data {
			data[i] ^= 0x5a
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Open(Config{Dir: dir})
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeCacheUnavailable {
			t.Fatalf("untyped error: %v", err)
		}
		return
	}
	defer c.Close()
	for _, q := range []string{"a", "b", "c"} {
		if got := ask(t, c.Wrap(fp, "m", 0), q); got != "answer to "+q {
			t.Fatalf("wrong answer %q", got)
		}
	}
	// A directory that is a file is a typed error too.
	f := filepath.Join(t.TempDir(), "file")
	_ = os.WriteFile(f, []byte("x"), 0o644)
	if _, err := Open(Config{Dir: f}); err == nil {
		t.Fatal("opened a file as a cache")
	}
}

func TestCache_BoundedWithEviction(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, ModeReadWrite, 4096)
	fp := &fakeProvider{}
	p := c.Wrap(fp, "m", 0)
	for i := range 100 {
		ask(t, p, "q"+string(rune('A'+i%26))+string(rune('a'+i/26)))
	}
	s := c.Stats()
	if s.Evictions == 0 || c.size > 4096 {
		t.Fatalf("stats %+v size %d", s, c.size)
	}
	// The newest entry is still there, the oldest is gone.
	before := fp.calls.Load()
	ask(t, p, "q"+string(rune('A'+99%26))+string(rune('a'+99/26)))
	ask(t, p, "qAa")
	if fp.calls.Load() != before+1 {
		t.Fatalf("eviction order: %d calls", fp.calls.Load()-before)
	}
	_ = c.Close()
	// The size survives a reopen.
	c = mustOpen(t, dir, ModeReadWrite, 4096)
	defer c.Close()
	if c.size == 0 || c.size > 4096 {
		t.Fatalf("reopened size %d", c.size)
	}
	var zero [sha256.Size]byte
	if _, ok := c.get(zero); ok {
		t.Fatal("hit on an absent key")
	}
}
